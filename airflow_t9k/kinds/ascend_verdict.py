"""An AscendJob's end named by what decided it (issue 47, item 5).

The core decides every kind by rules, and for T9k kinds says which ("The job is failed with
rule: { "Worker": [1] }", seed 001's words). AscendJob has no such rules (seed 002): it succeeds
when every pod has, and fails when a replica fails and its ``restartPolicy`` does not restart it,
or when the job's ``runPolicy.backoffLimit`` is spent. Its Failed condition says that instead:

- ``ReplicaFailed``: the replica, its exit code, and the restart policy that does not restart it
  (``Never``; ``ExitCode`` and a code below 128, which Kubeflow's rule, inherited by
  ascend-operator, does not retry);
- ``BackoffLimitExceeded`` (batch/v1 Job's reason for the same): the replica, its exit code, the
  restarts it had and the limit spent;
- ``AscendJobSucceeded`` (Kubeflow's ``<Kind>Succeeded``, as the other conditions' reasons are):
  every pod succeeded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_t9k.kinds.verdict import BACKOFF, LIMIT, POLICY

if TYPE_CHECKING:
    from airflow_t9k.kinds.base import Obj
    from airflow_t9k.kinds.verdict import Ended

# Kubeflow's IsRetryableExitCode, which ascend-operator inherits: a signal's code is retried.
RETRYABLE_FROM = 128


def policy_says(e: Ended) -> str:
    """Why its restart policy does not restart this end, in the policy's own terms."""
    if e.policy == "ExitCode":
        return f"restartPolicy ExitCode restarts only exit codes from a signal ({RETRYABLE_FROM} and above)"
    return f"restartPolicy {e.policy} restarts no failed replica"


def verdict(job: Obj, phase: str, ended: list[Ended], backoff_limit: int | None) -> tuple[str, str] | None:
    """(reason, message) of the Succeeded or Failed condition; None: nothing to name (the core's)."""
    name = job["metadata"]["name"]
    if phase == "Succeeded":
        return "AscendJobSucceeded", (f"AscendJob {name} succeeded: all {len(ended)} pods succeeded (it succeeds only "
                                      "when every pod has, whatever successPolicy says; seed 002).")  # fmt: skip
    failed = [e for e in ended if e.phase == "Failed"]
    if not failed:
        return None
    first = failed[0]
    replica = f"replica {first.pod} ({first.type}) failed with {first.how}"
    if first.stopped_by in (LIMIT, BACKOFF):
        limit = "unlimited" if backoff_limit is None else str(backoff_limit)
        return "BackoffLimitExceeded", (f"AscendJob {name} failed: {replica} after {first.restarts} restart(s), and "
                                        f"runPolicy.backoffLimit ({limit}) is spent (restartPolicy {first.policy}).")  # fmt: skip
    if first.stopped_by == POLICY:
        return "ReplicaFailed", (f"AscendJob {name} failed: {replica} and was not restarted: {policy_says(first)}. An "
                                 "AscendJob succeeds only when every pod has (seed 002).")  # fmt: skip
    return None
