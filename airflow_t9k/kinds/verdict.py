"""What decided a job's end, as a kind's verdict names it: the replicas its rules found ended.

The core decides by rules (seed 001's ``successRules``/``failureRules``, or a kind's defaults) and
by default says so: "The job is failed with rule: { "worker": [1] }". A kind whose API has no
such rules (AscendJob: every pod must succeed, restarts by ``restartPolicy`` within
``runPolicy.backoffLimit``) names what decided instead, from these records
(``JobKind.rule_verdict``).
"""

from __future__ import annotations

from dataclasses import dataclass

# Why a replica that failed is not restarted.
POLICY = "policy"  # its restartPolicy does not restart this end (Never; ExitCode and a code it does not retry)
LIMIT = "limit"  # its own restart limit is spent
BACKOFF = "backoff"  # the job's shared budget (runPolicy.backoffLimit) is spent


@dataclass(frozen=True)
class Ended:
    """One replica the deciding rule names, ended for good."""

    pod: str
    type: str
    phase: str  # Succeeded or Failed
    exit_code: int | None = None  # None: it ended without one (or succeeded)
    policy: str = "Never"  # its restartPolicy
    restarts: int = 0  # restarts it had
    stopped_by: str = ""  # POLICY, LIMIT or BACKOFF for a failed replica; "" for a succeeded one

    @property
    def how(self) -> str:
        """'exit code 1', or 'no exit code' (a pod failed without a container's)."""
        return f"exit code {self.exit_code}" if self.exit_code is not None else "no exit code"
