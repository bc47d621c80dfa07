"""Two training tasks on one Kueue queue (docs/queueing.md).

Each asks for 3 GPUs; on a ClusterQueue with 4 they cannot run together, so Kueue admits
one and the other waits in the queue with no pod at all (its task log says "waiting in
queue gpu: ..."), then runs when the first ends. ``priority`` orders them, and a higher one
preempts a running lower one. ``queue_timeout`` bounds the wait; ``startup_timeout``
counts only from admission. Without Kueue (or without a LocalQueue ``gpu`` in the
namespace) both simply run, as before.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_t9k.operators.kinds import PyTorchTrainingJobOperator

with DAG("example_queue", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, tags=["t9k", "example"]):
    for name, priority in (("train_small", 10), ("train_large", 20)):
        PyTorchTrainingJobOperator(
            task_id=name,
            image="pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
            command=["python", "-c", "print('training')"],
            replicas=3,
            machine_type="4U16G1P",  # 1 GPU per replica: 3 per job
            queue_name="gpu",  # a LocalQueue in the job's namespace (queue= is the Celery queue)
            priority=priority,
            queue_timeout=3600,
            startup_timeout=600,
            # How long the local kwok cluster lets the simulated replicas run; inert on a real cluster (drop it).
            pod_annotations={"sim.t9k.test/duration": "15s"},
            deferrable=True,
        )
