"""Part of ``T9kJobOperator``: ``checkpoint=``, ``T9K_ATTEMPT``, the termination grace period,
and XCom ``checkpoint`` (what the program reported) and ``checkpoint_location``.

The choices (one directory per DAG run, task, loop iteration and map index, and inside it one per
series of tries, per try, or per configuration: ``checkpoint_scope``) are in
``airflow_t9k.api.checkpoint`` and docs/checkpoints.md. The location the task reports is the one of the job it actually ran,
read from that job: a try that reattaches to an earlier try's job reports that job's directory.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk.exceptions import AirflowException

from airflow_t9k.api import checkpoint as ckpt
from airflow_t9k.api import specdigest
from airflow_t9k.api.rerun import first_try
from airflow_t9k.compat import loop_iteration

Obj = dict[str, Any]
XCOM_CHECKPOINT = "checkpoint"
XCOM_LOCATION = "checkpoint_location"
# In the task state store: the job a try last ran, its spec digest and checkpoint location (for a
# retry that delivers a job deleted since, and for checkpoint_scope="run"'s next configuration).
CHECKPOINT_KEY = "t9k_checkpoint"


def _templated(value: Any) -> bool:
    return "{{" in str(value)


def grace_seconds(value: float | timedelta | None) -> int | None:
    """``termination_grace_period`` as the pod's whole seconds; ValueError for a negative one."""
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0 or seconds != int(seconds):
        raise ValueError(f"termination_grace_period must be a whole number of seconds >= 0 (or a timedelta), got {value!r}")
    return int(seconds)


