"""A replica's slot as one pass sees it: its pod, the restarts it has had, and whether its end
is already decided. Restart counts come from the pod's own annotation and from the last status
written, whichever is higher (decisions are recorded before the pod is deleted)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_t9k.controller.reconcile.disruption import disruption, overtaken
from airflow_t9k.controller.reconcile.inplace import pending
from airflow_t9k.controller.reconcile.observe import Observed, is_deleting, pod_phase
from airflow_t9k.kinds.base import ANNOTATION_RESTARTS, Obj

if TYPE_CHECKING:
    from airflow_t9k.controller.reconcile.desired import Slot
    from airflow_t9k.controller.reconcile.status import StatusBuilder


@dataclass
class SlotState:
    slot: Slot
    pod: Obj | None
    restarts: int
    creating: bool = False
    # The pod's end was already counted as a restart by a status write that landed, but the
    # pod was not deleted yet (a crash or a conflict in between): delete it, count nothing.
    restart_recorded: bool = False
    # The kubelet is restarting the pod in place and waits for the controller to allow the run
    # (reconcile/inplace.py): ``pod`` is the view of the pod as if it had ended; the restart is
    # allowed by a patch, not a delete.
    in_place: bool = False
    # The replica failed on a node the job avoids (reconcile/nodes.py): the node's doing, so it is
    # replaced as a disrupted one is, spending nothing. What to say of it.
    node_caused: str | None = None

    @property
    def phase(self) -> str | None:
        if self.pod is None or is_deleting(self.pod):
            return None
        return pod_phase(self.pod)

    @property
    def disrupted(self) -> bool:
        """Failed because the cluster took the pod away (evicted, preempted, node lost), or because
        its group's restart overtook it (``overtaken``)."""
        return self.phase == "Failed" and (
            disruption(self.pod) is not None or overtaken(self.pod) is not None or self.node_caused is not None
        )

    @property
    def ended(self) -> bool:
        """Ended for the rules: a pod whose restart is already decided has not, nor a disrupted one."""
        return self.phase in ("Succeeded", "Failed") and not self.restart_recorded and not self.disrupted

    @property
    def exit_code(self) -> int | None:
        """The failing container's exit code; None when the pod failed without one (evicted)."""
        status = (self.pod or {}).get("status") or {}
        if status.get("reason") == "Evicted":
            return None
        for cs in status.get("containerStatuses") or []:
            code = ((cs.get("state") or {}).get("terminated") or {}).get("exitCode")
            if code:
                return int(code)
        return None

    def can_restart(self, budget: list[int] | None) -> bool:
        """Policy and restarts left for this replica, and the job's shared budget if it has one."""
        succeeded = self.phase == "Succeeded"
        if not self.slot.spec.restart.allows(succeeded, self.restarts, None if succeeded else self.exit_code):
            return False
        return budget is None or budget[0] > 0


def recorded_restarts(sb: StatusBuilder) -> dict[str, int]:
    """Restart counts per replica, as the last status recorded them."""
    return {
        str(entry.get("name")): int(entry.get("restartCount") or 0)
        for task in sb.old.get("tasks") or []
        for entry in task.get("status") or []
    }


def slot_state(slot: Slot, observed: Observed, recorded: dict[str, int]) -> SlotState:
    """A replica's pod and its restart count.

    A pod carries the count it was created under. Restart decisions are written to status
    before the pod is deleted, so a recorded count above the pod's own means the decision
    to restart this pod has landed already: the pass only finishes it.
    """
    pod = observed.pods.get(slot.pod_name)
    on_pod = _attempt(pod)
    done = max(recorded.get(slot.pod_name, 0), on_pod)
    view = pending(pod)
    state = SlotState(slot, view or pod, done, in_place=view is not None)
    state.restart_recorded = pod is not None and done > on_pod and state.phase in ("Succeeded", "Failed")
    return state


def _attempt(pod: Obj | None) -> int:
    try:
        return int(((pod or {}).get("metadata", {}).get("annotations") or {}).get(ANNOTATION_RESTARTS, 0) or 0)
    except ValueError:
        return 0
