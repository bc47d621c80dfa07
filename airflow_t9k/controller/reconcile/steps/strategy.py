"""How this job's replicas restart: in place where the cluster offers it, else by recreating them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_t9k.controller.reconcile.actions import Emit

if TYPE_CHECKING:
    from airflow_t9k.controller.reconcile.passstate import PassState

STATUS = "restartStrategy"  # status: {"strategy": "InPlace" | "Recreate", "reason": ...}, decided once


def strategy(p: PassState) -> PassState:
    """``spec.restartStrategy`` (``Auto`` by default) against what the cluster offers, decided at the
    first pass and kept (``status.restartStrategy``): every pod of a job is built the same way.
    ``InPlace`` asked for where the cluster cannot do it falls back to recreating, with a Warning."""
    kept = p.sb.old.get(STATUS)
    if isinstance(kept, dict) and kept.get("strategy") in ("InPlace", "Recreate"):
        p.in_place = kept["strategy"] == "InPlace"
        return p
    asked = p.kind.restart_strategy(p.job)
    problem = p.observed.in_place_problem
    if asked == "Recreate":
        decided = {"strategy": "Recreate", "reason": "spec.restartStrategy is Recreate."}
    elif problem is not None:
        decided = {"strategy": "Recreate", "reason": f"In-place restarts are not available here: {problem}."}
        if asked == "InPlace":
            p.events.append(Emit("Warning", "InPlaceRestartUnavailable",
                                 f"spec.restartStrategy is InPlace, but {decided['reason'][0].lower()}"
                                 f"{decided['reason'][1:]} Replicas are recreated to restart."))  # fmt: skip
    else:
        decided = {"strategy": "InPlace", "reason": f"spec.restartStrategy is {asked}; the cluster restarts containers "
                   "in place (RestartAllContainers)."}  # fmt: skip
    p.sb.new[STATUS] = decided
    p.in_place = decided["strategy"] == "InPlace"
    return p
