"""The T9k Job tab's earlier attempts: for each earlier try of the task instance (Airflow's
TaskInstanceHistory), the job it ran (the task's own record, api/attempts.py) and, while that
job still exists under the recorded uid, its phase, root cause and what the controller kept
before clean-up. Pure: api.py reads the records and the jobs."""

from __future__ import annotations

from typing import Any

from airflow_t9k.ui import view

Obj = dict[str, Any]


def row(earlier: Obj, job: Obj | None, pods: list[Obj], evidence: Obj | None, current_uid: str | None) -> Obj:
    """One earlier try: ``earlier`` from records.earlier_tries; ``job`` as it is now (None when
    gone or replaced); ``evidence`` the data of its own evidence ConfigMap (already checked)."""
    ident = earlier.get("job")
    out = {"try": earlier["try"], "state": earlier.get("state"), "started": earlier.get("started"),
           "ended": earlier.get("ended"), "kind": None, "namespace": None, "name": None, "status": "none",
           "phase": None, "root_cause": None, "kept": None}  # fmt: skip
    if ident is None:
        return out  # that try submitted or recorded no job (it failed before, or ran before the record)
    out.update(kind=ident["kind"], namespace=ident["namespace"], name=ident["name"])
    if ident["uid"] == current_uid:
        out["status"] = "current"  # the try reattached to the job this try has: shown above
        return out
    if job is None:
        out["status"] = "gone"
        return out
    status = job.get("status") or {}
    live = {str(p["metadata"].get("name")) for p in pods}
    out.update(status="present", phase=view.phase(job), root_cause=view.root_cause(status.get("rootCause")),
               kept=view.kept(evidence, live) if evidence else None)  # fmt: skip
    return out
