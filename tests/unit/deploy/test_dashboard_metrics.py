"""The chart's Grafana dashboard and alert rules (deploy/chart/airflow-t9k/files): well formed, and
naming only metrics the controller exports, as its registry holds them in-process (the running
controller's /metrics: tests/integration/test_controller_observability.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from tests.support.promql import PROMETHEUS_MADE, dashboard_queries, exposed_names, metric_names, rule_queries
from tests.unit.controller.test_metrics_and_probes import offline_controller

FILES = Path(__file__).resolve().parents[3] / "deploy" / "chart" / "airflow-t9k" / "files"
DASHBOARD = json.loads((FILES / "grafana-dashboard.json").read_text())
RULES = yaml.safe_load((FILES / "prometheus-rules.yaml").read_text())
QUERIES = [*dashboard_queries(DASHBOARD), *rule_queries(RULES)]


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("up", {"up"}),
        ('sum by (result) (rate(controller_runtime_reconcile_total{controller="t9kjob", job=~"$job"}[$__rate_interval]))',
         {"controller_runtime_reconcile_total"}),
        ("histogram_quantile(0.99, sum by (le) (rate(x_seconds_bucket[5m])))", {"x_seconds_bucket"}),
        ("sum(rate(a_total[5m])) by (code) / ignoring(code) group_left sum(rate(b_total[5m]))", {"a_total", "b_total"}),
        ("a / on(pod) group_left(node) b", {"a", "b"}),
        ("count(m == 0) or vector(0)", {"m"}),
        ("max(m offset 1h) > bool 1e3 and n:recorded:rate5m unless absent(o{x=\"y(z)\"})", {"m", "n:recorded:rate5m", "o"}),
        ('sum(m{a="sum(q)", b=~"[x]{2}", c="by (p)"}) > 0x1F', {"m"}),
        ("rate(m[5m:30s] @ end())", {"m"}),
        ("sum by (kind)(m) * 100 - Inf", {"m"}),
        ('label_values(airflow_t9k_jobs{namespace=~"$namespace"}, kind)', {"airflow_t9k_jobs"}),
        ("label_values(m, namespace)", {"m"}),
        ("query_result(topk(3, m))", {"m"}),
    ],
)  # fmt: skip
def test_the_extractor(expr, names):
    assert metric_names(expr) == names


@pytest.mark.parametrize(
    ("family", "names"),
    [
        (CounterMetricFamily("c", "h", labels=["x"]), {"c_total", "c_created"}),
        (GaugeMetricFamily("g", "h", labels=["x"]), {"g"}),
        (HistogramMetricFamily("h", "h", labels=["x"]), {"h_bucket", "h_sum", "h_count", "h_created"}),
    ],
)
def test_a_family_with_no_sample_yet_exposes_its_names(family, names):
    assert exposed_names([family]) == names


@pytest.mark.asyncio
async def test_every_metric_the_dashboard_and_the_rules_name_is_the_controllers():
    controller = offline_controller()
    try:
        exported = exposed_names(controller.instruments.registry.collect())
    finally:
        await controller.kube.close()
    used = {name: where for where, expr in QUERIES for name in metric_names(expr)}
    unknown = {name: where for name, where in used.items() if name not in exported and name not in PROMETHEUS_MADE}
    assert not unknown, unknown
    assert set(used) & PROMETHEUS_MADE == {"up"}
    # What issue 46 asked the dashboard to show, each by the metric that shows it.
    wanted = {"controller_runtime_reconcile_total", "controller_runtime_reconcile_time_seconds_bucket", "workqueue_depth",
              "rest_client_requests_total", "airflow_t9k_progress_push_requests_total", "process_resident_memory_bytes",
              "process_cpu_seconds_total", "leader_election_master_status", "airflow_t9k_jobs",
              "airflow_t9k_job_accelerator_seconds_total", "airflow_t9k_jobs_replica_restarts",
              "airflow_t9k_jobs_reporting_progress", "airflow_t9k_jobs_pending_oldest_seconds"}  # fmt: skip
    assert wanted <= {n for where, expr in dashboard_queries(DASHBOARD) for n in metric_names(expr)}


@pytest.mark.parametrize(("where", "expr"), QUERIES, ids=[w for w, _ in QUERIES])
def test_every_query_is_balanced_and_names_a_metric(where, expr):
    stack, pairs, quote = [], {")": "(", "]": "[", "}": "{"}, None
    for ch in expr:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            assert stack, (where, expr)
            assert stack.pop() == pairs[ch], (where, expr)
    assert not stack, (where, expr)
    assert not quote, (where, expr)
    assert metric_names(expr), (where, expr)


def _panels(items):
    for p in items:
        yield p
        yield from _panels(p.get("panels") or [])


def test_the_dashboard_is_grafana_s_json_with_a_prometheus_datasource_variable():
    assert 36 <= DASHBOARD["schemaVersion"] <= 41
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("namespace", "job", "job_namespace"):
        assert variables[name]["type"] == "query"
        assert variables[name]["datasource"]["uid"] == "${datasource}"
    panels = list(_panels(DASHBOARD["panels"]))
    assert len({p["id"] for p in panels}) == len(panels)
    assert [p["title"] for p in panels if p["type"] == "row"] == ["Controller health", "Jobs"]
    cells: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        assert 0 <= g["x"] <= g["x"] + g["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, f"{p['title']} overlaps another panel"
        cells |= mine
        if p["type"] == "row":
            continue
        assert p["targets"], p["title"]
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        for t in p["targets"]:
            assert t["expr"].strip(), p["title"]
            assert t["datasource"]["uid"] == "${datasource}", p["title"]
        assert p.get("description"), f"{p['title']}: say what it shows and from which metric"


def test_the_rules_are_a_list_of_groups_of_alerts_with_severity_and_text():
    assert isinstance(RULES, list)
    assert RULES
    alerts = []
    for group in RULES:
        assert set(group) == {"name", "rules"}, group.keys()
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
            assert rule["labels"]["severity"] in ("critical", "warning", "info")
            assert rule["annotations"]["summary"]
            assert rule["annotations"]["description"]
            alerts.append(rule["alert"])
    assert len(set(alerts)) == len(alerts)
    assert {"AirflowT9kControllerDown", "AirflowT9kNoLeader", "AirflowT9kReconcileErrorsHigh",
            "AirflowT9kJobPendingTooLong"} <= set(alerts)  # fmt: skip
    pending = next(r for g in RULES for r in g["rules"] if r["alert"] == "AirflowT9kJobPendingTooLong")
    assert "> 1800" in pending["expr"]  # 30 minutes
