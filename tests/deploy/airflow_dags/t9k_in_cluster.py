"""DAGs for tests/deploy/test_airflow_in_cluster.py: Airflow in pods on the real node, every call to
Kubernetes with ``in_cluster=True`` (the pod's own ServiceAccount; no kubeconfig anywhere).
The jobs go to the namespace of the ``kubernetes_default`` connection."""

from __future__ import annotations

import json
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_t9k.operators.kinds import GenericJobOperator

START = datetime(2026, 1, 1)
REAL = {"t9k.test/real": "true"}
TOLERATE_REAL = [{"key": "t9k.test/real", "operator": "Exists", "effect": "NoSchedule"}]
# A real replica on the real node: a log the UI reads through the kubelet, a termination message
# the kubelet keeps (the job's result).
TRAIN = "import json; print('epoch 1 loss 0.42', flush=True); open('/dev/termination-log', 'w').write(json.dumps({'acc': 0.91}))"


@task
def whoami() -> str:
    """The identity the worker's hook uses: the API server's own answer (a SelfSubjectReview)."""
    from kubernetes import client

    from airflow_t9k.hooks.t9k import T9kHook

    hook = T9kHook(in_cluster=True)
    review = client.AuthenticationV1Api(hook.api_client).create_self_subject_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    )
    return str(review.status.user_info.username)


# Submitted and waited for on the worker (the scheduler's LocalExecutor runs it in its pod).
with DAG("t9k_in_cluster_worker", start_date=START, schedule=None, catchup=False):
    whoami()
    GenericJobOperator(
        task_id="job",
        image="localhost/airflow-t9k/train:1",
        command=["python3", "-c", TRAIN],
        replicas=1,
        in_cluster=True,
        deferrable=False,
        node_selector=REAL,
        tolerations=TOLERATE_REAL,
        container_resources={"limits": {"cpu": "200m", "memory": "128Mi"}},
    )

# Submitted on the worker, then deferred: the triggerer's pod waits for it. The job runs 20 s on
# kwok: a trigger that fires within seconds of the deferral meets Airflow's stale defer-exit race
# (docs/airflow.md, "Known limits").
with DAG("t9k_in_cluster_deferred", start_date=START, schedule=None, catchup=False):
    GenericJobOperator(
        task_id="job",
        image="busybox",
        replicas=1,
        in_cluster=True,
        deferrable=True,
        pod_annotations={"sim.t9k.test/duration": "20s", "sim.t9k.test/message": json.dumps({"acc": 0.93})},
    )


@task
def outside_the_role() -> dict:
    """A job submitted by the worker's identity to a namespace the chart's Role does not cover
    (the run's conf names it): the API server's answer, which must be a refusal."""
    from airflow.sdk import get_current_context

    from airflow_t9k.hooks.t9k import T9kHook
    from airflow_t9k.k8s.errors import ApiError

    namespace = get_current_context()["dag_run"].conf["namespace"]
    worker = {"type": "worker", "replicas": 1, "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}}
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": "not-allowed"},
        "spec": {"replicaSpecs": [worker]},
    }
    try:
        created = T9kHook(in_cluster=True).create_job(job, namespace)
    except ApiError as exc:
        return {"status": exc.status, "message": exc.message, "server": str(exc.body.get("message", ""))}
    return {"status": 201, "uid": created["metadata"]["uid"]}


# The same identity, refused outside its Role.
with DAG("t9k_in_cluster_refused", start_date=START, schedule=None, catchup=False):
    outside_the_role()
