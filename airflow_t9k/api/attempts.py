"""Which job each try of a task ran: the task's own record, kept across tries.

XCom ``t9k_job`` names the current try's job only (Airflow clears a task instance's XComs when a
new try starts), and a job's ``airflow-t9k.io/*`` annotations and labels are written by whoever
creates it, so neither can say which job an earlier try ran. The operator therefore appends
``{try, kind, namespace, name, uid}`` to the key ``t9k_jobs`` of Airflow's task state store, which
retries (and Clears) of the same task instance share. The worker running the task writes it,
but not only it: the task's own code could, and so can users allowed to edit the task state
store through the REST API: what an entry names is a claim to check against the job, not proof.
The T9k Job tab reads it through Airflow's state-store backend (ui/records.py). Pure.
"""

from __future__ import annotations

from typing import Any

from airflow_t9k.api.identity import checked

Obj = dict[str, Any]
ATTEMPTS_KEY = "t9k_jobs"
MAX_ATTEMPTS = 20  # the last tries kept: a task retried more than this shows its latest
FIELDS = ("kind", "namespace", "name", "uid")


def parse(value: Any) -> list[Obj]:
    """The well-formed entries of a stored history, oldest try first (anything else dropped)."""
    out = []
    for e in value if isinstance(value, list) else []:
        if not isinstance(e, dict) or isinstance(e.get("try"), bool) or not isinstance(e.get("try"), int):
            continue
        if (identity := checked(e)) is not None:  # its fields go into request paths (api/identity.py)
            out.append({"try": e["try"], **identity})
    return sorted(out, key=lambda e: e["try"])


def record(history: Any, try_number: int, identity: Obj) -> list[Obj]:
    """``history`` with this try's job: a try that reattaches again (a restarted worker) replaces
    its own entry; at most ``MAX_ATTEMPTS`` entries, the latest."""
    entry = {"try": int(try_number), **{k: str(identity[k]) for k in FIELDS}}
    kept = [e for e in parse(history) if e["try"] != entry["try"]]
    return sorted([*kept, entry], key=lambda e: e["try"])[-MAX_ATTEMPTS:]
