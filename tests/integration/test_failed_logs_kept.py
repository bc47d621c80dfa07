"""The task log falls back to the kept evidence (issue 23, point 3): a failed job whose
``cleanUpPolicy: All`` deleted its pods still has its failed replicas' last lines printed into
the task log, from the ConfigMap ``<job>-evidence`` the controller kept, in both modes; a
ConfigMap of that name the job is not the controller of is ignored.

One job serves the three reads, in order: the trigger (deferred), the operator on the worker
(a try reattaching to the job that ended), then ``print_failed_logs`` against a forged record.
kwok serves every pod's log from the local cluster's pod-log file, so the kept lines end with
the lines this test appended while the replicas ran.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import datetime

import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowException, TaskDeferred
from kubernetes import client

from airflow_t9k.hooks.t9k import T9kHook
from airflow_t9k.operators.job import T9kJobOperator
from airflow_t9k.operators.logs import print_failed_logs
from tests.integration.test_failed_logs import _messages
from tests.integration.test_operator_trigger import _append_pod_log, conn, first_event  # noqa: F401 - fixtures
from tests.support.cluster import wait_until
from tests.support.task import Store, context


def _op(**kw) -> T9kJobOperator:
    sim = {"sim.t9k.test/duration": "6s", "sim.t9k.test/fail-pods": "-worker-0$", "sim.t9k.test/exit-code": "3"}
    job = {"kind": "GenericJob", "spec": {
        "cleanUpPolicy": "All", "failureRules": [{"worker": [0]}], "successRules": [{"worker": [0, 1]}],
        "replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": {"policy": "Never"},
                          "template": {"metadata": {"annotations": sim},
                                       "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}]}}  # fmt: skip
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        return T9kJobOperator(task_id="train", job=job, log_events=False, stream_logs=False, result_from=None,
                              evidence_log_lines=200, log_tail_lines=2, **kw)  # fmt: skip


def _printed(out: str, pod: str) -> tuple[str, list[str]]:
    """The header printed for ``pod``'s failed log and the lines under it (up to the next header)."""
    lines = _messages(out)
    [start] = [i for i, m in enumerate(lines) if m.startswith(f"--- log of failed replica {pod} ")]
    body = []
    for m in lines[start + 1 :]:
        if m.startswith("---") or " used: " in m:  # the next header, or the operator's next record
            break
        body.append(m)
    return lines[start], body


def test_the_task_log_prints_the_kept_lines_once_the_pods_are_gone(conn, cluster, jobs, controller, capsys):
    if cluster.external:
        pytest.skip("appending to pod logs needs the local cluster's kwok")
    marker = uuid.uuid4().hex[:8]
    store = Store()
    with pytest.raises(TaskDeferred) as deferred:
        _op(deferrable=True).execute(context(store))
    trigger = deferred.value.trigger
    name = store["t9k_job"]["name"]
    pod = f"{name}-worker-0"
    jobs.wait_phase("GenericJob", name, "Running")
    _append_pod_log(cluster, *[f"epoch {i} {marker}" for i in range(3)])  # before worker-0 fails (6 s)
    jobs.wait_phase("GenericJob", name, "Failed", timeout=60)
    wait_until(lambda: jobs.live_pods(name) == {}, timeout=60, what="pods cleaned up")
    assert f"epoch 2 {marker}" in jobs.core.read_namespaced_config_map(f"{name}-evidence", jobs.ns).data[f"{pod}.log"]
    capsys.readouterr()
    want = [f"epoch {i} {marker}" for i in range(3)]

    # Deferred: the trigger finds the job ended and its pods gone.
    event = asyncio.run(first_event(trigger, timeout=60)).payload
    header, body = _printed(capsys.readouterr().out, pod)
    assert event["status"] == "failed"
    assert [r["pod"] for r in event["failed_first"]] == [pod]
    assert "(failed first: the root cause" in header, header
    assert header.endswith(f"kept in the evidence record {name}-evidence (the pod is gone) ---"), header
    assert body[-3:] == want, body[-5:]
    assert event["logs"] == {pod: "\n".join(want[-2:])}  # the error's last lines come from the record too

    # On the worker: a try reattaching to the job that ended (its result not consumed yet).
    with pytest.raises(AirflowException) as failed:
        _op(deferrable=False).execute(context(store))
    header, body = _printed(capsys.readouterr().out, pod)
    assert header.endswith(f"kept in the evidence record {name}-evidence (the pod is gone) ---"), header
    assert body[-3:] == want, body[-5:]
    assert str(failed.value).endswith(f"--- last lines of {pod} ---\n{want[1]}\n{want[2]}"), str(failed.value)

    # A forged record: same name, naming the job as an owner but not as its controller.
    job = jobs.get("GenericJob", name)
    jobs.core.delete_namespaced_config_map(f"{name}-evidence", jobs.ns)
    wait_until(lambda: _gone(jobs, f"{name}-evidence"), timeout=30, what="the controller's record deleted")
    owner = {"apiVersion": job["apiVersion"], "kind": "GenericJob", "name": name, "uid": job["metadata"]["uid"]}
    jobs.core.create_namespaced_config_map(jobs.ns, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=f"{name}-evidence", owner_references=[owner]),
        data={f"{pod}.log": f"forged line {marker}\n"}))  # fmt: skip
    records: list[str] = []
    log = logging.getLogger(f"t9k-forged-{marker}")
    log.addHandler(_Collect(records))
    log.setLevel(logging.INFO)
    report = print_failed_logs(T9kHook(), job, log, max_lines=100, max_pods=2, tail_lines=2)
    text = "\n".join(records)
    assert f"forged line {marker}" not in text, text
    assert "forged" not in str(report), text
    assert f"ConfigMap {name}-evidence is not this job's evidence record" in text, text
    assert f"--- log of failed replica {pod} (failed first: the root cause" in text, text
    assert "kept in the evidence record" not in text, text


def _gone(jobs, name: str) -> bool:
    try:
        jobs.core.read_namespaced_config_map(name, jobs.ns)
    except client.ApiException as exc:
        return exc.status == 404
    return False


class _Collect(logging.Handler):
    def __init__(self, out: list[str]) -> None:
        super().__init__()
        self.out = out

    def emit(self, record: logging.LogRecord) -> None:
        self.out.append(record.getMessage())
