"""benchmarks/dashboard_picture.py's evaluator (benchmarks/promql_lite.py): every query of the
chart's dashboard evaluates over recorded scrapes of an in-process controller's registry, to the
numbers Prometheus gives for them. (Drawing needs matplotlib, the 'bench' extra: not tested here.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from tests.unit.controller.test_metrics_and_probes import offline_controller

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))

from dashboard_picture import DASHBOARD, scrapes, series, substitute  # noqa: E402
from promql_lite import Evaluator, Parser, Unsupported  # noqa: E402

TARGET = {"namespace": "airflow-t9k-system", "job": "airflow-t9k-controller-metrics", "pod": "replica-0"}


def _panels(items):
    for p in items:
        if p["type"] != "row":
            yield p
        yield from _panels(p.get("panels") or [])


@pytest.mark.asyncio
async def test_every_panel_evaluates_over_scrapes_of_a_controller():
    controller = offline_controller()
    m = controller.instruments
    raw = []
    try:
        for n in range(7):  # a scrape every 10 s: 6 reconciles, 3 of them errors, between two scrapes
            if n:
                for _ in range(3):
                    m.reconcile_total.labels("t9kjob", "success").inc()
                    m.reconcile_total.labels("t9kjob", "error").inc()
                    m.reconcile_errors.labels("t9kjob").inc()
                    m.reconcile_time.labels("t9kjob").observe(0.02)
                    m.reconcile_time.labels("t9kjob").observe(0.2)
            if n == 3:
                meta = {"name": "a", "namespace": "ns", "creationTimestamp": "2000-01-01T00:00:00Z"}
                job = {"kind": "GenericJob", "metadata": meta, "status": {"phase": "Pending"}}
                controller.informers[("GenericJob", "ns")].cache[("ns", "a")] = job
            raw.append([1000.0 + 10 * n, generate_latest(m.registry).decode()])
    finally:
        await controller.kube.close()
    ev = Evaluator([scrapes(raw, TARGET)])
    dashboard = json.loads(DASHBOARD.read_text())
    drawn = {p["title"]: series(ev, p, [1060.0], 30.0, 60.0) for p in _panels(dashboard["panels"])}
    # 30 s window over scrapes 10 s apart: 3 intervals of 3 passes of each result, 0.3 a second.
    assert drawn["Reconciles by result"] == {"error": [pytest.approx(0.3)], "success": [pytest.approx(0.3)]}
    # Half the passes took 0.02 s (bucket 0.01-0.025), half 0.2 s (0.15-0.2): p50 at 0.025, p99 near 0.2.
    assert drawn["Reconcile time"]["p50"] == [pytest.approx(0.025)]
    assert 0.19 < drawn["Reconcile time"]["p99"][0] <= 0.2
    assert drawn["Reconcile errors in range"] == {"A": [pytest.approx(18.0)]}  # every error of the minute
    assert drawn["Replicas up"] == {"A": [1.0]}
    assert drawn["Leaders"] == {}  # no --leader-elect: no sample, Grafana's "No data"
    assert drawn["Watches failing"] == {"A": [float(len(controller.informers))]}  # the offline controller's: never synced
    assert drawn["Jobs by kind and phase"] == {"GenericJob Pending": [1.0]}
    assert drawn["Longest Pending by kind and namespace"]["GenericJob ns"][0] > 26 * 365 * 86400
    assert drawn["Resident memory"]["replica-0"][0] > 0


@pytest.mark.parametrize(
    ("expr", "error"),
    [("a / on(b) c", "vector matching"), ("rate(m[5m:1m])", "subqueries"), ("topk(3, m)", "function topk"),
     ('{__name__="m"}', "without a metric name")],
)  # fmt: skip
def test_what_it_does_not_evaluate_says_so(expr, error):
    with pytest.raises(Unsupported, match=error):
        Evaluator([[(0.0, {})]]).at(expr, 0.0)


def test_grafana_variables_become_all():
    got = substitute('rate(m{namespace=~"$namespace", x=~"${job}"}[$__rate_interval]) [$__range]', 20, 3600)
    assert got == 'rate(m{namespace=~".*", x=~".*"}[20s]) [3600s]'
    assert Parser("sum by (a) (rate(m[20s])) / 3600 > bool 1").parse().op == "bin"
