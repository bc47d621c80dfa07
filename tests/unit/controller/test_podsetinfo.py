"""What Kueue's admission puts on an admitted job's pods (issue 30, item 3): flavors, the podset
label, topology-aware scheduling's gate, admission checks' podSetUpdates, and conflicts."""

from __future__ import annotations

import copy

import pytest

from airflow_t9k.controller.reconcile import Create, Observed, ReplaceStatus, plan
from airflow_t9k.controller.reconcile.podsetinfo import (
    PODSET_LABEL,
    TOPOLOGY_GATE,
    UNCONSTRAINED,
    WORKLOAD_ANNOTATION,
    Conflict,
    apply,
    from_admission,
    topology_request,
)
from airflow_t9k.controller.reconcile.queueing import podsets
from airflow_t9k.kinds.registry import get_kind
from tests.builders import NOW
from tests.unit.controller.test_plan_queueing import ADMISSION, ADMITTED, FLAVOR, WL, queued, wl

NODE = {"cloud.example/provisioned": "pr-7"}
TOLERATE = {"key": "provisioned", "operator": "Exists", "effect": "NoSchedule"}
GPU_TOLERATION = FLAVOR["spec"]["tolerations"][0]


def check(name: str = "prov", podset: str = "worker", state: str = "Ready", **update) -> dict:
    return {"name": name, "state": state, "message": "", "lastTransitionTime": "x",
            "podSetUpdates": [{"name": podset, **update}]}  # fmt: skip


