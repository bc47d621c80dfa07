"""AscendJob and BeamJob on the real node: the processes start with the environment and
commands the controller gives them (no NPU and no Flink distribution needed)."""

from __future__ import annotations

import json

from tests.real.support import on_real_node, py
from tests.support.cluster import wait_until
from tests.support.manifests import manifest


def dumped(real, pod: str) -> tuple[dict[str, str], str]:
    lines = real.log(pod).splitlines()
    env = json.loads(next(ln for ln in lines if ln.startswith("env "))[4:])
    ip = next(ln for ln in lines if ln.startswith("ip "))[3:]
    return env, ip


def ascend(framework: str) -> dict:
    """Seed 002's example on the real node: no NPUs, no Ascend node labels, our program."""
    job = manifest("ascendjob-pytorch")
    job["metadata"]["name"] = f"acj-{framework}"
    job["metadata"]["labels"]["framework"] = framework
    job["spec"].pop("schedulerName", None)
    if framework == "mindspore":
        job["spec"]["replicaSpecs"] = {
            "Scheduler": job["spec"]["replicaSpecs"]["Master"],
            "Worker": job["spec"]["replicaSpecs"]["Worker"],
        }
    for spec in job["spec"]["replicaSpecs"].values():
        pod = spec["template"]["spec"]
        pod.pop("affinity", None)
        pod.pop("nodeSelector", None)
        pod.pop("volumes", None)
        container = pod["containers"][0]
        container.pop("image")
        container.pop("volumeMounts", None)
        container["command"] = py("env_dump.py")
        container.pop("args", None)
        container["resources"] = {"limits": {"cpu": "200m", "memory": "256Mi"}}
        spec["template"] = on_real_node(spec["template"])
    return job


def service_ip(real, name: str) -> str:
    """The leader Service's cluster IP, read while it exists (the job's clean-up removes it)."""
    from kubernetes.client.exceptions import ApiException

    def ip() -> str | None:
        try:
            return real.core.read_namespaced_service(name, real.ns).spec.cluster_ip
        except ApiException:
            return None

    return wait_until(ip, timeout=60, what=f"Service {name}")


def succeeded(jobs, real, name: str, pods: list[str]) -> dict:
    """AscendJob's status is Kubeflow's: conditions, no phase."""
    try:
        return jobs.wait_condition("AscendJob", name, "Succeeded", timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{jobs.get('AscendJob', name).get('status')}\n{real.describe(*pods)}") from None


def run_ascend(jobs, real, framework: str, leader: str) -> tuple[dict, str, tuple[dict[str, str], str], dict[str, str]]:
    """(the finished job, the leader Service's IP, (the leader's env, its own IP), the worker's env)."""
    job = ascend(framework)
    jobs.create(job)
    name = job["metadata"]["name"]
    pods = [f"{name}-{leader}-0", f"{name}-worker-0"]
    leader_ip = service_ip(real, pods[0])
    done = succeeded(jobs, real, name, pods)
    return done, leader_ip, dumped(real, pods[0]), dumped(real, pods[1])[0]


def test_ascend_pytorch_replicas_see_mindclusters_environment(jobs, controller, real):
    done, leader_ip, (master, master_ip), worker = run_ascend(jobs, real, "pytorch", "master")
    # Both reach the leader through its Service's cluster IP, as MindCluster's operator sets it.
    assert master["MASTER_ADDR"] == worker["MASTER_ADDR"] == leader_ip
    assert (master["RANK"], worker["RANK"]) == ("0", "1")
    assert master["WORLD_SIZE"] == worker["WORLD_SIZE"] == "2"
    assert master["MINDX_TASK_ID"] == done["metadata"]["uid"]
    # The seed's own downward-API variable: the node's address, resolved by the kubelet.
    assert master["XDL_IP"] == "10.88.0.1"
    assert master_ip.startswith("10.88.")
    assert master_ip != "10.88.0.1"


def test_ascend_mindspore_scheduler_address_is_its_own_pod_ip(jobs, controller, real):
    _, leader_ip, (sched, sched_ip), worker = run_ascend(jobs, real, "mindspore", "scheduler")
    assert (sched["MS_ROLE"], worker["MS_ROLE"]) == ("MS_SCHED", "MS_WORKER")
    assert sched["MS_SCHED_HOST"] == sched_ip  # the leader reads its own IP through the downward API
    assert worker["MS_SCHED_HOST"] == leader_ip


def test_beam_flink_cluster_and_submit_job_start_as_they_should(jobs, controller, real):
    """No Flink distribution comes from the registries this project builds from (PyFlink's wheel
    would need a JVM as well), so the cluster pods run the image's argv-env variant: it prints
    the arguments and environment the controller started it with. The submit Job runs for real."""
    placement = on_real_node({"spec": {}})["spec"]
    code = {k: placement[k] for k in ("nodeSelector", "tolerations", "volumes")}
    mounts = [{"name": "code", "mountPath": "/code"}]
    limits = {"limits": {"cpu": "100m", "memory": "128Mi"}}
    submit = on_real_node({"spec": {"restartPolicy": "Never", "containers": [
        {"name": "submit-job", "command": py("env_dump.py"), "resources": limits}]}})  # fmt: skip
    jobs.create({
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "BeamJob", "metadata": {"name": "bj"},
        "spec": {
            "flinkClusterTemplate": {"spec": {
                "flinkVersion": "1.10.1", "image": {"name": "localhost/airflow-t9k/argv-env:1", "pullPolicy": "Never"},
                "envVars": [{"name": "T9K_DUMP_SLEEP", "value": "600"}],
                "jobManager": {"accessScope": "Cluster", "resources": limits, "volumeMounts": mounts, **code},
                "taskManager": {"replicas": 2, "resources": limits, "volumeMounts": mounts, **code},
                "flinkProperties": {"taskmanager.numberOfTaskSlots": "1"}}},
            "jobTemplate": {"spec": {"backoffLimit": 0, "template": submit}},
            "runPolicy": {"cleanUpCluster": False},
        },
    })  # fmt: skip
    cluster = ["bj-flinkcluster-jobmanager-0", "bj-flinkcluster-taskmanager-0", "bj-flinkcluster-taskmanager-1"]
    done = real.finished(jobs, "BeamJob", "bj", cluster, timeout=180)
    assert done["status"]["phase"] == "Succeeded", real.describe(*cluster)
    for pod in cluster:
        lines = real.log(pod).splitlines()
        argv = json.loads(next(ln for ln in lines if ln.startswith("argv "))[5:])
        env = json.loads(next(ln for ln in lines if ln.startswith("env "))[4:])
        assert argv == [pod.split("-")[-2]], lines  # the Flink image's entrypoint gets "jobmanager" / "taskmanager"
        assert env["JOB_MANAGER_RPC_ADDRESS"] == "bj-flinkcluster-jobmanager"
        assert "jobmanager.rpc.address: bj-flinkcluster-jobmanager\n" in env["FLINK_PROPERTIES"]
        assert "taskmanager.numberOfTaskSlots: 1\n" in env["FLINK_PROPERTIES"]
    submit_pod = real.core.list_namespaced_pod(real.ns, label_selector="batch.kubernetes.io/job-name=bj-batchjob").items[0]
    env, _ = dumped(real, submit_pod.metadata.name)
    assert env["FLINK_MASTER"] == "bj-flinkcluster-jobmanager:8081"
    assert submit_pod.spec.node_name == "real-node-0"
