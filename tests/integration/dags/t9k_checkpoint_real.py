"""Real node (tests/real/test_checkpoint_real.py): an Airflow retry resumes from the checkpoint.

``train`` runs 2-replica DDP (``ckpt_train.py`` from the test's ConfigMap ``code``) with
``checkpoint=`` on the claim ``params.claim``; on try 1 rank 0 exits 1 at step 20 (after the
epoch checkpoint at step 16), the job fails, Airflow retries, and try 2 (``T9K_ATTEMPT=2``)
finds step 16 in the same directory and finishes. ``uninterrupted`` is the same training in
one go (another task: another directory). ``compare`` prints both results and the XCom
``checkpoint`` and fails unless the final numbers are equal.

The replicas use restartPolicy ``Never`` rather than the typed operator's ``ExitCode``, so the
first try's failure fails the job at once and is left to Airflow's retry, whatever exit codes
a task treats as permanent.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import DAG, task

from airflow_t9k.operators.kinds import PyTorchTrainingJobOperator

IMAGE = "localhost/airflow-t9k/train:1"


def job(**env: str) -> dict[str, Any]:
    container = {
        "name": "pytorch", "image": IMAGE, "imagePullPolicy": "Never", "command": ["python3", "/code/ckpt_train.py"],
        "resources": {"limits": {"cpu": "400m", "memory": "1Gi"}}, "volumeMounts": [{"name": "code", "mountPath": "/code"}],
        "env": [{"name": "OMP_NUM_THREADS", "value": "1"}, *({"name": k, "value": v} for k, v in env.items())],
    }  # fmt: skip
    template = {"spec": {"containers": [container], "volumes": [{"name": "code", "configMap": {"name": "code"}}],
                         "nodeSelector": {"t9k.test/real": "true"},
                         "tolerations": [{"key": "t9k.test/real", "operator": "Exists", "effect": "NoSchedule"}]}}  # fmt: skip
    return {"kind": "PyTorchTrainingJob",
            "spec": {"replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": "Never",
                                       "template": template}]}}  # fmt: skip


with DAG("t9k_checkpoint_real", start_date=datetime(2026, 1, 1), schedule=None, catchup=False, params={"claim": "ckpt"}):
    common: dict[str, Any] = {"checkpoint": {"claim": "{{ params.claim }}", "path": "airflow"}, "termination_grace_period": 30,
                              "timeout": 600, "startup_timeout": 300}  # fmt: skip
    # Nothing interrupts these mid-step (the failure is the program's own, at step 20): no pause
    # between steps.
    train = PyTorchTrainingJobOperator(task_id="train", job=job(FAIL_AT_STEP="20", FAIL_ON_ATTEMPT="1", STEP_SECONDS="0"),
                                       retries=1, retry_delay=timedelta(seconds=2), **common)  # fmt: skip
    uninterrupted = PyTorchTrainingJobOperator(task_id="uninterrupted", job=job(STEP_SECONDS="0"), **common)

    @task
    def compare(ti: Any = None) -> str:
        got = {t: ti.xcom_pull(task_ids=t)["result"] for t in ("train", "uninterrupted")}
        reported = ti.xcom_pull(task_ids="train", key="checkpoint")
        print("checkpoint compare: " + json.dumps({"results": got, "xcom_checkpoint": reported,
                                                    "location": ti.xcom_pull(task_ids="train",
                                                                             key="checkpoint_location")}))  # fmt: skip
        if (got["train"]["loss"], got["train"]["checksum"]) != (got["uninterrupted"]["loss"], got["uninterrupted"]["checksum"]):
            raise ValueError(f"the resumed training ended elsewhere: {got}")
        return "resumed training matches"

    train >> uninterrupted >> compare()
