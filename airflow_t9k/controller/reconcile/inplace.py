"""In-place restarts: a replica restarted by the kubelet on its node, its pod kept (issue 30, item 1).

Kubernetes 1.36 has container restart rules (KEP-5307, beta, on by default) and their
``RestartAllContainers`` action (KEP-5532, beta, on by default): when a container exits with a
code a rule names, the kubelet stops every container of the pod and starts them again, init
containers first, keeping the pod (its uid, IP, node, volumes, devices): no deletion, no
scheduling, no image pull, no Kueue round trip. The scheduler places such a pod only on nodes
that declare the feature (``status.declaredFeatures``).

A pod built for in-place restarts (``equip``) gets:

- on its main container, ``restartPolicy: Never`` and a ``RestartAllContainers`` rule for the exit
  codes its replica's restart policy restarts (OnFailure: any but 0; ExitCode: 130, 137, 138, 143;
  Always: any; Never or a limit of 0: none);
- an init container ``t9k-restart-gate`` that holds every later container until the controller
  has authorized the run: it counts its own passes in an ``emptyDir`` and waits until the pod's
  annotation ``batch.tensorstack.dev/in-place-restarts`` (read through a downward API volume) is
  at least that count. So a restart the kubelet started on its own runs the program again only
  once the controller has counted it against the replica's limit and the job's budget, and
  written that to the status (decide durably, then act): a replica still runs at most
  ``1 + limit`` times;
- a sidecar ``t9k-restart-agent`` (an init container with ``restartPolicy: Always``) that exits
  with code 86, which its own rule turns into ``RestartAllContainers``, when the controller raises
  the annotation above the count the gate let through: how a fixed-world group restarts its
  healthy pods in place.

Both run ``sh`` from the main container's image (or the controller's ``--restart-agent-image``),
with the main container's security context and 10m CPU / 32Mi memory (requests = limits, so a
Guaranteed pod stays Guaranteed). Pure: no I/O.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from airflow_t9k.controller.reconcile.actions import Patch
from airflow_t9k.kinds.base import ANNOTATION_RESTARTS, LABEL_PREFIX, RETRYABLE_EXIT_CODES

if TYPE_CHECKING:
    from airflow_t9k.kinds.base import JobKind, RestartPolicy

Obj = dict[str, Any]

GATE, AGENT = "t9k-restart-gate", "t9k-restart-agent"
ANNOTATION_AUTHORIZED = f"{LABEL_PREFIX}/in-place-restarts"  # in-place restarts of this pod the controller allowed
ANNOTATION_GROUP = f"{LABEL_PREFIX}/group-restart"  # the disruption whose group restart this pod was asked for
AGENT_EXIT = 86
STATE_VOLUME, INFO_VOLUME = "t9k-restart", "t9k-restart-info"
STATE_DIR, INFO_DIR = "/t9k-restart", "/t9k-restart-info"
RESTARTING = "RestartingAllContainers"  # the kubelet's reason for a container it restarts in place
STRATEGIES = ("Auto", "InPlace", "Recreate")
RESOURCES = {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"cpu": "10m", "memory": "32Mi"}}

_AUTHORIZED = f'a() {{ v=$(cat {INFO_DIR}/authorized 2>/dev/null); echo "${{v:-0}}"; }}; '
GATE_SCRIPT = (
    "trap 'exit 143' TERM; " + _AUTHORIZED + f"n=$(cat {STATE_DIR}/passed 2>/dev/null || echo 0); "
    'until [ "$(a)" -ge "$n" ]; do sleep 0.2; done; '
    f"a > {STATE_DIR}/epoch; echo $((n + 1)) > {STATE_DIR}/passed"
)
AGENT_SCRIPT = (
    "trap 'exit 0' TERM; " + _AUTHORIZED + f"e=$(cat {STATE_DIR}/epoch 2>/dev/null || echo 0); "
    f'while [ "$(a)" -le "$e" ]; do sleep 0.2; done; exit {AGENT_EXIT}'
)


def rules(policy: RestartPolicy) -> list[Obj]:
    """The main container's rules: restart in place on the codes its replica's policy restarts."""
    if policy.limit <= 0 or policy.policy == "Never":
        return []
    if policy.policy == "Always":
        return [_rule("In", [0]), _rule("NotIn", [0])]
    if policy.policy == "ExitCode":
        if policy.retry_any_signal:  # Kubeflow's ExitCode (AscendJob): any code from a signal
            return [_rule("NotIn", list(range(128)))]
        return [_rule("In", sorted(RETRYABLE_EXIT_CODES))]
    return [_rule("NotIn", [0])]  # OnFailure


def _rule(operator: str, values: list[int]) -> Obj:
    return {"action": "RestartAllContainers", "exitCodes": {"operator": operator, "values": values}}


def equip(kind: JobKind, pod: Obj, policy: RestartPolicy, agent_image: str | None = None) -> None:
    """Make ``pod`` (a manifest about to be created) restartable in place (module docstring)."""
    spec = pod["spec"]
    main = kind.main_container(spec)
    if main is None or not main.get("image"):
        return
    main["restartPolicy"] = "Never"
    main["restartPolicyRules"] = rules(policy)
    if not main["restartPolicyRules"]:
        del main["restartPolicyRules"]
    mounts = [{"name": STATE_VOLUME, "mountPath": STATE_DIR}, {"name": INFO_VOLUME, "mountPath": INFO_DIR, "readOnly": True}]
    base: Obj = {"image": agent_image or main["image"], "volumeMounts": mounts, "resources": copy.deepcopy(RESOURCES)}
    for key in ("imagePullPolicy", "securityContext"):
        if key in main and not (key == "imagePullPolicy" and agent_image):
            base[key] = copy.deepcopy(main[key])
    gate = {"name": GATE, **copy.deepcopy(base), "command": ["sh", "-c", GATE_SCRIPT]}
    agent = {"name": AGENT, **copy.deepcopy(base), "command": ["sh", "-c", AGENT_SCRIPT], "restartPolicy": "Always",
             "restartPolicyRules": [_rule("In", [AGENT_EXIT])]}  # fmt: skip
    spec["initContainers"] = [gate, agent, *(spec.get("initContainers") or [])]
    info = {"items": [{"path": "authorized", "fieldRef": {"fieldPath": f"metadata.annotations['{ANNOTATION_AUTHORIZED}']"}}]}
    spec["volumes"] = [*(spec.get("volumes") or []), {"name": STATE_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
                       {"name": INFO_VOLUME, "downwardAPI": info}]  # fmt: skip


def equipped(pod: Obj | None) -> bool:
    return any(isinstance(c, dict) and c.get("name") == GATE for c in ((pod or {}).get("spec") or {}).get("initContainers") or [])


def authorized(pod: Obj) -> int:
    try:
        return int(((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_AUTHORIZED) or 0)
    except ValueError:
        return 0


def _restarting_container(pod: Obj) -> Obj | None:
    """The container whose exit the kubelet turns into an in-place restart (``equip`` gave it rules)."""
    for c in (pod.get("spec") or {}).get("containers") or []:
        if isinstance(c, dict) and any(r.get("action") == "RestartAllContainers" for r in c.get("restartPolicyRules") or []):
            return c
    return None


def _matches(rule_list: list[Obj], code: int) -> bool:
    for r in rule_list:
        codes = (r.get("exitCodes") or {}).get("values") or []
        op = (r.get("exitCodes") or {}).get("operator")
        if (op == "In" and code in codes) or (op == "NotIn" and code not in codes):
            return True
    return False


def pending(pod: Obj | None) -> Obj | None:
    """An in-place restart of ``pod`` that the controller has not authorized yet, as the pod would
    look had it ended (phase ``Failed``, or ``Succeeded`` for a code 0 under ``Always``, its main
    container terminated with the code it exited with): the decisions then treat it as any ended
    replica. None when there is none.

    The kubelet shows it in two ways: the main container terminated with a code its rules restart
    while the pod is not terminal (the restart is starting), or the main container's
    ``restartCount`` above the restarts the controller authorized (it has restarted and waits at
    the gate). The code is the terminated state's; once the kubelet removed the old container, only
    its own record (``RestartingAllContainers``, 137) may be left."""
    if pod is None or not equipped(pod) or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return None
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return None
    main = _restarting_container(pod)
    cs = next((s for s in status.get("containerStatuses") or [] if main is not None and s.get("name") == main.get("name")), None)
    if main is None or cs is None:
        return None
    allowed = authorized(pod)
    count = int(cs.get("restartCount") or 0)
    now_ended = (cs.get("state") or {}).get("terminated")
    last = (cs.get("lastState") or {}).get("terminated")
    if now_ended and count == allowed and _matches(main.get("restartPolicyRules") or [], int(now_ended.get("exitCode") or 0)):
        ended = now_ended
    elif count > allowed:
        candidates = [t for t in (now_ended, last) if t]
        ended = next((t for t in candidates if t.get("reason") != RESTARTING), candidates[0] if candidates else None)
        ended = ended or {"exitCode": 137, "reason": RESTARTING}
    else:
        return None
    view = copy.deepcopy(pod)
    code = int(ended.get("exitCode") or 0)
    view["status"]["phase"] = "Succeeded" if code == 0 else "Failed"
    for c in view["status"].get("containerStatuses") or []:
        if c.get("name") == cs.get("name"):
            c["state"] = {"terminated": copy.deepcopy(ended)}
    return view


def authorize(pod: Obj, restarts: int) -> Patch:
    """Let the pod's restart run: the gate passes once ``in-place-restarts`` reaches its count;
    ``restart-count`` (the env ``T9K_RESTART_COUNT`` reads it at the container's start) follows
    the replica's restarts. ``metadata.uid`` in a merge patch is a precondition."""
    meta = pod["metadata"]
    annotations = {ANNOTATION_AUTHORIZED: str(authorized(pod) + 1), ANNOTATION_RESTARTS: str(restarts)}
    return Patch("Pod", meta["name"], {"metadata": {"uid": meta.get("uid"), "annotations": annotations}})


def restart_in_place(pod: Obj, cause: str, restarts: int | None = None) -> Patch | None:
    """Ask a healthy pod's agent to restart it in place, once per ``cause`` (a group restart);
    None when this pod was asked for it already. ``restarts``: the replica's new restart count,
    when this restart is counted against it (a stall's: reconcile/stall.py)."""
    meta = pod["metadata"]
    if (meta.get("annotations") or {}).get(ANNOTATION_GROUP) == cause:
        return None
    annotations = {ANNOTATION_AUTHORIZED: str(authorized(pod) + 1), ANNOTATION_GROUP: cause}
    if restarts is not None:
        annotations[ANNOTATION_RESTARTS] = str(restarts)
    return Patch("Pod", meta["name"], {"metadata": {"uid": meta.get("uid"), "annotations": annotations}})


def can_restart_in_place(pod: Obj | None) -> bool:
    """A live, equipped pod whose agent can still be asked (not ended, not going)."""
    if pod is None or not equipped(pod) or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return (pod.get("status") or {}).get("phase") in ("Pending", "Running")