class CheckpointMixin:
    """Applies ``checkpoint`` and ``termination_grace_period`` to the job, and reports the
    checkpoint the job ended with."""

    checkpoint: Any
    checkpoint_scope: str
    termination_grace_period: int | None
    retries: Any
    log: Any
    _push: Any

    def _init_checkpoint(self, checkpoint: Any, termination_grace_period: float | timedelta | None,
                         scope: str = ckpt.DEFAULT_SCOPE) -> None:  # fmt: skip
        # Checked when the DAG is parsed unless templated; then again when rendered.
        if checkpoint is not None and not _templated(checkpoint):
            ckpt.parse(checkpoint)
        if scope not in ckpt.SCOPES:
            raise ValueError(f"checkpoint_scope must be one of {ckpt.SCOPES}, got {scope!r}")
        self.checkpoint = checkpoint
        self.checkpoint_scope = scope
        self.termination_grace_period = grace_seconds(termination_grace_period)

    def _checkpoint_of(self, ti: Any, iteration: int | None = None) -> tuple[ckpt.Checkpoint, str] | None:
        """The parsed ``checkpoint`` and this task's directory in it (the mount's subPath);
        ``iteration``: the Task Loop iteration, whose training starts in a directory of its own."""
        if self.checkpoint is None:
            return None
        try:
            parsed = ckpt.parse(self.checkpoint)
        except ValueError as exc:
            raise AirflowException(str(exc)) from None
        map_index = getattr(ti, "map_index", -1)
        try_number = int(getattr(ti, "try_number", 0) or 0)
        series = first_try(try_number, getattr(ti, "max_tries", None), self.retries)
        own = ckpt.scope_dir(self.checkpoint_scope, try_number, series)
        index = -1 if map_index is None else map_index
        return parsed, ckpt.sub_path(parsed, ti.dag_id, ti.run_id, ti.task_id, index, own=own, iteration=iteration)

    def _apply_checkpoint(self, job: Obj, ti: Any, iteration: int | None = None) -> None:
        """Mount, env and grace period on every replica of ``job`` (in place)."""
        found = self._checkpoint_of(ti, iteration)
        if found is not None and (why := ckpt.warning(found[0])) is not None:
            self.log.warning("%s", why)
        try:
            ckpt.apply(job, attempt=int(getattr(ti, "try_number", 0) or 0), checkpoint=found[0] if found else None,
                       directory=found[1] if found else None, grace_seconds=self.termination_grace_period)  # fmt: skip
        except ValueError as exc:
            raise AirflowException(str(exc)) from None

    def _checkpoint_for_new_job(self, job: Obj, store: Any) -> None:
        """``checkpoint_scope="run"``: a job about to be submitted whose spec differs from the job
        this task ran before it in its DAG run (a Clear after the DAG or a sweep's element changed)
        mounts a directory of its own configuration, ``<task's>/spec-<digest>``; the same spec
        keeps the directory that job had (in place)."""
        if self.checkpoint_scope != "run" or store is None or (here := ckpt.location_in(job)) is None:
            return
        before = store.get(CHECKPOINT_KEY)
        digest = specdigest.recorded(job)
        if not isinstance(before, dict) or not digest:
            return
        theirs, where = before.get("digest"), before.get("location")
        base = here["sub_path"]  # "run": the task's own directory
        if not isinstance(theirs, str) or not specdigest.comparable(theirs) or not specdigest.comparable(digest):
            return  # the job before has no digest (an older version): the task's directory, as it had
        if theirs == digest:
            kept = where.get("sub_path") if isinstance(where, dict) else None
            if isinstance(kept, str) and kept.startswith(f"{base}/spec-"):  # this configuration's own, from before
                ckpt.set_sub_path(job, kept)
            return
        own = ckpt.config_dir(base, digest)
        self.log.info("checkpoint_scope='run': the job this try submits differs from the one this task ran before in "
                      "this DAG run; its checkpoints go to %s, not to that job's (%s)", own,
                      where.get("sub_path") if isinstance(where, dict) else base)  # fmt: skip
        ckpt.set_sub_path(job, own)

    def _push_checkpoint_location(self, context: Any, used: Obj | None = None, uid: str | None = None) -> None:
        """XCom ``checkpoint_location``: where the job this try ran (``used``, as the API server
        returned it; else the job of ``uid`` a try recorded, for a delivery whose job is gone)
        keeps its checkpoints, read from that job's own mount; recorded in the task state store."""
        store = context.get("task_state_store")
        where: Obj | None = None
        if used is not None:
            where = ckpt.location_in(used)
            if where is None and self.checkpoint is not None:
                meta = used.get("metadata") or {}
                self.log.info("the job this try runs (%s/%s) mounts no checkpoint: it was submitted without checkpoint=",
                              meta.get("namespace"), meta.get("name"))  # fmt: skip
            if where is not None and store is not None and (meta := used.get("metadata") or {}).get("uid"):
                store.set(CHECKPOINT_KEY, {"uid": meta["uid"], "digest": specdigest.recorded(used), "location": where})
        else:
            before = store.get(CHECKPOINT_KEY) if store is not None else None
            if uid and isinstance(before, dict) and before.get("uid") == uid:
                where = before.get("location") if isinstance(before.get("location"), dict) else None
            elif (found := self._checkpoint_of(context["ti"], loop_iteration(context))) is not None:
                where = ckpt.location(*found)
        if where is not None:
            self.log.info("checkpoints of this task: %s at %s in the volume, mounted at %s (%s)", where.get("volume"),
                          where.get("sub_path"), where.get("mount_path"), ckpt.ENV_DIR)  # fmt: skip
            self._push(context["ti"], XCOM_LOCATION, where)

    def _finish(self, context: Any, event: Obj) -> Obj:
        self._finishing_ti = context["ti"]
        return super()._finish(context, event)  # type: ignore[misc]  # a mixin: EndMixin's, later in the operator's MRO

    def _result(self, event: Obj) -> Any:
        """The result (EndMixin's); a checkpoint it reports goes to XCom ``checkpoint``, for a
        failed job too (its retry resumes from there)."""
        result = super()._result(event)  # type: ignore[misc]  # a mixin: EndMixin's, later in the operator's MRO
        reported = ckpt.reported(result)
        ti = getattr(self, "_finishing_ti", None)
        if reported is not None and ti is not None:
            self.log.info("the job ended with checkpoint %s", reported)
            self._push(ti, XCOM_CHECKPOINT, reported)
        return result
