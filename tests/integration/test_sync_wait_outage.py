"""A worker that waits without deferring rides out an API server that goes away and returns.

The link to the real API server runs through a loopback proxy that the test cuts for a few
seconds while the job runs; the task still ends with the job, and says what happened.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from urllib.parse import urlparse

import pytest
import yaml
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowTaskTimeout

from airflow_t9k.operators.kinds import GenericJobOperator
from tests.integration.test_trigger_errors import context, kubeconfig_to
from tests.support.proxy import CuttableProxy


@pytest.fixture
def proxy(cluster):
    server = yaml.safe_load(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    url = urlparse(server)  # the API server's address: 127.0.0.1, or the real node's gateway
    p = CuttableProxy(int(url.port or 443), url.hostname or "127.0.0.1")
    yield p
    p.close()


def make_op(path, namespace, **kw):
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        return GenericJobOperator(task_id="train", image="busybox", replicas=1, namespace=namespace, kubernetes_conn_id=None,
                                  config_file=str(path), deferrable=False, **kw)  # fmt: skip


def cut_for(proxy: CuttableProxy, after: float, seconds: float) -> threading.Thread:
    def run() -> None:
        time.sleep(after)
        proxy.cut()
        time.sleep(seconds)
        proxy.restore()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_sync_wait_survives_a_cut_link_and_ends_with_the_job(proxy, cluster, namespace, controller, tmp_path, capfd):
    path = kubeconfig_to(cluster, tmp_path, server=f"https://127.0.0.1:{proxy.port}")
    op = make_op(path, namespace, pod_annotations={"sim.t9k.test/duration": "8s"})
    cutter = cut_for(proxy, after=2, seconds=4)
    result = op.execute(context())
    cutter.join()
    assert result["phase"] == "Succeeded"
    out = "".join(capfd.readouterr())
    assert "cannot reach the Kubernetes API server" in out
    assert "retrying in" in out


def test_a_link_that_stays_cut_ends_the_wait_at_the_deadline(proxy, cluster, namespace, controller, tmp_path):
    path = kubeconfig_to(cluster, tmp_path, server=f"https://127.0.0.1:{proxy.port}")
    op = make_op(path, namespace, timeout=8)
    cutter = cut_for(proxy, after=2, seconds=60)
    started = time.monotonic()
    with pytest.raises(AirflowTaskTimeout, match="last error: cannot reach the Kubernetes API server"):
        op.execute(context())
    assert time.monotonic() - started < 25
    proxy.restore()
    cutter.join(0)
