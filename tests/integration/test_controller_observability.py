"""Issue 46, item 6, against the local cluster: the controller run with --log-format=json writes
nothing but JSON lines, and those of a job's pass name the job, its uid and the pass; and every
metric the chart's dashboard and alert rules name is on a running controller's /metrics."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support.cluster import wait_until
from tests.support.controller import written_since
from tests.support.ha import leader_flags, leads
from tests.support.promql import PROMETHEUS_MADE, dashboard_queries, exposed_names, metric_names, rule_queries

FILES = Path(__file__).resolve().parents[2] / "deploy" / "chart" / "airflow-t9k" / "files"
SIM = {"sim.t9k.test/duration": "1s"}  # kwok ends the replica with success a second after it runs


def generic(name: str, ttl: int | None = None, node_selector: dict | None = None) -> dict:
    pod: dict = {"containers": [{"name": "main", "image": "busybox", "command": ["train"]}]}
    if node_selector:
        pod["nodeSelector"] = node_selector
    spec: dict = {"replicaSpecs": [{"type": "worker", "replicas": 1,
                                    "template": {"metadata": {"annotations": dict(SIM)}, "spec": pod}}]}  # fmt: skip
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": name}, "spec": spec}


def test_json_logs_are_json_lines_and_a_pass_s_lines_name_the_job_and_the_pass(jobs, controller_factory):
    controller = controller_factory("--log-format", "json")
    uid = jobs.create(generic("short", ttl=1))["metadata"]["uid"]  # it succeeds a second after it runs, then goes

    def deleted() -> list[dict]:
        return [ln for ln in _lines(written_since(controller.log_path, controller.launched_at))
                if ln["msg"].startswith("deleted GenericJob")]  # fmt: skip

    (line,) = wait_until(deleted, timeout=90, what="the job's success, then its TTL's deletion, logged")
    controller.stop()
    lines = _lines(written_since(controller.log_path, controller.launched_at))
    assert line.items() >= {"level": "info", "logger": "airflow_t9k.controller.apply", "kind": "GenericJob",
                            "namespace": jobs.ns, "job": "short", "uid": uid}.items(), line  # fmt: skip
    assert re.fullmatch(r"[0-9a-f]{12}", line["reconcileID"]), line
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["ts"]), line
    started = next(ln for ln in lines if ln["msg"].startswith("controller started"))
    assert not {"job", "uid", "reconcileID"} & set(started)  # no pass: no job
    assert any(ln["msg"] == "controller stopped" for ln in lines)


def _lines(text: str) -> list[dict]:
    """Every whole line of the controller's log as JSON: a line that is not fails the test (one
    still being written, with no newline yet, is left for the next read)."""
    out = []
    for n, raw in enumerate(text[: text.rfind("\n") + 1].splitlines(), 1):
        try:
            line = json.loads(raw)
        except ValueError as exc:
            raise AssertionError(f"line {n} of the controller's log is not JSON ({exc}): {raw!r}") from None
        assert isinstance(line, dict), raw
        assert {"ts", "level", "logger", "msg"} <= set(line), raw
        out.append(line)
    return out


def test_every_metric_the_dashboard_and_the_rules_name_is_on_a_running_controllers_metrics(jobs, namespace,
                                                                                          controller_factory):  # fmt: skip
    """Scraped from a leader (the leader gauge is there only with --leader-elect), with a job
    that succeeded (the finished jobs' counters) and one that waits Pending (no node fits it)."""
    lease = f"observability-{uuid.uuid4().hex[:6]}"
    controller = controller_factory(*leader_flags(namespace, lease))
    wait_until(lambda: leads(controller, lease), timeout=30, what="the controller leading")
    jobs.create(generic("done"))
    jobs.create(generic("waits", node_selector={"t9k.test/no-such-node": "x"}))
    jobs.wait_phase("GenericJob", "done", "Succeeded", timeout=60)
    jobs.wait_phase("GenericJob", "waits", "Pending", timeout=30)
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{controller.port}/metrics", timeout=5) as r:
        text = r.read().decode()
    families = list(text_string_to_metric_families(text))
    exported = exposed_names(families)
    dashboard = json.loads((FILES / "grafana-dashboard.json").read_text())
    rules = yaml.safe_load((FILES / "prometheus-rules.yaml").read_text())
    used = {n: where for where, expr in [*dashboard_queries(dashboard), *rule_queries(rules)] for n in metric_names(expr)}
    missing = {n: where for n, where in used.items() if n not in exported and n not in PROMETHEUS_MADE}
    assert not missing, missing
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}

    def value(metric: str, /, **labels: str) -> float | None:
        return next((v for (n, ls), v in samples.items() if n == metric and labels.items() <= dict(ls).items()), None)

    # Not only declared: the series the panels and alerts read have values for these jobs.
    assert value("leader_election_master_status", name=lease) == 1
    assert (value("airflow_t9k_jobs_pending_oldest_seconds", kind="GenericJob", job_namespace=namespace) or -1) >= 0
    assert value("airflow_t9k_jobs_finished_total", job_namespace=namespace, phase="Succeeded") == 1
    assert value("airflow_t9k_jobs", kind="GenericJob", phase="Pending") == 1
    assert value("airflow_t9k_jobs_replica_restarts", kind="GenericJob", job_namespace=namespace) == 0
    assert (value("controller_runtime_reconcile_total", controller="t9kjob", result="success") or 0) >= 1
    assert value("airflow_t9k_controller_queue_depth") is not None  # what AirflowT9kControllerDown reads
    assert (value("process_resident_memory_bytes") or 0) > 0
