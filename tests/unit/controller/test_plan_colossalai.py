"""plan() for ColossalAIJob: launcher, SSH workers, hostfile, launcher-decided outcome."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.reconcile import Create, CreateSSHSecret
from tests.builders import colossal, cond, pod, run, service

L, W0, W1 = "cai-launcher", "cai-worker-0", "cai-worker-1"


def manifests(p, kind):
    return {a.name: a.manifest for a in p.actions if isinstance(a, Create) and a.kind == kind}


def test_creates_launcher_workers_services_secret_and_hostfile():
    p = run(colossal())
    assert p.creates("Pod") == [L, W0, W1]
    assert p.creates("Service") == [W0, W1]
    assert [a.name for a in p.actions if isinstance(a, CreateSSHSecret)] == ["cai-ssh"]
    assert manifests(p, "ConfigMap")["cai-hostfile"]["data"]["hostfile"] == "cai-worker-0\ncai-worker-1\n"


def test_workers_run_sshd_with_the_key_mounted():
    worker = manifests(run(colossal()), "Pod")[W0]
    main = worker["spec"]["containers"][0]
    assert main["command"] == ["/usr/sbin/sshd", "-D", "-e", "-h", "/root/.ssh/ssh_host_ed25519_key", "-o", "StrictModes=no"]
    assert {"name": "t9k-ssh", "mountPath": "/root/.ssh"} in main["volumeMounts"]
    secret_vol = next(v for v in worker["spec"]["volumes"] if v["name"] == "t9k-ssh")
    # A worker gets what its sshd needs, never the private user key (a worker's image or user
    # could otherwise ssh into every other worker of the job).
    assert secret_vol["secret"] == {
        "secretName": "cai-ssh",
        "defaultMode": 0o600,
        "items": [
            {"key": "authorized_keys", "path": "authorized_keys"},
            {"key": "ssh_host_ed25519_key", "path": "ssh_host_ed25519_key"},
        ],
    }
    launcher = manifests(run(colossal()), "Pod")[L]
    files = {i["key"] for v in launcher["spec"]["volumes"] if v["name"] == "t9k-ssh" for i in v["secret"]["items"]}
    assert files == {"id_ed25519", "config", "known_hosts"}


def test_launcher_runs_colossalai_with_its_settings():
    job = colossal(worker={**colossal()["spec"]["worker"], "torchArgs": ["--max_restarts=2"]})
    launcher = manifests(run(job), "Pod")[L]
    main = launcher["spec"]["containers"][0]
    assert main["image"] == "hpcaitech/colossalai:0.3.0"
    assert main["workingDir"] == "/workspace"
    assert main["resources"] == {"limits": {"cpu": 1}}
    script = main["command"][2]
    assert main["command"][:2] == ["bash", "-c"]
    assert ("colossalai run --nproc_per_node 2 --hostfile /etc/t9k/hostfile --master_addr cai-worker-0 "
            "--master_port 29500 --extra_launch_args max_restarts=2 train.py arg1") in script  # fmt: skip
    assert "ssh -o BatchMode=yes" in script  # waits for every worker's sshd first


@pytest.mark.parametrize(
    ("launcher", "workers", "phase"),
    [
        (pod(L, "Succeeded", 0, rtype="launcher"), [pod(W0), pod(W1)], "Succeeded"),
        (pod(L, "Failed", 1, rtype="launcher"), [pod(W0), pod(W1)], "Failed"),
        (pod(L, "Succeeded", 0, rtype="launcher"), [pod(W0, "Failed", 1), pod(W1)], "Succeeded"),
    ],
    ids=["launcher-succeeds", "launcher-fails", "launcher-decides-once-ended"],
)
def test_launcher_decides(launcher, workers, phase):
    p = run(colossal(), launcher, *workers, status={"phase": "Running"})
    assert p.status["phase"] == phase
    assert p.deletes("Pod") == []  # no restarts, and cleanUpWorkers is off


def test_clean_up_workers_deletes_workers_and_their_services_only():
    job = colossal(runPolicy={"cleanUpWorkers": True})
    objs = [pod(L, "Succeeded", 0, rtype="launcher"), pod(W0), pod(W1), service(W0), service(W1)]
    p = run(job, *objs, status={"phase": "Running"})
    assert p.deletes("Pod") == [W0, W1]
    assert p.deletes("Service") == [W0, W1]


@pytest.mark.parametrize(
    ("debug", "launcher", "worker"),
    [
        ({"enabled": True}, ["sleep", "inf"], ["sleep", "inf"]),
        ({"enabled": True, "replicaSpecs": [{"type": "worker", "command": ["/usr/sbin/sshd", "-D"]}]},
         ["sleep", "inf"], ["/usr/sbin/sshd", "-D"]),
    ],
    ids=["seed-default-sleeps-everywhere", "seed-example-one-sshd-on-workers"],
)  # fmt: skip
def test_debug_follows_seed_003(debug, launcher, worker):
    # Fidelity issue, item 9: seed 003 gives every replica `sleep inf` by default.
    ps = manifests(run(colossal(runMode={"debug": debug})), "Pod")
    assert ps[L]["spec"]["containers"][0]["command"] == launcher
    assert ps[W0]["spec"]["containers"][0]["command"] == worker
    assert not ps[W0]["spec"]["containers"][0].get("args")


@pytest.mark.parametrize(
    ("torch_args", "extra"),
    [
        (["--rdzv_backend", "c10d"], "rdzv_backend=c10d"),
        (["--rdzv_backend=c10d", "--max_restarts", "2"], "rdzv_backend=c10d,max_restarts=2"),
        (["--standalone", "--max_restarts=2"], "standalone,max_restarts=2"),
        (["--max_restarts", "2", "--standalone"], "max_restarts=2,standalone"),
        (["--log_level", "-1"], "log_level=-1"),
        (["max_restarts=2"], "max_restarts=2"),
    ],
    ids=["separate-values", "mixed", "flag-then-pair", "pair-then-flag", "negative-number", "bare"],
)
def test_torch_args_become_extra_launch_args(torch_args, extra):
    # Fidelity issue, item 8: ["--rdzv_backend", "c10d"] used to become "rdzv_backend,c10d".
    job = colossal(worker={**colossal()["spec"]["worker"], "torchArgs": torch_args})
    script = manifests(run(job), "Pod")[L]["spec"]["containers"][0]["command"][2]
    assert f"--extra_launch_args {extra} train.py arg1" in script


def test_torch_args_with_a_comma_are_refused():
    job = colossal(worker={**colossal()["spec"]["worker"], "torchArgs": ["--rdzv_conf", "a=1,b=2"]})
    failed = cond(run(job), "Failed")
    assert failed["reason"] == "InvalidSpec"
    assert "contains a comma" in failed["message"]


def test_status_lists_launcher_and_worker_tasks():
    p = run(colossal(), pod(L, rtype="launcher"), pod(W0), pod(W1))
    assert [t["type"] for t in p.status["tasks"]] == ["launcher", "worker"]
    assert [r["name"] for r in p.status["tasks"][1]["status"]] == [W0, W1]
    assert p.status["phase"] == "Running"
    assert cond(p, "Initializing")["status"] == "False"  # secret, hostfile and services not observed yet


def test_pause_deletes_launcher_and_workers():
    p = run(
        colossal(runMode={"pause": {"enabled": True}}), pod(L, rtype="launcher"), pod(W0), pod(W1), status={"phase": "Running"}
    )
    assert p.deletes("Pod") == [L, W0, W1]
    assert p.status["phase"] == "Paused"


@pytest.mark.parametrize(
    ("worker_spec", "expected"),
    [
        ({}, {}),
        (
            {
                "nodeSelector": {"t9k.test/real": "true"},
                "tolerations": [{"key": "gpu", "operator": "Exists"}],
                "volumes": [{"name": "code"}],
            },
            {"nodeSelector": {"t9k.test/real": "true"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]},
        ),
        (
            {"priorityClassName": "high", "imagePullSecrets": [{"name": "reg"}], "serviceAccountName": "trainer"},
            {"priorityClassName": "high", "imagePullSecrets": [{"name": "reg"}]},
        ),
    ],
)
def test_launcher_goes_where_the_workers_may_go(worker_spec, expected):
    job = colossal()
    job["spec"]["worker"]["template"]["spec"].update(worker_spec)
    launcher = manifests(run(job), "Pod")[L]["spec"]
    placement = (
        "nodeSelector",
        "tolerations",
        "affinity",
        "imagePullSecrets",
        "priorityClassName",
        "schedulerName",
        "serviceAccountName",
    )
    assert {k: launcher[k] for k in placement if k in launcher} == expected
    assert not any(v["name"] == "code" for v in launcher.get("volumes") or [])  # the workers' volumes stay theirs
