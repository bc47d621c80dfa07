"""The proof that the slim cache loses nothing the controller reads: over the children each
kind really creates, served as the API server, the scheduler and kwok leave them,
``plan(job, observed_whole)`` equals ``plan(job, observed_slim)`` (actions, status, events,
requeue) at every pass of a job's life.

Children are not hand-written: each scenario runs ``plan`` from a fresh job, turns every
Create it asks for into the object the API server would serve back (server defaults, a
scheduled pod's spec, kwok's status, managedFields), and plans again, until nothing new is
created; then an optional last step (a pause, a rescale, an eviction) and one more pass.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from airflow_t9k.controller.reconcile import Create, CreateSSHSecret, Observed, Plan, ReplaceStatus, plan
from airflow_t9k.controller.reconcile.actions import KeepEvidence
from airflow_t9k.controller.reconcile.plan import SSH_SECRET_STATUS
from airflow_t9k.controller.slim import slim_for
from tests.builders import NOW, generic, pytorch, restart
from tests.kind_jobs import minimal, with_mode
from tests.unit.controller.test_plan_ascend import ascend
from tests.unit.controller.test_plan_deepspeed import ds
from tests.unit.controller.test_plan_queueing import ADMISSION, FLAVOR, PREEMPTED, queued

Obj = dict[str, Any]
TRACEBACK = 'Traceback (most recent call last):\n  File "train.py", line 41, in <module>\nValueError: loss is nan\n'
RESULT = '{"accuracy": 0.93, "loss": 0.21}'
STAMP = "2026-11-25T11:58:00Z"


def managed(manager: str, *fields: str) -> Obj:
    return {"manager": manager, "operation": "Update", "apiVersion": "v1", "time": STAMP, "fieldsType": "FieldsV1",
            "fieldsV1": {f"f:{f}": {".": {}} for f in fields}}  # fmt: skip


def _meta(manifest: Obj, n: int) -> Obj:
    meta = copy.deepcopy(manifest["metadata"])
    name = meta["name"]
    meta.update(uid=f"uid-{manifest['kind'].lower()}-{name}", resourceVersion=str(100 + n), creationTimestamp=STAMP,
                managedFields=[managed("airflow-t9k", "metadata", "spec"), managed("kube-scheduler", "status"),
                               managed("kwok", "status")])  # fmt: skip
    meta.setdefault("namespace", "ns")
    return meta


def _container_status(c: Obj, state: str) -> Obj:
    out: Obj = {"name": c["name"], "image": c.get("image", ""), "imageID": "", "lastState": {}, "restartCount": 0,
                "ready": state == "Running", "started": state == "Running"}  # fmt: skip
    if state in ("Running", "Deleting"):
        out["state"] = {"running": {"startedAt": STAMP}}
    elif state == "Pending":
        out["state"] = {"waiting": {"reason": "ContainerCreating"}}
    elif state == "Succeeded":
        out["state"] = {"terminated": {"exitCode": 0, "reason": "Completed", "message": RESULT,
                                       "startedAt": STAMP, "finishedAt": STAMP}}  # fmt: skip
    elif state.startswith("Failed"):
        code = int(state.partition(":")[2] or 1)
        out["state"] = {"terminated": {"exitCode": code, "reason": "OOMKilled" if code == 137 else "Error",
                                       "message": TRACEBACK, "startedAt": STAMP, "finishedAt": STAMP}}  # fmt: skip
    return out


def served_pod(manifest: Obj, n: int, state: str) -> Obj:
    """A pod as the API server serves it once scheduled and run by kwok, in ``state``:
    Pending, Running, Succeeded, Failed[:exit code], Evicted or Deleting (running, terminating)."""
    pod = copy.deepcopy(manifest)
    pod["metadata"] = _meta(manifest, n)
    spec = pod["spec"]
    token = {"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}  # fmt: skip
    spec["volumes"] = [*spec.get("volumes", []), token]
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        c.setdefault("resources", {})
        c.update(terminationMessagePath="/dev/termination-log", terminationMessagePolicy="File", imagePullPolicy="Always")
        c["volumeMounts"] = [*c.get("volumeMounts", []),
                             {"name": token["name"], "readOnly": True,
                              "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]  # fmt: skip
    spec.update(terminationGracePeriodSeconds=30, dnsPolicy="ClusterFirst", serviceAccountName="default",
                serviceAccount="default", nodeName=f"kwok-node-{n % 2}", securityContext={}, priority=0,
                schedulerName=spec.get("schedulerName", "default-scheduler"), enableServiceLinks=True,
                preemptionPolicy="PreemptLowerPriority",
                tolerations=[*spec.get("tolerations", []),
                             {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                              "tolerationSeconds": 300},
                             {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                              "tolerationSeconds": 300}])  # fmt: skip
    phase = {"Deleting": "Running", "Evicted": "Failed"}.get(state, state.partition(":")[0])
    status: Obj = {"phase": phase, "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}], "podIP": f"10.244.0.{n}",
                   "podIPs": [{"ip": f"10.244.0.{n}"}], "startTime": STAMP, "qosClass": "BestEffort",
                   "conditions": [{"type": t, "status": "True" if phase == "Running" or t == "PodScheduled" else "False",
                                   "lastProbeTime": None, "lastTransitionTime": STAMP}
                                  for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")]}  # fmt: skip
    if state == "Evicted":
        status.update(reason="Evicted", message="The node was low on resource: memory.")
    else:
        status["containerStatuses"] = [_container_status(c, state) for c in spec.get("containers", [])]
        if spec.get("initContainers"):
            status["initContainerStatuses"] = [_container_status(c, "Succeeded") for c in spec["initContainers"]]
    if state == "Deleting":
        pod["metadata"].update(deletionTimestamp=STAMP, deletionGracePeriodSeconds=30)
    pod["status"] = status
    return pod


def served(manifest: Obj, n: int, state: Callable[[Obj], str]) -> Obj:
    """Any child as served back after its create; ``state(manifest)`` picks a pod's or a batch
    Job's or a Workload's state."""
    kind = manifest["kind"]
    if kind == "Pod":
        return served_pod(manifest, n, state(manifest))
    obj = copy.deepcopy(manifest)
    obj["metadata"] = _meta(manifest, n)
    if kind == "Service":
        spec = obj["spec"]
        ip = spec.get("clusterIP") or f"10.96.0.{40 + n}"
        spec.update(clusterIP=ip, clusterIPs=[ip], type=spec.get("type", "ClusterIP"), sessionAffinity="None",
                    ipFamilies=["IPv4"], ipFamilyPolicy="SingleStack", internalTrafficPolicy="Cluster")  # fmt: skip
        obj["status"] = {"loadBalancer": {}}
    elif kind == "Secret":
        obj.update(type="Opaque", data={"id_rsa": "LS0tLS1CRUdJTi" * 60, "id_rsa.pub": "c3NoLXJzYSBBQUFB" * 30,
                                        "authorized_keys": "c3NoLXJzYSBBQUFB" * 30})  # fmt: skip
    elif kind == "Job":
        template = obj["spec"]["template"]
        template["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] = obj["metadata"]["uid"]
        obj["spec"].update(parallelism=1, completions=1, backoffLimit=6, completionMode="NonIndexed", suspend=False,
                           selector={"matchLabels": {"batch.kubernetes.io/controller-uid": obj["metadata"]["uid"]}})  # fmt: skip
        obj["status"] = _job_status(state(manifest))
    elif kind == "Workload":
        obj["status"] = _workload_status(state(manifest))
    return obj


def _job_status(state: str) -> Obj:
    if state == "Complete":
        return {"startTime": STAMP, "completionTime": STAMP, "succeeded": 1, "ready": 0, "terminating": 0,
                "conditions": [{"type": t, "status": "True", "reason": "CompletionsReached",
                                "message": "Reached expected number of succeeded pods",
                                "lastProbeTime": STAMP, "lastTransitionTime": STAMP} for t in ("SuccessCriteriaMet",
                                                                                               "Complete")]}  # fmt: skip
    if state == "Failed":
        return {"startTime": STAMP, "failed": 7, "ready": 0, "terminating": 0,
                "conditions": [{"type": t, "status": "True", "reason": "BackoffLimitExceeded",
                                "message": "Job has reached the specified backoff limit",
                                "lastProbeTime": STAMP, "lastTransitionTime": STAMP} for t in ("FailureTarget",
                                                                                               "Failed")]}  # fmt: skip
    return {"startTime": STAMP, "active": 1, "ready": 1, "terminating": 0, "uncountedTerminatedPods": {}}


def _workload_status(state: str) -> Obj:
    def c(t: str, s: str, reason: str, message: str) -> Obj:
        return {
            "type": t,
            "status": s,
            "reason": reason,
            "message": message,
            "lastTransitionTime": STAMP,
            "observedGeneration": 1,
        }

    if state == "Pending":
        return {"conditions": [c("QuotaReserved", "False", "Pending", "couldn't assign flavors to pod set worker")],
                "resourceRequests": [{"name": "worker", "resources": {"nvidia.com/gpu": "6"}}]}  # fmt: skip
    status = {"admission": copy.deepcopy(ADMISSION), "requeueState": {"count": 0},
              "conditions": [c("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
                             c("Admitted", "True", "Admitted", "The workload is admitted")]}  # fmt: skip
    if state == "Evicted":
        status["conditions"].append(c("Evicted", "True", PREEMPTED[2], PREEMPTED[3]))
    return status


def with_managed_fields(obj: Obj) -> Obj:
    obj = copy.deepcopy(obj)
    obj["metadata"]["managedFields"] = [
        managed("kubectl-client-side-apply", "metadata", "spec"),
        managed("airflow-t9k", "status"),
    ]
    obj["metadata"].setdefault("resourceVersion", "42")
    return obj


# -- the comparison ---------------------------------------------------------------------------


@dataclass
class World:
    """A job and what the API server holds of its children, plus what else the cache has."""

    job: Obj
    children: dict[tuple[str, str], Obj] = field(default_factory=dict)
    made: dict[tuple[str, str], tuple[Obj, int]] = field(default_factory=dict)  # what was created, and when
    others: tuple[Obj, ...] = ()  # ResourceFlavors, PriorityClasses
    queueing: str = "off"
    queues: tuple[str, ...] = ()
    in_place: bool = False  # the cluster restarts containers in place (reconcile/inplace.py)


def _observed(world: World, objects: list[Obj]) -> Observed:
    observed = Observed.of(*objects, queueing=world.queueing, local_queues=world.queues)
    return replace(observed, in_place_problem=None) if world.in_place else observed


def _unmanaged(p: Plan) -> Plan:
    """The whole cached object goes back in a Workload's status PUT; the API server keeps the
    managedFields such a PUT omits (docs/benchmarks.md), so they are not part of the decision."""

    def strip(a: Any) -> Any:
        if isinstance(a, ReplaceStatus):
            body = copy.deepcopy(a.body)
            body.get("metadata", {}).pop("managedFields", None)
            return replace(a, body=body)
        return a

    return replace(p, actions=tuple(strip(a) for a in p.actions))


def both(world: World) -> Plan:
    """Plan from the whole objects and from the slim ones; they must agree entirely."""
    objects = [*world.children.values(), *world.others]
    whole = plan(copy.deepcopy(world.job), _observed(world, copy.deepcopy(objects)), NOW)
    job = slim_for(world.job["kind"])(copy.deepcopy(world.job))
    slim = plan(job, _observed(world, [slim_for(o["kind"])(copy.deepcopy(o)) for o in objects]), NOW)
    assert _unmanaged(slim) == _unmanaged(whole)
    return whole


def live(world: World, state: Callable[[Obj], str], rounds: int = 8) -> Plan:
    """Plan, serve what was created, write the status back, again, until nothing is created;
    comparing both plans at every pass. Returns the last plan."""
    for _ in range(rounds):
        p = both(world)
        world.job["status"] = p.status
        created = [a.manifest for a in p.actions if isinstance(a, Create | CreateSSHSecret)]
        if not created:
            return p
        for m in created:
            key, n = (m["kind"], m["metadata"]["name"]), len(world.made)
            world.made[key] = (m, n)
            world.children[key] = served(m, n, state)
            if m["kind"] == "Secret":  # what the executor records after creating it (it cannot read Secrets)
                uid = world.children[key]["metadata"]["uid"]
                world.job["status"] = {**world.job["status"], SSH_SECRET_STATUS: {"name": m["metadata"]["name"], "uid": uid}}
    raise AssertionError("the job kept creating children")


def states(default: str = "Running", **by_name: str) -> Callable[[Obj], str]:
    """A state per child: by exact name (``-`` written as ``_``), else ``default``."""
    return lambda m: by_name.get(m["metadata"]["name"].replace("-", "_"), default)


# -- scenarios ------------------------------------------------------------------------------


def set_state(world: World, name: str, state: str) -> None:
    """A pod or batch Job moves on: serve it again in its new state."""
    for key, (manifest, n) in world.made.items():
        if key[1] == name and key in world.children:
            world.children[key] = served(manifest, n, lambda _: state)


def held_in_place(name: str, code: int) -> Callable[[World], None]:
    """The kubelet restarted ``name`` in place after it exited with ``code``; the gate holds it."""

    def hold(world: World) -> None:
        for key, pod in world.children.items():
            if key == ("Pod", name):
                pod["status"]["phase"] = "Pending"
                for cs in pod["status"]["containerStatuses"]:
                    cs.update(restartCount=1, state={"waiting": {"reason": "PodInitializing"}},
                              lastState={"terminated": {"exitCode": code, "reason": "Error", "message": TRACEBACK,
                                                        "startedAt": STAMP, "finishedAt": STAMP}})  # fmt: skip

    return hold


def spec_change(path: list[Any], value: Any) -> Callable[[World], None]:
    def change(world: World) -> None:
        target = world.job["spec"]
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        world.job["metadata"]["generation"] += 1

    return change


def drop(kind: str) -> Callable[[World], None]:
    def gone(world: World) -> None:
        world.children = {k: v for k, v in world.children.items() if k[0] != kind}

    return gone


def moves(*changes: tuple[str, str]) -> Callable[[World], None]:
    def move(world: World) -> None:
        for name, state in changes:
            set_state(world, name, state)

    return move


@dataclass
class Scenario:
    world: Callable[[], World]
    state: Callable[[Obj], str] = field(default_factory=states)
    then: tuple[Callable[[World], None], ...] = ()  # each followed by one more compared pass
    expect: Callable[[Plan], bool] = lambda p: True  # the scenario reached what it is about


def phase(*wanted: str) -> Callable[[Plan], bool]:
    return lambda p: p.status.get("phase") in wanted


def condition(type_: str) -> Callable[[Plan], bool]:
    """For AscendJob, whose status is Kubeflow's: no phase, conditions only."""
    return lambda p: any(c["type"] == type_ and c["status"] == "True" for c in p.status.get("conditions", []))


