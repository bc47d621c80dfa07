"""Part of ``T9kJobOperator``: the run's record for the task's history across DAG runs, and
``regression_threshold`` (``api/history.py``; docs/retraining.md, "A task's history")."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from airflow_t9k.api import history
from airflow_t9k.operators.earlier import earlier_xcom

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

    def _earlier_best(self, context: Any) -> dict[str, Obj]:
        """``best`` of the latest earlier run's record (Airflow's XCom, this task and map index)."""
        earlier = earlier_xcom(context, history.HISTORY_KEY, "the comparison with earlier runs", self.log)
        return history.best_of(earlier.get("best")) if isinstance(earlier, dict) else {}

    def _record_history(self, context: Any, ours: Obj, event: Obj, result: Any) -> None:
        ti = context["ti"]
        state = event.get("state") or {}
        succeeded = event.get("status") == "success"
        values = history.values_of(state.get("metrics"), result)
        best = self._earlier_best(context)
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
