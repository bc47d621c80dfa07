"""TensorFlowTrainingJob and XGBoostTrainingJob on the real node: the frameworks' own
distributed runtimes, configured only by what the controller injects."""

from __future__ import annotations

from tests.real.support import on_real_node, py

API = "batch.tensorstack.dev/v1beta1"


def job(kind: str, name: str, container: str, program: str, types: list[tuple[str, int]], memory: str = "1Gi") -> dict:
    def replica(rtype: str, n: int) -> dict:
        c = {"name": container, "command": py(program), "resources": {"limits": {"cpu": "400m", "memory": memory}}}
        return {"type": rtype, "replicas": n, "restartPolicy": "Never", "template": on_real_node({"spec": {"containers": [c]}})}

    return {
        "apiVersion": API,
        "kind": kind,
        "metadata": {"name": name},
        # Every replica's log is read after the job ends: the default clean-up (Unfinished) may
        # delete a replica still exiting when the master's success ends the job.
        "spec": {"replicaSpecs": [replica(t, n) for t, n in types], "runPolicy": {"cleanUpPolicy": "None"}},
    }


def result_lines(real, pods: list[str]) -> dict[str, dict[str, str]]:
    out = {}
    for pod in pods:
        lines = [ln for ln in real.log(pod).splitlines() if ln.startswith("result ")]
        assert lines, real.describe(pod)
        out[pod] = dict(kv.split("=", 1) for kv in lines[-1].split()[1:])
    return out


def test_tensorflow_multi_worker_mirrored_strategy_from_tf_config(jobs, controller, real):
    jobs.create(job("TensorFlowTrainingJob", "tf", "tensorflow", "tf_mwms.py", [("worker", 2)], memory="2Gi"))
    pods = ["tf-worker-0", "tf-worker-1"]
    done = real.finished(jobs, "TensorFlowTrainingJob", "tf", pods, timeout=300)
    assert done["status"]["phase"] == "Succeeded", real.describe(*pods)
    got = result_lines(real, pods)
    assert {p: r["task"] for p, r in got.items()} == {"tf-worker-0": "worker:0", "tf-worker-1": "worker:1"}
    # Two workers in sync: the collective all-reduce of replica ids 1 + 2 went over the network.
    assert {r["workers"] for r in got.values()} == {"2"}
    assert {r["allreduce"] for r in got.values()} == {"3"}
    # Mirrored variables: both workers end with the same loss.
    assert got["tf-worker-0"]["loss"] == got["tf-worker-1"]["loss"]


def test_xgboost_distributed_training_through_the_tracker(jobs, controller, real):
    jobs.create(job("XGBoostTrainingJob", "xgb", "xgboost", "xgb_dist.py", [("master", 1), ("worker", 2)]))
    pods = ["xgb-master-0", "xgb-worker-0", "xgb-worker-1"]
    done = real.finished(jobs, "XGBoostTrainingJob", "xgb", pods)
    assert done["status"]["phase"] == "Succeeded", real.describe(*pods)
    got = result_lines(real, pods)
    assert sorted(r["rank"] for r in got.values()) == ["0", "1", "2"]
    assert {r["world"] for r in got.values()} == {"3"}
    # One model trained together: every rank holds the same trees.
    assert len({(r["trees"], r["model_size"], r["rmse"]) for r in got.values()}) == 1, got