def says(p: Plan, text: str) -> bool:
    """``text`` is in some string of the plan's status (a condition message, a replica's result)."""

    def strings(x: Any) -> list[str]:
        if isinstance(x, dict):
            return [s for v in x.values() for s in strings(v)]
        if isinstance(x, list):
            return [s for v in x for s in strings(v)]
        return [x] if isinstance(x, str) else []

    return any(text in s for s in strings(p.status))


def world(job: Obj, **kw: Any) -> Callable[[], World]:
    return lambda: World(with_managed_fields(job), **kw)


SERVICE = {"service": {"ports": [{"name": "http", "port": 2222}]}}
RULES = {"successRules": [{"worker": [0]}], "failureRules": [{"worker": [1]}]}
SCENARIOS = {
    "generic-running": Scenario(world(generic("job", ("worker", 3), **SERVICE)), expect=phase("Running")),
    "generic-pending": Scenario(world(generic("job", **SERVICE)), states("Pending"), expect=phase("Pending")),
    "generic-failed-exit-code-message": Scenario(
        world(generic("job", **RULES, **SERVICE, cleanUpPolicy="Unfinished")), states(job_worker_1="Failed:3"),
        expect=lambda p: phase("Failed")(p) and says(p, "loss is nan")),
    "generic-succeeded-cleanup-all": Scenario(
        world(generic("job", **RULES, **SERVICE, cleanUpPolicy="All")), states(job_worker_0="Succeeded"),
        # The Services go at once; the pods once their evidence is kept (reconcile/evidence.py).
        expect=lambda p: phase("Succeeded")(p) and len(p.deletes("Service")) == 2
        and [sorted(a.pods) for a in p.actions if isinstance(a, KeepEvidence)] == [["job-worker-0", "job-worker-1"]]),
    "generic-restart-on-failure": Scenario(
        world(restart(generic("job", **SERVICE), "OnFailure", 3)), states(job_worker_0="Failed:137"),
        expect=lambda p: p.deletes("Pod") == ["job-worker-0"] and any("OOMKilled" in e.message for e in p.events)),
    "generic-restart-in-place": Scenario(
        lambda: World(with_managed_fields(restart(generic("job", **SERVICE), "OnFailure", 3)), in_place=True),
        then=(held_in_place("job-worker-0", 3),),
        expect=lambda p: p.patches() == ["job-worker-0"] and not p.deletes("Pod") and says(p, "exit code 3")),
    "generic-evicted": Scenario(
        world(restart(generic("job"), "OnFailure", 3)), states(job_worker_1="Evicted"),
        expect=lambda p: p.deletes("Pod") == ["job-worker-1"] and any("Evicted" in e.message for e in p.events)),
    "generic-being-deleted": Scenario(
        world(generic("job", **SERVICE)), states(job_worker_1="Deleting"),
        expect=lambda p: p.status["aggregate"]["deleted"] == 1),
    "pytorch-succeeded-result": Scenario(
        world(pytorch("pt", successRules=[{"master": [0]}])), states("Succeeded"),
        expect=lambda p: phase("Succeeded")(p) and says(p, RESULT)),
    "pytorch-paused-then-resumed": Scenario(
        world(pytorch("pt")), then=(spec_change(["runMode"], {"pause": {"enabled": True}}), moves(("pt-worker-0", "Deleting")),
                                    drop("Pod"), spec_change(["runMode"], {"pause": {"enabled": False}})),
        expect=lambda p: p.creates("Pod") == ["pt-master-0", "pt-worker-0", "pt-worker-1"]),
    "pytorch-elastic": Scenario(world(with_mode(minimal("PyTorchTrainingJob", "el"), "elastic")), expect=phase("Running")),
    "pytorch-debug": Scenario(world(with_mode(minimal("PyTorchTrainingJob", "dbg"), "debug")), states("Failed:1"),
                              expect=phase("Running")),
    "tensorflow-failed-restarts": Scenario(
        world(minimal("TensorFlowTrainingJob", "tf")), states(tf_worker_1="Failed:2"),
        expect=lambda p: p.deletes("Pod") == ["tf-worker-1"] and any(e.reason == "ReplicaRestarting" for e in p.events)),
    "xgboost-succeeded": Scenario(world(minimal("XGBoostTrainingJob", "xgb")), states("Succeeded"), expect=phase("Succeeded")),
    "mpi-worker-failed": Scenario(world(minimal("MPIJob", "mpi")), states(mpi_worker_1="Failed:255"), expect=phase("Failed")),
    "colossalai-launcher-succeeded": Scenario(world(minimal("ColossalAIJob", "cai")), states(cai_launcher="Succeeded"),
                                              expect=phase("Succeeded")),
    "deepspeed-elastic-rescaled": Scenario(
        world(ds(3, elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": 2})),
        then=(spec_change(["elastic", "expectedReplicas"], 3),),
        expect=lambda p: p.patches() == ["ds-deepspeed"] and "ds-worker-0" in p.deletes("Pod")),
    "ascend-cluster-ip": Scenario(world(ascend()), expect=condition("Running")),
    "ascend-mindspore-worker-failed": Scenario(world(ascend("mindspore")), states(ac_worker_1="Failed:1"),
                                               expect=condition("Failed")),
    "beam-submit-running-then-complete": Scenario(
        world(minimal("BeamJob", "b")), states("Running", b_batchjob="Active"),
        then=(moves(("b-batchjob", "Complete")),), expect=phase("Succeeded")),
    "beam-submit-failed": Scenario(world(minimal("BeamJob", "b")), states("Running", b_batchjob="Failed"),
                                   expect=phase("Failed")),
    "kueue-admitted": Scenario(
        world(queued(), others=(with_managed_fields(FLAVOR),), queueing="kueue", queues=("gpu",)),
                               states("Running", genericjob_job="Admitted"),
        expect=phase("Running")),
    "kueue-pending": Scenario(
        world(queued(), queueing="kueue", queues=("gpu",)), states("Running", genericjob_job="Pending"), expect=phase("Pending")),
    "kueue-evicted-then-released": Scenario(
        world(queued(), others=(with_managed_fields(FLAVOR),), queueing="kueue", queues=("gpu",)),
                                            states("Running", genericjob_job="Admitted"),
        then=(moves(("genericjob-job", "Evicted")), drop("Pod")),
        expect=lambda p: [type(a) for a in p.actions] == [ReplaceStatus]),
}  # fmt: skip


@pytest.mark.parametrize("name", SCENARIOS)
def test_plans_from_the_slim_cache_equal_plans_from_whole_objects(name):
    scenario = SCENARIOS[name]
    w = scenario.world()
    last = live(w, scenario.state)
    for step in scenario.then:
        step(w)
        last = both(w)
        w.job["status"] = last.status
    assert scenario.expect(last), last
    # The other way round too: the first pass over children that all exist already (a
    # controller restarted onto a warm cluster).
    w.job.pop("status", None)
    both(w)


def test_the_slim_children_are_smaller():
    """Not vacuous: the scenarios' children really lose most of their size."""
    w = world(ascend())()
    live(w, states("Failed:1"))
    for kind in ("Pod", "Service"):
        objs = [o for (k, _), o in w.children.items() if k == kind]
        whole = sum(len(json.dumps(o)) for o in objs)
        slim = sum(len(json.dumps(slim_for(kind)(copy.deepcopy(o)))) for o in objs)
        assert objs, (kind, slim, whole)
        assert slim < whole / 2, (kind, slim, whole)
