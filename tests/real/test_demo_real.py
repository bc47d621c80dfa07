"""`make demo-real`'s DAG under real Airflow: the retraining pipeline trains with 2 real DDP
replicas on the real node, and the metric that reaches "evaluate" through XCom is the one the
program measured and wrote as its termination message."""

from __future__ import annotations

import re

from kubernetes import client

from tests.integration.test_airflow_dags import ROOT, airflow_home, ok, run_dag  # noqa: F401  (fixtures)


def test_retraining_pipeline_real_returns_the_measured_metric(run_dag, jobs, real):
    code = (ROOT / "dags_examples" / "jobs" / "train_ddp.py").read_text()
    jobs.core.create_namespaced_config_map(jobs.ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="retraining-code"),
                                                                       data={"train_ddp.py": code}))  # fmt: skip
    out = ok(run_dag("retraining_pipeline_real"))
    metric = re.search(r"metric from the training job: ([0-9.]+)", out)
    assert metric, out[-4000:]
    # The same number rank 0 measured on held-out data, streamed into the task log.
    measured = re.search(r"rank 0: held-out accuracy ([0-9.]+)", out)
    assert measured, out[-4000:]
    assert float(measured.group(1)) == float(metric.group(1)), out[-4000:]
    assert float(metric.group(1)) > 0.8  # the problem is learnable: a broken training would not get here
    assert "promoted model with metric" in out
