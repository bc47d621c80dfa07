"""plan() for DeepSpeedJob: sshd everywhere, worker 0 launches deepspeed, hostfile and env file."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.reconcile import Create, CreateSSHSecret, Patch
from tests.builders import cond, pod, run


def ds(workers=2, config=None, **spec):
    config = (
        config
        if config is not None
        else {"slotsPerWorker": 4, "run": {"python": ["train.py", "--deepspeed", "--deepspeed_config=ds.json"]}}
    )
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "DeepSpeedJob",
        "metadata": {"name": "ds", "namespace": "ns", "uid": "uid-ds", "generation": 1},
        "spec": {"config": config,
                 "worker": {"replicas": workers, "template": {"spec": {"containers": [
                     {"name": "worker", "image": "ds:1", "env": [{"name": "NCCL_DEBUG", "value": "INFO"},
                                                                 {"name": "TOKEN",
                                                                  "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}}},
                 **spec},
    }  # fmt: skip


def manifests(p, kind):
    return {a.name: a.manifest for a in p.actions if isinstance(a, Create) and a.kind == kind}


def test_children_and_reserved_paths():
    p = run(ds())
    assert p.creates("Pod") == ["ds-worker-0", "ds-worker-1"]
    assert p.creates("Service") == ["ds-worker-0", "ds-worker-1"]
    assert [a.name for a in p.actions if isinstance(a, CreateSSHSecret)] == ["ds-ssh"]
    cm = manifests(p, "ConfigMap")["ds-deepspeed"]["data"]
    # The env values stay in the pod spec: no ConfigMap holds them (more people read ConfigMaps than jobs' Secrets).
    assert cm == {"hostfile": "ds-worker-0 slots=4\nds-worker-1 slots=4\n"}
    mounts = {m["mountPath"] for m in manifests(p, "Pod")["ds-worker-1"]["spec"]["containers"][0]["volumeMounts"]}
    assert mounts == {"/root/.ssh", "/t9k/hostfile"}
    files = {n: {i["key"] for v in manifests(p, "Pod")[n]["spec"]["volumes"] if v["name"] == "t9k-ssh"
                 for i in v["secret"]["items"]}
             for n in ("ds-worker-0", "ds-worker-1")}  # fmt: skip
    assert files == {
        "ds-worker-0": {"id_ed25519", "config", "known_hosts", "authorized_keys", "ssh_host_ed25519_key"},
        "ds-worker-1": {"authorized_keys", "ssh_host_ed25519_key"},
    }  # only the launcher holds the user key


def test_worker_0_launches_deepspeed_others_run_sshd():
    pods = manifests(run(ds()), "Pod")
    assert pods["ds-worker-1"]["spec"]["containers"][0]["command"] == [
        "/usr/sbin/sshd",
        "-D",
        "-e",
        "-h",
        "/root/.ssh/ssh_host_ed25519_key",
        "-o",
        "StrictModes=no",
    ]
    script = pods["ds-worker-0"]["spec"]["containers"][0]["command"][2]
    assert script.startswith(
        "set -e; /usr/sbin/sshd -h /root/.ssh/ssh_host_ed25519_key -o StrictModes=no; : > /root/.deepspeed_env; for n in "
        "NCCL_DEBUG; do"
    )
    assert "INFO" not in script
    assert "TOKEN" not in script
    assert "for h in $(cut -d' ' -f1 /t9k/hostfile)" in script
    assert script.endswith(
        "exec deepspeed --hostfile /t9k/hostfile --launcher pdsh train.py --deepspeed --deepspeed_config=ds.json"
    )


@pytest.mark.parametrize(
    ("config", "tail"),
    [
        ({"run": {"module": ["pkg.train", "--x"]}}, "deepspeed --hostfile /t9k/hostfile --launcher pdsh --module pkg.train --x"),
        ({"run": {"exec": ["bash", "run.sh"]}, "localRank": False, "autotune": "tune", "otherArgs": ["--master_port=29600"]},
         ("deepspeed --hostfile /t9k/hostfile --launcher pdsh --no_local_rank --autotuning tune --master_port=29600 --no_python "
          "bash run.sh")),
        ({"customCommand": "deepspeed --num_gpus 2 t.py", "run": {"python": ["ignored.py"]}}, "exec deepspeed --num_gpus 2 t.py"),
    ],
    ids=["module", "exec-with-options", "custom"],
)  # fmt: skip
def test_command_from_config(config, tail):
    script = manifests(run(ds(config=config)), "Pod")["ds-worker-0"]["spec"]["containers"][0]["command"][2]
    assert script.endswith(tail)


def test_disable_custom_env():
    p = run(ds(disableCustomEnv=True))
    assert "deepspeed_env" not in manifests(p, "ConfigMap")["ds-deepspeed"]["data"]
    assert ".deepspeed_env" not in manifests(p, "Pod")["ds-worker-0"]["spec"]["containers"][0]["command"][2]


def test_worker_0_decides_and_restarts_use_the_backoff():
    job = ds(runPolicy={"backoffLimit": 1})
    p = run(job, pod("ds-worker-0"), pod("ds-worker-1", "Failed", 1), status={"phase": "Running"})
    assert p.deletes("Pod") == ["ds-worker-1"]
    assert p.status["backoffCount"] == 1
    assert (
        run(job, pod("ds-worker-0", "Succeeded", 0), pod("ds-worker-1"), status={"phase": "Running"}).status["phase"]
        == "Succeeded"
    )


def test_debug_keeps_sshd_on_every_worker():
    pods = manifests(run(ds(runMode={"debug": {"enabled": True}})), "Pod")
    assert {tuple(p["spec"]["containers"][0]["command"]) for p in pods.values()} == {
        ("/usr/sbin/sshd", "-D", "-e", "-h", "/root/.ssh/ssh_host_ed25519_key", "-o", "StrictModes=no")
    }


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [({"config": {"run": {}}}, "exactly one of python, module or exec"),
     ({"config": {"run": {"python": ["a"], "module": ["b"]}}}, "exactly one of"),
     ({"config": {"slotsPerWorker": 0, "run": {"python": ["a"]}}}, "slotsPerWorker"),
     ({"config": {"autotune": "always", "run": {"python": ["a"]}}}, "autotune"),
     ({"elastic": {"enabled": True, "minReplicas": 3, "maxReplicas": 2}}, "1 <= minReplicas <= maxReplicas")],
    ids=["no-run", "two-runs", "slots", "autotune", "elastic-bounds"],
)  # fmt: skip
def test_bad_input(kwargs, needle):
    p = run(ds(**kwargs))
    assert p.status["phase"] == "Failed"
    assert needle in cond(p, "Failed")["message"]


def elastic(expected, low=1, high=4):
    return ds(3, elastic={"enabled": True, "minReplicas": low, "maxReplicas": high, "expectedReplicas": expected})


def hostfile(n):
    return "".join(f"ds-worker-{i} slots=4\n" for i in range(n))


@pytest.mark.parametrize(("expected", "workers"), [(3, 3), (9, 4), (0, 1)], ids=["within", "above-max", "below-min"])
def test_elastic_runs_expected_replicas_clamped_and_launches_elastic_training(expected, workers):
    p = run(elastic(expected))
    assert p.creates("Pod") == [f"ds-worker-{i}" for i in range(workers)]
    assert manifests(p, "ConfigMap")["ds-deepspeed"]["data"]["hostfile"] == hostfile(workers)
    launcher = manifests(p, "Pod")["ds-worker-0"]
    assert "--elastic_training --min_elastic_nodes=1 --max_elastic_nodes=4" in launcher["spec"]["containers"][0]["command"][2]
    assert launcher["metadata"]["annotations"]["batch.tensorstack.dev/hostfile-hash"]


def _running(job, n):
    """Pods as the first pass built them, now running, and the ConfigMap it wrote."""
    first = run(job)
    pods = []
    for name, m in manifests(first, "Pod").items():
        live = pod(name, rtype="worker")
        live["metadata"]["annotations"].update(m["metadata"]["annotations"])
        pods.append(live)
    cm = {
        "kind": "ConfigMap",
        "metadata": {"name": "ds-deepspeed"},
        "data": manifests(first, "ConfigMap")["ds-deepspeed"]["data"],
    }
    assert len(pods) == n
    return pods, cm, first.status


@pytest.mark.parametrize(("before", "after"), [(3, 2), (2, 4)], ids=["down", "up"])
def test_rescale_rewrites_the_hostfile_and_recreates_only_the_launcher(before, after):
    pods, cm, status = _running(elastic(before), before)
    p = run(elastic(after), *pods, cm, status={**status, "phase": "Running"})
    patch = next(a for a in p.actions if isinstance(a, Patch))
    assert (patch.kind, patch.name, patch.body["data"]["hostfile"]) == ("ConfigMap", "ds-deepspeed", hostfile(after))
    removed = [f"ds-worker-{i}" for i in range(after, before)]
    assert p.deletes("Pod") == ["ds-worker-0", *removed]
    assert p.creates("Pod") == [f"ds-worker-{i}" for i in range(before, after)]
    assert "ReplicaRecreated" in [e.reason for e in p.events]
    assert p.status["backoffCount"] == 0  # a rescale is not a failure


def test_a_steady_elastic_job_touches_nothing():
    pods, cm, status = _running(elastic(3), 3)
    p = run(elastic(3), *pods, cm, status={**status, "phase": "Running"})
    assert p.deletes() == []
    assert p.patches() == []
    assert p.creates("Pod") == []
    assert p.status["elastic"]["currentReplicas"] == 3
