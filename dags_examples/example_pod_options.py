"""Pod-level options on a per-kind operator: a data volume, a GPU-node toleration and shared
memory for the DataLoader workers, applied to every replica (no hand-written job= needed)."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG
from kubernetes.client import models as k8s

from airflow_t9k.operators.kinds import PyTorchTrainingJobOperator

with DAG("example_pod_options", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, tags=["t9k", "example"]):
    PyTorchTrainingJobOperator(
        task_id="train",
        image="pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
        command="python train.py --data /data --workers 8",  # a string is split as a shell would
        replicas=2,
        machine_type="4U16G1P",
        # A real pipeline mounts its dataset from a PersistentVolumeClaim, e.g.
        #   k8s.V1Volume(name="data", persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(claim_name="imagenet"))
        # The local test cluster has no storage provisioner, so this example uses scratch space.
        volumes=[k8s.V1Volume(name="data", empty_dir=k8s.V1EmptyDirVolumeSource(size_limit="10Gi"))],
        volume_mounts=[k8s.V1VolumeMount(name="data", mount_path="/data")],
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        shm_size="2Gi",  # /dev/shm as memory-backed emptyDir; the container default (64Mi) starves DataLoader workers
        labels={"team": "vision"},
        # How long the local kwok cluster lets the simulated replicas run; inert on a real cluster (drop it).
        pod_annotations={"sim.t9k.test/duration": "15s"},
        deferrable=True,
    )
