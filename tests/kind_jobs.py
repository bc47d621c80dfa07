"""One small valid job of every kind, accepted by its CRD and by its kind module.

Shared by the unit and the integration tests of seed 000's mode table and of the replica
ceilings, so both check the same bodies.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.builders import colossal, generic, pytorch, training

Obj = dict[str, Any]

T9K = "batch.tensorstack.dev/v1beta1"
# Seed 000: which kind supports which mode (Immediate is every kind's).
MODES = {
    "GenericJob": {"debug", "pause"},
    "PyTorchTrainingJob": {"debug", "pause", "elastic"},
    "TensorFlowTrainingJob": {"debug", "pause"},
    "XGBoostTrainingJob": {"debug", "pause"},
    "MPIJob": {"debug", "pause"},
    "ColossalAIJob": {"debug", "pause"},
    "DeepSpeedJob": {"debug", "pause", "elastic"},
    "BeamJob": set(),
}


def _meta(name: str) -> Obj:
    return {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": 1}


def _mpi(name: str) -> Obj:
    container = {"name": "mpi-worker", "image": "mpi:1"}
    return {"apiVersion": T9K, "kind": "MPIJob", "metadata": _meta(name),
            "spec": {"worker": {"replicas": 2, "cmd": ["./run"], "template": {"spec": {"containers": [container]}}}}}  # fmt: skip


def _deepspeed(name: str) -> Obj:
    return {"apiVersion": T9K, "kind": "DeepSpeedJob", "metadata": _meta(name),
            "spec": {"config": {"run": {"python": ["train.py"]}},
                     "worker": {"replicas": 2,
                                "template": {"spec": {"containers": [{"name": "worker", "image": "ds:1"}]}}}}}  # fmt: skip


def _beam(name: str) -> Obj:
    return {"apiVersion": T9K, "kind": "BeamJob", "metadata": _meta(name),
            "spec": {"flinkClusterTemplate": {"spec": {"image": {"name": "flink:1"}, "taskManager": {"replicas": 1}}},
                     "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "submit",
                                                                                    "image": "beam"}]}}}}}}  # fmt: skip


def _ascend(name: str) -> Obj:
    def replica(n: int) -> Obj:
        return {"replicas": n, "template": {"spec": {"containers": [{"name": "ascend", "image": "img"}]}}}

    meta = {**_meta(name), "labels": {"framework": "pytorch"}}
    return {"apiVersion": "mindxdl.gitee.com/v1", "kind": "AscendJob", "metadata": meta,
            "spec": {"replicaSpecs": {"Master": replica(1), "Worker": replica(1)}}}  # fmt: skip


def _named(job: Obj, name: str) -> Obj:
    job["metadata"] = _meta(name)
    return job


def minimal(kind: str, name: str = "mode") -> Obj:
    """A fresh valid job of ``kind`` (two replicas where the kind has a count)."""
    builders = {
        "GenericJob": lambda: generic(name),
        "PyTorchTrainingJob": lambda: _named(pytorch(name, ("worker", 2)), name),
        "TensorFlowTrainingJob": lambda: _named(training("TensorFlowTrainingJob", "tensorflow", name, ("worker", 2)), name),
        "XGBoostTrainingJob": lambda: _named(training("XGBoostTrainingJob", "xgboost", name, ("master", 1), ("worker", 1)), name),
        "MPIJob": lambda: _mpi(name),
        "ColossalAIJob": lambda: _named(colossal(name), name),
        "DeepSpeedJob": lambda: _deepspeed(name),
        "BeamJob": lambda: _beam(name),
        "AscendJob": lambda: _ascend(name),
    }
    return copy.deepcopy(builders[kind]())


def with_mode(job: Obj, mode: str) -> Obj:
    """``job`` with Debug, Pause or Elastic mode switched on, as the T9k manuals write it."""
    job = copy.deepcopy(job)
    spec = job["spec"]
    if mode == "elastic":
        spec["elastic"] = {"enabled": True, "minReplicas": 1, "maxReplicas": 4}
        if job["kind"] == "PyTorchTrainingJob":
            spec["torchrunConfig"] = {"enabled": True}
    else:
        spec["runMode"] = {mode: {"enabled": True}}
    return job


# Where each kind keeps the replica count of one type, to set it past the ceiling.
def with_replicas(job: Obj, count: int) -> Obj:
    job = copy.deepcopy(job)
    spec = job["spec"]
    if job["kind"] in ("MPIJob", "ColossalAIJob", "DeepSpeedJob"):
        spec["worker"]["replicas"] = count
    elif job["kind"] == "BeamJob":
        spec["flinkClusterTemplate"]["spec"]["taskManager"]["replicas"] = count
    elif job["kind"] == "AscendJob":
        spec["replicaSpecs"]["Worker"]["replicas"] = count
    else:
        spec["replicaSpecs"][-1]["replicas"] = count
    return job
