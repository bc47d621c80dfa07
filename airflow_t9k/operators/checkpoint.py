"""Part of ``T9kJobOperator``: ``checkpoint=``, ``T9K_ATTEMPT``, the termination grace period,
and XCom ``checkpoint`` (what the program reported) and ``checkpoint_location``.

The choices (one directory per DAG run, task and map index; never the try number) are in
``airflow_t9k.api.checkpoint`` and docs/checkpoints.md.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk.exceptions import AirflowException

from airflow_t9k.api import checkpoint as ckpt

Obj = dict[str, Any]
XCOM_CHECKPOINT = "checkpoint"
XCOM_LOCATION = "checkpoint_location"


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
    log: Any
    _push: Any

    def _init_checkpoint(self, checkpoint: Any, termination_grace_period: float | timedelta | None,
                         scope: str = "run") -> None:  # fmt: skip
        # Checked when the DAG is parsed unless templated; then again when rendered.
        if checkpoint is not None and not _templated(checkpoint):
            ckpt.parse(checkpoint)
        if scope not in ckpt.SCOPES:
            raise ValueError(f"checkpoint_scope must be one of {ckpt.SCOPES}, got {scope!r}")
        self.checkpoint = checkpoint
        self.checkpoint_scope = scope
        self.termination_grace_period = grace_seconds(termination_grace_period)

    def _checkpoint_of(self, ti: Any) -> tuple[ckpt.Checkpoint, str] | None:
        """The parsed ``checkpoint`` and this task's directory in it (the mount's subPath)."""
        if self.checkpoint is None:
            return None
        try:
            parsed = ckpt.parse(self.checkpoint)
        except ValueError as exc:
            raise AirflowException(str(exc)) from None
        map_index = getattr(ti, "map_index", -1)
        own = int(getattr(ti, "try_number", 0) or 0) if self.checkpoint_scope == "try" else None
        return parsed, ckpt.sub_path(parsed, ti.dag_id, ti.run_id, ti.task_id, -1 if map_index is None else map_index, own)

    def _apply_checkpoint(self, job: Obj, ti: Any) -> None:
        """Mount, env and grace period on every replica of ``job`` (in place)."""
        found = self._checkpoint_of(ti)
        if found is not None and (why := ckpt.warning(found[0])) is not None:
            self.log.warning("%s", why)
        try:
            ckpt.apply(job, attempt=int(getattr(ti, "try_number", 0) or 0), checkpoint=found[0] if found else None,
                       directory=found[1] if found else None, grace_seconds=self.termination_grace_period)  # fmt: skip
        except ValueError as exc:
            raise AirflowException(str(exc)) from None

    def _push_checkpoint_location(self, context: Any) -> None:
        found = self._checkpoint_of(context["ti"])
        if found is not None:
            where = ckpt.location(*found)
            self.log.info("checkpoints of this task: %s at %s in the volume, mounted at %s (%s)", where["volume"],
                          where["sub_path"], where["mount_path"], ckpt.ENV_DIR)  # fmt: skip
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
