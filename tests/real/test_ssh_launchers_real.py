"""DeepSpeedJob and ColossalAIJob on the real node: the frameworks' own launchers (deepspeed over
pdsh from worker 0, ``colossalai run`` from the launcher) start one process per worker over SSH,
each with its rank, world size and master, and those processes meet in a gloo all-reduce."""

from __future__ import annotations

import re

from tests.real.support import IMAGE, on_real_node, py

API = "batch.tensorstack.dev/v1beta1"
LIMITS = {"limits": {"cpu": "400m", "memory": "768Mi"}}


RESULT = re.compile(r"result host=(?P<host>\S+?) rank=(?P<rank>\d+) world=(?P<world>\d+) local_rank=(?P<local_rank>\S+?) "
                    r"master=(?P<master>\S+?) allreduce=(?P<allreduce>\d+)")  # fmt: skip


def results(log: str) -> list[dict[str, str]]:
    """Every process's result line; a launcher may run two remote outputs into one line."""
    return [m.groupdict() for m in RESULT.finditer(log)]


def test_deepspeed_launches_over_pdsh_on_every_worker(jobs, controller, real):
    worker = {"name": "worker", "resources": LIMITS, "env": [{"name": "T9K_CHECK", "value": "passed-through"}]}
    jobs.create({
        "apiVersion": API, "kind": "DeepSpeedJob", "metadata": {"name": "ds"},
        "spec": {"config": {"slotsPerWorker": 1, "run": {"python": [py("launched_check.py")[1]]}},
                 "worker": {"replicas": 2, "template": on_real_node({"spec": {"containers": [worker]}})}},
    })  # fmt: skip
    pods = ["ds-worker-0", "ds-worker-1"]
    done = real.finished(jobs, "DeepSpeedJob", "ds", pods, timeout=240)
    assert done["status"]["phase"] == "Succeeded", real.describe(*pods)
    # pdsh brings every remote process's output back to worker 0, prefixed by its host.
    got = results(real.log("ds-worker-0"))
    assert sorted((r["host"], r["rank"]) for r in got) == [("ds-worker-0", "0"), ("ds-worker-1", "1")], real.describe(*pods)
    assert {(r["world"], r["allreduce"], r["local_rank"]) for r in got} == {("2", "3", "0")}
    # The master deepspeed handed out is worker 0's address, found over SSH.
    assert len({r["master"] for r in got}) == 1


def test_colossalai_run_launches_over_ssh_on_every_worker(jobs, controller, real):
    worker = {"name": "worker", "resources": LIMITS}
    jobs.create({
        "apiVersion": API, "kind": "ColossalAIJob", "metadata": {"name": "cai"},
        "spec": {"ssh": {"authMountPath": "/root/.ssh", "sshdPath": "/usr/sbin/sshd"},
                 "launcher": {"image": IMAGE, "workingDir": "/code", "resources": {"limits": {"cpu": "200m", "memory": "512Mi"}}},
                 "worker": {"replicas": 2, "procPerWorker": 1, "command": ["launched_check.py"],
                            "template": on_real_node({"spec": {"containers": [worker]}})}},
    })  # fmt: skip
    pods = ["cai-launcher", "cai-worker-0", "cai-worker-1"]
    done = real.finished(jobs, "ColossalAIJob", "cai", pods, timeout=240)
    assert done["status"]["phase"] == "Succeeded", real.describe(*pods)
    assert real.pod("cai-launcher").spec.node_name == "real-node-0"
    got = results(real.log("cai-launcher"))
    assert sorted((r["host"], r["rank"]) for r in got) == [("cai-worker-0", "0"), ("cai-worker-1", "1")], real.describe(*pods)
    assert {(r["world"], r["allreduce"], r["master"]) for r in got} == {("2", "3", "cai-worker-0:29500")}