def admitted(*checks: dict, topology: bool = False, request: dict | None = None) -> dict:
    w = wl(*ADMITTED, admission=copy.deepcopy(ADMISSION))
    w["status"]["admissionChecks"] = list(checks)
    if topology:
        w["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] = {"levels": ["kubernetes.io/hostname"]}
    w["spec"] = {"podSets": [{"name": "worker", "count": 2, **({"topologyRequest": request} if request else {})}]}
    return w


FLAVORS = {"a100": FLAVOR}
WLA = {WORKLOAD_ANNOTATION: WL}


@pytest.mark.parametrize(
    ("w", "labels", "annotations", "selector", "tolerations", "gates"),
    [
        (admitted(), {PODSET_LABEL: "worker"}, WLA, {"gpu": "a100"}, [GPU_TOLERATION], []),
        (admitted(check(labels={"l": "1"}, annotations={"a": "2"}, nodeSelector=NODE, tolerations=[TOLERATE])),
         {PODSET_LABEL: "worker", "l": "1"}, {**WLA, "a": "2"}, {"gpu": "a100", **NODE}, [GPU_TOLERATION, TOLERATE], []),
        (admitted(check(podset="other", labels={"l": "1"})), {PODSET_LABEL: "worker"}, WLA, {"gpu": "a100"},
         [GPU_TOLERATION], []),  # another podSet's update
        (admitted(check(tolerations=[GPU_TOLERATION])), {PODSET_LABEL: "worker"}, WLA, {"gpu": "a100"}, [GPU_TOLERATION],
         []),  # a toleration once
        (admitted(topology=True), {PODSET_LABEL: "worker"}, {WORKLOAD_ANNOTATION: WL, UNCONSTRAINED: "true"},
         {"gpu": "a100"}, [GPU_TOLERATION], [TOPOLOGY_GATE]),
        (admitted(topology=True, request={"required": "kubernetes.io/hostname"}), {PODSET_LABEL: "worker"},
         {WORKLOAD_ANNOTATION: WL}, {"gpu": "a100"}, [GPU_TOLERATION], [TOPOLOGY_GATE]),
    ],
)  # fmt: skip
def test_from_admission(w, labels, annotations, selector, tolerations, gates):
    info = from_admission(w, "worker", FLAVORS)
    assert (info.labels, info.annotations, info.node_selector, info.tolerations, info.gates) == (
        labels, annotations, selector, tolerations, gates)  # fmt: skip


@pytest.mark.parametrize(
    ("w", "pod_spec", "needle"),
    [
        # a check against the flavor's node label
        (admitted(check(nodeSelector={"gpu": "h100"})), {}, "ResourceFlavor a100 sets 'a100', admission check prov sets 'h100'"),
        # two checks against each other
        (admitted(check("a", labels={"zone": "1"}), check("b", labels={"zone": "2"})), {},
         "admission check a sets '1', admission check b sets '2'"),
        # a check against the pod's own nodeSelector
        (admitted(check(nodeSelector={"pool": "spot"})), {"nodeSelector": {"pool": "on-demand"}},
         "replica job-worker-0 sets 'on-demand', admission check prov sets 'spot'"),
    ],
)  # fmt: skip
def test_a_conflict_names_both_sides(w, pod_spec, needle):
    pod = {"metadata": {"labels": {"app": "x"}}, "spec": copy.deepcopy(pod_spec)}
    with pytest.raises(Conflict, match=needle):
        apply(pod, from_admission(w, "worker", FLAVORS), source="replica job-worker-0")


def test_apply_merges_into_the_pod():
    pod = {"metadata": {"labels": {"app": "x"}, "annotations": {"keep": "me"}}, "spec": {"tolerations": [TOLERATE]}}
    apply(pod, from_admission(admitted(check(labels={"l": "1"}, tolerations=[TOLERATE]), topology=True), "worker", FLAVORS))
    assert pod["metadata"]["labels"] == {"app": "x", PODSET_LABEL: "worker", "l": "1"}
    assert pod["metadata"]["annotations"]["keep"] == "me"
    assert pod["spec"]["tolerations"] == [TOLERATE, GPU_TOLERATION]
    assert pod["spec"]["schedulingGates"] == [{"name": TOPOLOGY_GATE}]


def test_an_admitted_job_with_podset_updates_creates_its_pods_with_them():
    w = admitted(check(labels={"l": "1"}, nodeSelector=NODE, tolerations=[TOLERATE]))
    p = plan(queued(), Observed.of(w, FLAVOR, queueing="kueue", local_queues=("gpu",)), NOW)
    pods = [a.manifest for a in p.actions if isinstance(a, Create) and a.kind == "Pod"]
    assert len(pods) == 2
    for pod in pods:
        assert pod["metadata"]["labels"]["l"] == "1"
        assert pod["metadata"]["labels"][PODSET_LABEL] == "worker"
        assert pod["spec"]["nodeSelector"] == {"gpu": "a100", **NODE}
        assert TOLERATE in pod["spec"]["tolerations"]


def test_a_conflict_fails_the_job_to_start_and_finishes_its_workload():
    w = admitted(check(nodeSelector={"gpu": "h100"}))
    p = plan(queued(), Observed.of(w, FLAVOR, queueing="kueue", local_queues=("gpu",)), NOW)
    assert p.status["phase"] == "Failed"
    failed = next(c for c in p.status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "FailedToStart"
    assert "admission check prov sets 'h100'" in failed["message"]
    assert not [a for a in p.actions if isinstance(a, Create) and a.kind == "Pod"]
    [finished] = [a for a in p.actions if isinstance(a, ReplaceStatus)]
    assert any(c["type"] == "Finished" and c["status"] == "True" for c in finished.body["status"]["conditions"])


@pytest.mark.parametrize(
    ("annotations", "wanted"),
    [
        ({}, None),
        ({"kueue.x-k8s.io/podset-required-topology": "cloud.example/rack"},
         {"required": "cloud.example/rack", "podIndexLabel": "batch.tensorstack.dev/replica-index"}),
        ({"kueue.x-k8s.io/podset-preferred-topology": "cloud.example/block"},
         {"preferred": "cloud.example/block", "podIndexLabel": "batch.tensorstack.dev/replica-index"}),
        ({UNCONSTRAINED: "true"}, {"unconstrained": True, "podIndexLabel": "batch.tensorstack.dev/replica-index"}),
    ],
)  # fmt: skip
def test_a_replica_template_asks_for_topology_as_kueues_integrations_read_it(annotations, wanted):
    job = queued()
    job["spec"]["replicaSpecs"][0]["template"]["metadata"] = {"annotations": annotations}
    [podset] = podsets(get_kind("GenericJob"), job)
    assert podset.get("topologyRequest") == wanted
    assert topology_request({"metadata": {"annotations": annotations}}, "batch.tensorstack.dev/replica-index") == wanted
