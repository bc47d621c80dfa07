"""Asset events from a job's result (Airflow's data-aware scheduling).

When the task succeeds, every ``Asset`` in the operator's ``outlets`` gets an event (Airflow
emits one for each outlet of a successful task); this fills its ``extra`` with the job's result,
so a DAG scheduled on the asset reads the metric from the event. With ``asset_from_result``,
the asset itself comes from the result (a ``model_uri`` the training wrote): it is added through
each ``AssetAlias`` in ``outlets``, with the same extra. See docs/airflow.md, "Assets".
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Asset, AssetAlias
from airflow.sdk.exceptions import AirflowFailException

Obj = dict[str, Any]
JOB_KEY = "t9k_job"  # the job that produced the asset, in every event's extra
JOB_FIELDS = ("kind", "namespace", "name", "uid")  # never the API server or anything of the connection


def event_extra(result: Any, job: Obj) -> Obj:
    """The extra of the asset events: the result's keys (a dict result), else ``{"result": ...}``,
    and the job that produced it under ``t9k_job``."""
    extra: Obj = dict(result) if isinstance(result, dict) else ({} if result is None else {"result": result})
    extra[JOB_KEY] = {k: job.get(k) for k in JOB_FIELDS}
    return extra


class AssetsMixin:
    """Part of ``T9kJobOperator``: asset events from the job's result."""

    outlets: list[Any]
    asset_from_result: str | None
    log: Any

    def _check_asset_args(
        self, asset_from_result: str | None, wait_for_completion: bool, result_from: str | None = "auto"
    ) -> None:
        """Refused when the DAG is parsed: outlets that would be updated before the job ran (an
        asset event at submission says the model changed before it was trained), and an asset
        named by a result the task does not read."""
        if not wait_for_completion and any(isinstance(o, (Asset, AssetAlias)) for o in self.outlets or ()):
            raise ValueError("outlets= with wait_for_completion=False would emit their asset events when the job is "
                             "submitted, before it made anything: wait for the job, or put the outlets on a task "
                             "(a T9kJobSensor) that runs after it")  # fmt: skip
        if asset_from_result is None:
            return
        if result_from is None:
            raise ValueError(f"asset_from_result={asset_from_result!r} names a key of the job's result, and "
                             "result_from=None reads none: leave result_from='auto' or name the replica")  # fmt: skip
        if not isinstance(asset_from_result, str) or not asset_from_result:
            raise ValueError(f"asset_from_result must be a key of the job's result, got {asset_from_result!r}")
        if not wait_for_completion:
            raise ValueError("asset_from_result needs the job's result: it cannot be used with wait_for_completion=False")
        if not any(isinstance(o, AssetAlias) for o in self.outlets or ()):
            raise ValueError(f"asset_from_result={asset_from_result!r} adds the asset through an AssetAlias: "
                             "give outlets=[AssetAlias('<name>')] and schedule the consumer on that alias")  # fmt: skip

    def _result_asset(self, result: Any) -> Asset | None:
        """The asset named by ``result[asset_from_result]``; fails the task when the result has no
        such key or it is not a URI Airflow accepts (a retry would run the training again to no end)."""
        if self.asset_from_result is None:
            return None
        key = self.asset_from_result
        value = result.get(key) if isinstance(result, dict) else None
        if not isinstance(value, str) or not value:
            raise AirflowFailException(f"asset_from_result={key!r}: the job's result has no such key with a URI "
                                       f"(result: {str(result)[:300]!r}); write it to /dev/termination-log")  # fmt: skip
        try:
            return Asset(uri=value)
        except (ValueError, TypeError) as exc:
            raise AirflowFailException(
                f"asset_from_result={key!r}: {value!r} is not an asset URI Airflow accepts: {exc}"
            ) from None

    def _emit_assets(self, context: Any, result: Any, job: Obj) -> None:
        """Fill the outlets' events: called once the job has succeeded, before the task ends."""
        outlets = [o for o in self.outlets or () if isinstance(o, (Asset, AssetAlias))]
        if not outlets:
            return
        extra = event_extra(result, job)
        dynamic = self._result_asset(result)
        events = context["outlet_events"]
        for outlet in outlets:
            if isinstance(outlet, Asset):
                events[outlet].extra.update(extra)
                self.log.info("asset event for %s, extra: %s", outlet.uri, extra)
            elif dynamic is not None:
                events[outlet].add(dynamic, extra=extra)
                self.log.info("asset event for %s through alias %s, extra: %s", dynamic.uri, outlet.name, extra)
