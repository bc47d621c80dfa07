"""Part of ``T9kJobOperator``: the run's record for the task's history across DAG runs, and
``regression_threshold`` (``api/history.py``; docs/retraining.md, "A task's history")."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from airflow_t9k.api import history

Obj = dict[str, Any]


class HistoryMixin:
    """XCom ``t9k_history`` at the end of each try that ended with its job; regressions flagged."""

    log: Any
    regression_threshold: dict[str, float]
    lower_is_better: frozenset[str]
    _push: Callable[[Any, str, Any], None]

    def _init_history(self, thresholds: Mapping[str, float] | None, lower_is_better: Collection[str] | None) -> None:
        self.regression_threshold = history.check_thresholds(thresholds)
        if isinstance(lower_is_better, str):
            raise ValueError("lower_is_better is a collection of metric names, not one string")
        self.lower_is_better = frozenset(str(n) for n in lower_is_better or ())

    def _earlier_best(self, ti: Any) -> dict[str, Obj]:
        """``best`` of the latest earlier run's record (Airflow's XCom, this task and map index)."""
        pull = getattr(ti, "xcom_pull", None)
        if pull is None:
            return {}
        map_index = getattr(ti, "map_index", -1)
        earlier = pull(task_ids=ti.task_id, key=history.HISTORY_KEY, include_prior_dates=True,
                       map_indexes=-1 if map_index is None else map_index)  # fmt: skip
        return history.best_of(earlier.get("best")) if isinstance(earlier, dict) else {}

    def _record_history(self, context: Any, ours: Obj, event: Obj, result: Any) -> None:
        ti = context["ti"]
        state = event.get("state") or {}
        succeeded = event.get("status") == "success"
        values = history.values_of(state.get("metrics"), result)
        best = self._earlier_best(ti)
        found = history.regressions(values, best, self.regression_threshold, self.lower_is_better) if succeeded else []
        for regression in found:
            self.log.warning("regression: %s", history.describe(regression))
        if found:
            self._push(ti, history.REGRESSION_KEY, found)
        kept = history.carried(best, values if succeeded else {}, str(ti.run_id), self.lower_is_better)
        record = history.record(event.get("phase"), values, state.get("usage"), int(state.get("restarts") or 0), kept, found,
                                ours)  # fmt: skip
        total = getattr(self, "_task_total", None)  # every try's and re-run's GPU-hours (api/taskcost.py)
        if isinstance(total, dict):
            record["task_accelerator_hours"], record["tries"] = total.get("accelerator_hours"), total.get("tries")
        self._push(ti, history.HISTORY_KEY, record)
