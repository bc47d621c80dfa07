"""plan() for AscendJob: leader Service first, framework env, Kubeflow restart rules and status."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest

from airflow_t9k.controller.reconcile import Create, Observed, plan
from tests.builders import NOW, pod, run

LEADER = {"pytorch": "Master", "tensorflow": "Chief", "mindspore": "Scheduler"}
IP = "10.96.0.42"


def ascend(framework: str = "pytorch", *types: tuple[str, int], npus: int = 2, policy: str = "Never", **spec) -> dict:
    types = types or ((LEADER[framework], 1), ("Worker", 2))
    container = {"name": "ascend", "image": "img", "command": ["bash", "train.sh"]}
    if npus:
        container["resources"] = {"limits": {"huawei.com/Ascend910": npus}, "requests": {"huawei.com/Ascend910": npus}}
    return {
        "apiVersion": "mindxdl.gitee.com/v1",
        "kind": "AscendJob",
        "metadata": {"name": "ac", "namespace": "ns", "uid": "uid-ac", "generation": 1, "labels": {"framework": framework}},
        "spec": {
            "replicaSpecs": {
                t: {"replicas": n, "restartPolicy": policy, "template": {"spec": {"containers": [copy.deepcopy(container)]}}}
                for t, n in types
            },
            **spec,
        },
    }


def leader_service(framework: str = "pytorch", ip: str = IP) -> dict:
    name = f"ac-{LEADER[framework].lower()}-0"
    labels = {"batch.tensorstack.dev/replica-type": LEADER[framework]}  # as desired.py labels it
    return {"kind": "Service", "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels}, "spec": {"clusterIP": ip}}


def apod(name: str, phase: str = "Running", exit_code: int | None = None, restarts: int = 0) -> dict:
    p = pod(name, phase, exit_code, restarts, rtype=name.split("-")[1].capitalize())
    p["status"]["containerStatuses"][0]["name"] = "ascend"
    return p


def env_of(p, name: str) -> dict:
    manifest = next(a.manifest for a in p.actions if isinstance(a, Create) and a.name == name)
    main = next(c for c in manifest["spec"]["containers"] if c["name"] == "ascend")
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in main["env"]}


def conditions(status: dict) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}


def test_the_leader_service_comes_first_and_pods_wait_for_its_cluster_ip():
    first = run(ascend())
    assert first.creates("Service") == ["ac-master-0"]
    assert first.creates("Pod") == []
    svc = next(a.manifest for a in first.actions if isinstance(a, Create) and a.kind == "Service")
    assert svc["kind"] == "Service"
    assert "clusterIP" not in svc["spec"]
    assert svc["spec"]["ports"] == [{"name": "ascendjob-port", "port": 2222, "targetPort": 2222, "protocol": "TCP"}]
    assert conditions(first.status) == {"Created": "True"}
    assert "phase" not in first.status
    pending_ip = run(ascend(), leader_service(ip=""), status=first.status)
    assert pending_ip.creates("Pod") == []
    second = run(ascend(), leader_service(), status=first.status)
    assert second.creates("Pod") == ["ac-master-0", "ac-worker-0", "ac-worker-1"]


POD_IP = {"fieldRef": {"fieldPath": "status.podIP"}}


@pytest.mark.parametrize(
    ("framework", "pod_name", "expected"),
    [
        ("pytorch", "ac-master-0", {"MASTER_ADDR": IP, "MASTER_PORT": "2222", "RANK": "0", "WORLD_SIZE": "6",
                                    "LOCAL_WORLD_SIZE": "2", "LOCAL_RANK": "0,1"}),
        ("pytorch", "ac-worker-1", {"MASTER_ADDR": IP, "RANK": "2", "WORLD_SIZE": "6"}),
        ("tensorflow", "ac-chief-0", {"CM_CHIEF_IP": POD_IP, "CM_CHIEF_PORT": "2222", "CM_CHIEF_DEVICE": "0", "CM_RANK": "0",
                                      "CM_WORKER_SIZE": "6", "CM_LOCAL_WORKER": "2", "CM_WORKER_IP": POD_IP}),
        ("tensorflow", "ac-worker-0", {"CM_CHIEF_IP": IP, "CM_RANK": "1"}),
        ("mindspore", "ac-scheduler-0", {"MS_SCHED_HOST": POD_IP, "MS_SCHED_PORT": "2222", "MS_ROLE": "MS_SCHED",
                                         "MS_SERVER_NUM": "0", "MS_WORKER_NUM": "6", "MS_LOCAL_WORKER": "2", "NPU_POD": "true"}),
        ("mindspore", "ac-worker-1", {"MS_SCHED_HOST": IP, "MS_ROLE": "MS_WORKER", "MS_NODE_RANK": "1"}),
    ],
    ids=["pt-master", "pt-worker", "tf-chief", "tf-worker", "ms-scheduler", "ms-worker"],
)  # fmt: skip
def test_framework_environment(framework, pod_name, expected):
    env = env_of(run(ascend(framework), leader_service(framework), status={"conditions": []}), pod_name)
    assert {k: env.get(k) for k in expected} == expected
    assert env["MINDX_TASK_ID"] == "uid-ac"
    assert env["HostNetwork"] == "false"


def test_pods_carry_kubeflow_labels_the_port_and_a_cpu_only_pod_counts_as_one_process():
    p = run(ascend("pytorch", npus=0, runPolicy={"schedulingPolicy": {"queue": "q1"}}), leader_service())
    manifest = next(a.manifest for a in p.actions if a.name == "ac-worker-1" and a.manifest["kind"] == "Pod")
    labels = manifest["metadata"]["labels"]
    assert {k: labels[k] for k in ("job-name", "replica-type", "replica-index", "volcano.sh/queue-name")} == {
        "job-name": "ac", "replica-type": "worker", "replica-index": "1", "volcano.sh/queue-name": "q1"}  # fmt: skip
    assert manifest["spec"]["containers"][0]["ports"] == [{"name": "ascendjob-port", "containerPort": 2222}]
    assert env_of(p, "ac-worker-1")["WORLD_SIZE"] == "3"
    assert env_of(p, "ac-worker-1")["LOCAL_RANK"] == "0"


def test_a_lone_mindspore_worker_needs_no_service():
    p = run(ascend("mindspore", ("Worker", 1), npus=1))
    assert p.creates("Pod") == ["ac-worker-0"]
    assert p.creates("Service") == []
    env = env_of(p, "ac-worker-0")
    assert "MS_SCHED_HOST" not in env
    assert (env["MS_ROLE"], env["MS_WORKER_NUM"], env["MS_NODE_RANK"], env["NPU_POD"]) == ("MS_WORKER", "1", "0", "true")


def test_a_named_port_is_used_for_the_service_and_the_env():
    job = ascend()
    job["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "ascendjob-port", "containerPort": 3333}]  # fmt: skip
    svc = next(a.manifest for a in run(job).actions if isinstance(a, Create) and a.kind == "Service")
    assert svc["spec"]["ports"][0]["port"] == 3333
    assert env_of(run(job, leader_service()), "ac-worker-0")["MASTER_PORT"] == "3333"


def _without_container(job):
    job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "main"
    return job


def _no_label(job):
    del job["metadata"]["labels"]["framework"]
    return job


def _milli_npu(job):
    job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"huawei.com/Ascend910": "1500m"}
    }
    return job


@pytest.mark.parametrize(
    ("job", "needle"),
    [
        (_no_label(ascend()), "metadata.labels.framework must be one of mindspore, pytorch, tensorflow"),
        (ascend("pytorch", ("Chief", 1), ("Worker", 1)), "replica type Chief is not used with framework pytorch"),
        (ascend("pytorch", ("Master", 2), ("Worker", 1)), "replicaSpecs.Master.replicas must be 1"),
        (_without_container(ascend()), "replicaSpecs.Worker needs a container named 'ascend'"),
        (ascend("tensorflow", ("Worker", 2)), "framework tensorflow needs a Chief replica"),
        (ascend("mindspore", ("Worker", 2)), "without a Scheduler may use only one NPU"),
        (ascend(successPolicy="AnyWorker"), 'spec.successPolicy must be "" or AllWorkers'),
        (ascend(policy="Sometimes"), "restartPolicy must be one of Never, OnFailure, Always, ExitCode"),
        (ascend("pytorch", ("Master", 1), ("Launcher", 1)), "unknown replica type(s) Launcher"),
        (ascend(runPolicy={"backoffLimit": -2}), "runPolicy.backoffLimit must be -1 (unlimited)"),
        (_milli_npu(ascend()), "huawei.com/Ascend910 must be a whole number of NPUs, got '1500m'"),
    ],
    ids=["no-framework", "wrong-type", "two-masters", "no-ascend-container", "no-leader", "ms-lone-multi-npu",
         "success-policy", "restart-policy", "unknown-type", "backoff", "milli-npu"],
)  # fmt: skip
def test_invalid_specs_fail_with_a_condition_and_touch_nothing(job, needle):
    p = run(job)
    assert p.actions == ()
    failed = next(c for c in p.status["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True"
    assert failed["reason"] == "InvalidSpec"
    assert needle in failed["message"]
    assert conditions(p.status)["Created"] == "True"


def running(job) -> dict:
    """The status after a pass where every replica runs."""
    pods = [apod(n) for n in ("ac-master-0", "ac-worker-0", "ac-worker-1")]
    return run(job, leader_service(), *pods, status={"conditions": [{"type": "Created", "status": "True"}]}).status


@pytest.mark.parametrize(
    ("policy", "worker", "backoff", "outcome"),
    [
        ("Never", apod("ac-worker-1", "Failed", 1), None, "Failed"),
        ("ExitCode", apod("ac-worker-1", "Failed", 137), None, "Restarting"),
        ("ExitCode", apod("ac-worker-1", "Failed", 1), None, "Failed"),
        ("OnFailure", apod("ac-worker-1", "Failed", 1), None, "Restarting"),
        ("OnFailure", apod("ac-worker-1", "Failed", 1, restarts=50), None, "Restarting"),
        ("OnFailure", apod("ac-worker-1", "Failed", 1, restarts=1), {"backoffLimit": 1}, "Failed"),
        ("OnFailure", apod("ac-worker-1", "Failed", 1), {"backoffLimit": -1}, "Restarting"),
        ("Never", apod("ac-worker-1", "Succeeded", 0), None, "Running"),
    ],
    ids=["never", "exitcode-signal", "exitcode-user-error", "onfailure", "unlimited-when-unset", "backoff-spent",
         "minus-one-unlimited", "one-worker-done"],
)  # fmt: skip
def test_replica_outcomes(policy, worker, backoff, outcome):
    job = ascend(policy=policy, **({"runPolicy": backoff} if backoff else {}))
    status = running(job)
    assert conditions(status)["Running"] == "True"
    p = run(job, leader_service(), apod("ac-master-0"), apod("ac-worker-0"), worker, status=status)
    got = conditions(p.status)
    assert got[outcome] == "True"
    assert p.status["conditions"][-1]["type"] == outcome  # the latest change is last (kubectl's State column)
    if outcome == "Restarting":
        assert got["Running"] == "False"
        assert p.deletes("Pod") == ["ac-worker-1"]
    if outcome == "Failed":
        assert p.status["completionTime"] == "2026-11-25T12:00:00Z"
        # cleanPodPolicy's default, Running (seed 002): the Master and worker 0 stop holding NPUs;
        # the failed worker stays for its logs.
        assert p.deletes("Pod") == ["ac-master-0", "ac-worker-0"]
        assert p.status["replicaStatuses"]["Worker"] == {
            "active": 1, "succeeded": 0, "failed": 1, "labelSelector": {"matchLabels": {"job-name": "ac",
                                                                                        "replica-type": "worker"}}}  # fmt: skip


def test_success_needs_every_pod_and_clean_pod_policy_none_keeps_pods():
    job = ascend(runPolicy={"cleanPodPolicy": "None"})
    status = running(job)
    done = [apod("ac-master-0", "Succeeded", 0), apod("ac-worker-0", "Succeeded", 0)]
    assert conditions(run(job, leader_service(), *done, apod("ac-worker-1"), status=status).status).get("Succeeded") is None
    p = run(job, leader_service(), *done, apod("ac-worker-1", "Succeeded", 0), status=status)
    assert conditions(p.status)["Succeeded"] == "True"
    assert conditions(p.status)["Running"] == "False"
    assert p.deletes() == []
    assert p.status["conditions"][-1]["message"].startswith("AscendJob ac succeeded: all 3 pods succeeded")
    assert p.status["conditions"][-1]["reason"] == "AscendJobSucceeded"


def test_restarting_lasts_until_every_replica_runs_again_and_restart_counts_survive_the_pod():
    job = ascend(policy="OnFailure", runPolicy={"backoffLimit": 3})
    status = running(job)
    restarting = run(
        job, leader_service(), apod("ac-master-0"), apod("ac-worker-0"), apod("ac-worker-1", "Failed", 1), status=status
    )
    assert restarting.status["backoffCount"] == 1
    gone = run(job, leader_service(), apod("ac-master-0"), apod("ac-worker-0"), status=restarting.status)
    assert conditions(gone.status)["Restarting"] == "True"
    recreated = next(a.manifest for a in gone.actions if isinstance(a, Create) and a.kind == "Pod")
    assert recreated["metadata"]["annotations"]["batch.tensorstack.dev/restart-count"] == "1"
    back = run(
        job, leader_service(), apod("ac-master-0"), apod("ac-worker-0"), apod("ac-worker-1", restarts=1), status=gone.status
    )
    assert conditions(back.status) == {"Created": "True", "Running": "True", "Restarting": "False"}
    assert back.status["conditions"][-1]["type"] == "Running"


def test_a_settled_status_is_not_rewritten():
    job = ascend()
    status = running(job)
    later = NOW + timedelta(minutes=5)
    pods = [apod(n) for n in ("ac-master-0", "ac-worker-0", "ac-worker-1")]
    job["status"] = status
    again = plan(job, Observed.of(leader_service(), *pods), later)
    assert again.status == status  # lastReconcileTime included: no write, no new watch event


def test_scheduling_policy_is_reported_once_as_not_enforced():
    job = ascend(schedulerName="volcano", runPolicy={"schedulingPolicy": {"minAvailable": 2, "queue": "default"}})
    first = run(job)
    assert [e.reason for e in first.events if e.reason == "GangSchedulingNotEnforced"] == ["GangSchedulingNotEnforced"]
    assert not [e for e in run(job, status=first.status).events if e.reason == "GangSchedulingNotEnforced"]


# -- fidelity to seed 002 (items 13 and 14) ---------------------------------------------------


@pytest.mark.parametrize(
    "run_policy",
    [{"activeDeadlineSeconds": 1}, {"ttlSecondsAfterFinished": 0},
     {"activeDeadlineSeconds": 1, "cleanPodPolicy": "None", "ttlSecondsAfterFinished": 0}],
    ids=["deadline", "ttl", "both-and-clean-none"],
)  # fmt: skip
def test_meaningless_run_policy_fields_are_accepted_ignored_and_said_once(run_policy):
    job = ascend(runPolicy=run_policy)
    first = run(job, leader_service())
    warned = [e for e in first.events if e.reason == "RunPolicyIgnored"]
    assert len(warned) == 1
    assert warned[0].type == "Warning"
    assert all(f"runPolicy.{k}" in warned[0].message for k in run_policy if k != "cleanPodPolicy")
    assert "cleanPodPolicy" not in warned[0].message  # applied when the job ends, not ignored
    status = running(job)
    assert not [e for e in run(job, leader_service(), status=status).events if e.reason == "RunPolicyIgnored"]
    # Long after any deadline the job runs on, and the job is not deleted after it fails.
    later = NOW + timedelta(hours=1)
    job["status"] = status
    still = plan(job, Observed.of(leader_service(), apod("ac-master-0"), apod("ac-worker-0"), apod("ac-worker-1")), later)
    assert "Failed" not in conditions(still.status)
    failed = run(job, leader_service(), apod("ac-master-0"), apod("ac-worker-0"), apod("ac-worker-1", "Failed", 1), status=status)
    assert conditions(failed.status)["Failed"] == "True"
    assert "AscendJob" not in failed.deletes()


def test_no_warning_without_those_fields():
    assert not [e for e in run(ascend(), leader_service()).events if e.reason == "RunPolicyIgnored"]


def _pods(p):
    return {a.name: a.manifest for a in p.actions if isinstance(a, Create) and a.kind == "Pod"}


def test_scheduler_name_and_priority_class_reach_every_pod():
    job = ascend(schedulerName="my-scheduler", runPolicy={"schedulingPolicy": {"priorityClass": "high", "minAvailable": 3}})
    pods = _pods(run(job, leader_service()))
    assert sorted(pods) == ["ac-master-0", "ac-worker-0", "ac-worker-1"]
    for pod_ in pods.values():
        assert (pod_["spec"]["schedulerName"], pod_["spec"]["priorityClassName"]) == ("my-scheduler", "high")


def test_a_templates_own_scheduler_and_priority_win():
    job = ascend(schedulerName="kube-batch", runPolicy={"schedulingPolicy": {"priorityClass": "high"}})
    job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"].update(schedulerName="my-scheduler", priorityClassName="low")
    pods = _pods(run(job, leader_service()))
    assert (pods["ac-master-0"]["spec"]["schedulerName"], pods["ac-master-0"]["spec"]["priorityClassName"]) == (
        "kube-batch",
        "high",
    )
    assert (pods["ac-worker-0"]["spec"]["schedulerName"], pods["ac-worker-0"]["spec"]["priorityClassName"]) == (
        "my-scheduler",
        "low",
    )


def test_no_scheduler_fields_leave_the_pods_on_the_default_scheduler():
    pod_ = _pods(run(ascend(), leader_service()))["ac-master-0"]
    assert "schedulerName" not in pod_["spec"]
    assert "priorityClassName" not in pod_["spec"]


@pytest.mark.parametrize(
    ("clean", "deleted"),
    [(None, ["Pod ac-master-0", "Pod ac-worker-0", "Service ac-master-0"]),
     ("Running", ["Pod ac-master-0", "Pod ac-worker-0", "Service ac-master-0"]),
     ("All", ["Pod ac-master-0", "Pod ac-worker-0", "Pod ac-worker-1", "Pod ac-worker-2", "Service ac-master-0"]),
     ("None", ["Pod ac-worker-0"])],
    ids=["default-running", "running", "all", "none-still-deletes-pending"],
)  # fmt: skip
def test_a_finished_job_is_cleaned_up_as_mindclusters_handle_finished_job(clean, deleted):
    """Pending pods always go, then cleanPodPolicy (default Running) for the started ones."""
    job = ascend("pytorch", ("Master", 1), ("Worker", 3), **({"runPolicy": {"cleanPodPolicy": clean}} if clean else {}))
    status = run(job, leader_service(), *(apod(n) for n in ("ac-master-0", "ac-worker-0", "ac-worker-1", "ac-worker-2")),
                 status={"conditions": [{"type": "Created", "status": "True"}]}).status  # fmt: skip
    pods = [
        apod("ac-master-0"),
        apod("ac-worker-0", "Pending"),
        apod("ac-worker-1", "Failed", 1),
        apod("ac-worker-2", "Succeeded", 0),
    ]
    p = run(job, leader_service(), *pods, status=status)
    assert conditions(p.status)["Failed"] == "True"
    assert sorted(f"{kind} {name}" for kind in ("Pod", "Service") for name in p.deletes(kind)) == deleted


def test_an_unknown_clean_pod_policy_is_refused():
    p = run(ascend(runPolicy={"cleanPodPolicy": "Sometimes"}))
    assert conditions(p.status)["Failed"] == "True"
    assert "cleanPodPolicy must be one of" in p.status["conditions"][-1]["message"]
