"""The trigger, sensor and hooks when things go wrong, against the real API server.

An unreachable API server, a resource type the server does not serve, an identity that may
not list, a watch that has not seen a job yet, a job that reaches a sensor's non-terminal
target, replicas that stay Pending: each ends the wait as it should, with one sentence
naming the cause and the fix. The deferral itself, under a real triggerer, is in
test_e2e_airflow.py.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowException, AirflowTaskTimeout, TaskDeferred
from kubernetes import client

from airflow_t9k.api.resources import RESOURCES, JobResource
from airflow_t9k.hooks.t9k import T9kHook
from airflow_t9k.k8s.errors import NotServed, Unreachable
from airflow_t9k.operators.kinds import GenericJobOperator
from airflow_t9k.sensors.job import T9kJobSensor
from airflow_t9k.triggers import shared_watch
from airflow_t9k.triggers.job import T9kJobTrigger
from tests.support.controller import free_port
from tests.support.task import FakeTI, Store
from tests.support.task import context as task_context

INSTALL = "install the CRDs: airflow-t9k crds | kubectl apply --server-side -f -"


def context(run_id="manual__1"):
    return task_context(run_id=run_id)


@pytest.fixture
def conn(monkeypatch, cluster, namespace):
    extra = f'{{"kube_config_path": "{cluster.kubeconfig}", "namespace": "{namespace}"}}'
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", f'{{"conn_type": "kubernetes", "extra": {extra}}}')


def make_op(sim=None, **kw):
    kw.setdefault("image", "busybox")
    kw.setdefault("replicas", 2)
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        return GenericJobOperator(task_id="train", pod_annotations=sim or {}, **kw)


def deferred(op, run_id="manual__1") -> T9kJobTrigger:
    with pytest.raises(TaskDeferred) as exc:
        op.execute(context(run_id))
    return exc.value.trigger


async def first_event(trigger: T9kJobTrigger, timeout: float = 30) -> dict:
    return (await asyncio.wait_for(trigger.run().__anext__(), timeout)).payload


def in_(seconds: float) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=seconds)).isoformat()


def kubeconfig_to(cluster, tmp_path: Path, *, server: str | None = None, token: str | None = None) -> Path:
    """The local cluster's kubeconfig, pointed at another server or holding another identity."""
    base = yaml.safe_load(cluster.kubeconfig.read_text())
    if server:
        base["clusters"][0]["cluster"]["server"] = server
    if token:
        base["users"] = [{"name": "sa", "user": {"token": token}}]
        base["contexts"][0]["context"]["user"] = "sa"
    path = tmp_path / f"kubeconfig-{uuid.uuid4().hex[:6]}"
    path.write_text(yaml.safe_dump(base))
    return path


def closed_port_kubeconfig(cluster, tmp_path: Path) -> tuple[Path, str]:
    server = f"https://127.0.0.1:{free_port()}"  # bound and released: nothing listens there
    return kubeconfig_to(cluster, tmp_path, server=server), server


def sa_kubeconfig(api_client, cluster, namespace: str, tmp_path: Path, verbs: list[str]) -> Path:
    """A real ServiceAccount token whose Role allows only ``verbs`` on genericjobs."""
    core, rbac = client.CoreV1Api(api_client), client.RbacAuthorizationV1Api(api_client)
    name = f"limited-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    rbac.create_namespaced_role(namespace, {"metadata": {"name": name}, "rules": [
        {"apiGroups": ["batch.tensorstack.dev"], "resources": ["genericjobs"], "verbs": verbs}]})  # fmt: skip
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]})  # fmt: skip
    token = core.create_namespaced_service_account_token(name, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    return kubeconfig_to(cluster, tmp_path, token=token)


# -- bug 2: the deadline holds in every state; permanent errors end the wait at once ------------


@pytest.mark.asyncio
async def test_unreachable_api_server_the_trigger_yields_timeout_at_the_deadline(cluster, tmp_path):
    path, server = closed_port_kubeconfig(cluster, tmp_path)
    trigger = T9kJobTrigger(kind="GenericJob", name="j", namespace="ns", uid="u", kubernetes_conn_id=None,
                            config_file=str(path), deadline=in_(3))  # fmt: skip
    started = time.monotonic()
    event = await first_event(trigger, timeout=30)
    assert event["status"] == "timeout", event
    assert 2.5 < time.monotonic() - started < 10
    assert f"cannot reach the Kubernetes API server at {server} (connection refused)" in event["message"], event["message"]
    assert shared_watch.active_watches() == 0


@pytest.mark.asyncio
async def test_a_bad_kubeconfig_yields_an_error_event(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    trigger = T9kJobTrigger(kind="GenericJob", name="j", namespace="ns", kubernetes_conn_id=None, config_file=str(path))
    event = await first_event(trigger, timeout=15)
    assert event["status"] == "error"
    assert f"cannot load the Kubernetes configuration of the triggerer's identity (kubeconfig {path})" in event["message"]
    assert shared_watch.active_watches() == 0


@pytest.fixture
def unserved_kind(monkeypatch) -> str:
    """A kind the package knows but the API server does not serve (its CRD is not installed)."""
    monkeypatch.setitem(RESOURCES, "NoSuchJob", JobResource("nosuch.t9k.test", "v1", "NoSuchJob", "nosuchjobs", ()))
    return "NoSuchJob"


@pytest.mark.asyncio
async def test_missing_crd_ends_the_wait_at_once_saying_how_to_install_it(conn, namespace, unserved_kind):
    trigger = T9kJobTrigger(kind=unserved_kind, name="j", namespace=namespace)  # no deadline at all
    event = await first_event(trigger, timeout=15)
    assert event["status"] == "error"
    assert "the API server does not serve nosuchjobs.nosuch.t9k.test" in event["message"]
    assert INSTALL in event["message"]


def test_missing_crd_and_unreachable_server_in_the_sync_hook(conn, cluster, namespace, unserved_kind, tmp_path):
    with pytest.raises(NotServed, match="install the CRDs: airflow-t9k crds"):
        T9kHook().get_job(unserved_kind, "j", namespace)  # was: None, as if the job were gone
    with pytest.raises(NotServed, match="does not serve nosuchjobs.nosuch.t9k.test"):
        T9kHook().create_job({"kind": unserved_kind, "metadata": {"name": "j"}}, namespace)
    path, server = closed_port_kubeconfig(cluster, tmp_path)
    with pytest.raises(Unreachable) as exc:
        T9kHook(config_file=str(path)).create_job({"kind": "GenericJob", "metadata": {"name": "j"}}, namespace)
    assert str(exc.value.message) == (
        f"cannot reach the Kubernetes API server at {server} (connection refused); check that the cluster is up "
        f"and that the worker's identity (kubeconfig {path}) points at it"
    )
    assert exc.value.__cause__ is None
    assert exc.value.__suppress_context__


def test_unreachable_server_fails_the_operator_with_one_sentence(cluster, tmp_path):
    path, server = closed_port_kubeconfig(cluster, tmp_path)
    with pytest.raises(Unreachable, match=f"cannot reach the Kubernetes API server at {server}"):
        make_op(namespace="ns", kubernetes_conn_id=None, config_file=str(path), deferrable=True).execute(context())


@pytest.mark.asyncio
async def test_triggerer_without_list_permission_fails_the_deferred_task_saying_so(conn, api_client, cluster, namespace, jobs,
                                                                                  controller, tmp_path):  # fmt: skip
    path = sa_kubeconfig(api_client, cluster, namespace, tmp_path, ["get", "create", "patch", "delete"])
    op = make_op(namespace=namespace, config_file=str(path), deferrable=True, log_events=False)
    trigger = deferred(op)  # the worker may create and get: it submits and defers
    event = await first_event(trigger, timeout=15)
    assert event["status"] == "error"
    expect = (
        f"the triggerer's identity (kubeconfig {path}) may not list genericjobs.batch.tensorstack.dev in namespace {namespace}"
    )
    assert expect in event["message"], event["message"]
    with pytest.raises(AirflowException, match="may not list genericjobs"):
        op.execute_complete(context(), event)


# -- bug 3: a cache miss is confirmed with a GET ------------------------------------------------


@pytest.mark.asyncio
async def test_a_job_the_shared_watch_has_not_seen_yet_is_not_reported_deleted(conn, jobs, controller):
    first = deferred(make_op(sim={"sim.t9k.test/duration": "30s"}, deferrable=True, log_events=False, stream_logs=False))
    waiting = asyncio.create_task(first_event(first, timeout=60))
    await asyncio.sleep(1)  # the shared watch is synced now
    (watch,) = [w for w in shared_watch._WATCHES.values() if w.kind == "GenericJob"]
    second = deferred(make_op(sim={"sim.t9k.test/duration": "2s"}, deferrable=True, log_events=False, stream_logs=False),
                      run_id="manual__2")  # fmt: skip
    for _ in range(50):  # the watch sees it within moments; make it lag as a busy one would
        if watch.get(second.namespace, second.name) is not None:
            break
        await asyncio.sleep(0.1)
    watch.informer.forget({"metadata": {"namespace": second.namespace, "name": second.name}})
    event = await first_event(second, timeout=60)
    assert (event["status"], event["phase"]) == ("success", "Succeeded"), event
    waiting.cancel()


# -- bug 6: a sensor's non-terminal target ends the deferred wait -------------------------------


@pytest.mark.asyncio
async def test_deferred_sensor_ends_when_the_job_reaches_running(conn, jobs, controller):
    ident = make_op(sim={"sim.t9k.test/duration": "60s"}, deferrable=False, wait_for_completion=False).execute(context())
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        sensor = T9kJobSensor(task_id="wait", kind="GenericJob", name=ident["name"], target_phases=("Running",),
                              deferrable=True, timeout=120)  # fmt: skip
    job = jobs.get("GenericJob", ident["name"])
    if (job.get("status") or {}).get("phase") == "Running":
        pytest.fail("the job ran before the sensor deferred; the test needs it still Pending")
    with pytest.raises(TaskDeferred) as exc:
        sensor.execute({})
    trigger = exc.value.trigger
    assert trigger.policy.target_phases == ("Running",)
    assert not trigger.forwarding.stream_logs
    assert trigger.namespace == jobs.ns
    started = time.monotonic()
    event = await first_event(trigger, timeout=30)
    assert (event["status"], event["phase"]) == ("success", "Running")
    assert time.monotonic() - started < 30  # long before the job's 60 s end
    assert sensor.execute_complete({}, event) is None


# -- bug 9: the sensor uses the connection's namespace ------------------------------------------


def test_sensor_without_namespace_uses_the_connections(conn, jobs, controller):
    ident = make_op(sim={"sim.t9k.test/duration": "1s"}, deferrable=False).execute(context())
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        sensor = T9kJobSensor(task_id="wait", kind="GenericJob", name=ident["name"])
    assert sensor.poke({}) is True


# -- startup timeout ----------------------------------------------------------------------------

GPUS = {"limits": {"nvidia.com/gpu": "16"}, "requests": {"nvidia.com/gpu": "16"}}  # kwok nodes advertise 8


@pytest.mark.asyncio
async def test_deferred_job_that_cannot_be_scheduled_fails_after_startup_timeout(conn, jobs, controller):
    op = make_op(container_resources=GPUS, deferrable=True, startup_timeout=5, timeout=300, log_events=False)
    trigger = deferred(op)
    started = time.monotonic()
    event = await first_event(trigger, timeout=60)
    assert event["status"] == "timeout", event
    assert 4 < time.monotonic() - started < 30
    assert "did not start within startup_timeout=5s" in event["message"]
    assert "Insufficient nvidia.com/gpu" in event["message"], event["message"]
    with pytest.raises(AirflowTaskTimeout, match="Insufficient nvidia.com/gpu"):
        op.execute_complete(context(), event)
    assert _gone(jobs, trigger.name)  # on_kill_action="delete" applied


def test_sync_job_that_cannot_be_scheduled_fails_after_startup_timeout(conn, jobs, controller):
    store = Store()
    op = make_op(container_resources=GPUS, deferrable=False, startup_timeout=5, timeout=300, on_kill_action="pause")
    started = time.monotonic()
    with pytest.raises(AirflowTaskTimeout, match="Insufficient nvidia.com/gpu"):
        op.execute({"ti": FakeTI(), "task_state_store": store})
    assert time.monotonic() - started < 60
    jobs.wait_phase("GenericJob", store["t9k_job"]["name"], "Paused")


def _gone(jobs, name) -> bool:
    from tests.support.cluster import wait_until

    def gone() -> bool:
        try:
            jobs.get("GenericJob", name)
            return False
        except client.exceptions.ApiException as exc:
            return exc.status == 404

    return bool(wait_until(gone, what=f"{name} deleted"))


# -- issue 9 item 6: the triggerer resolves credentials itself ----------------------------------


@pytest.mark.asyncio
async def test_a_trigger_with_a_kubeconfig_path_reads_it_on_the_triggerer(cluster, jobs, controller, namespace):
    op = make_op(sim={"sim.t9k.test/duration": "1s"}, namespace=namespace, kubernetes_conn_id=None,
                 config_file=str(cluster.kubeconfig), deferrable=True)  # fmt: skip
    trigger = deferred(op)
    kwargs = trigger.serialize()[1]
    assert kwargs["connection"]["config_file"] == str(cluster.kubeconfig)
    assert "config_dict" not in kwargs
    assert "connection_extras" not in kwargs
    event = await first_event(trigger, timeout=60)
    assert (event["status"], event["phase"]) == ("success", "Succeeded")


@pytest.mark.asyncio
async def test_events_the_triggerer_may_not_list_are_skipped_once_and_the_wait_goes_on(api_client, cluster, namespace, jobs,
                                                                                      controller, tmp_path, capsys):  # fmt: skip
    path = sa_kubeconfig(api_client, cluster, namespace, tmp_path, ["get", "list", "watch", "create", "patch", "delete"])
    op = make_op(sim={"sim.t9k.test/duration": "3s"}, namespace=namespace, kubernetes_conn_id=None, config_file=str(path),
                 deferrable=True, stream_logs=False)  # fmt: skip
    event = await first_event(deferred(op), timeout=60)
    assert (event["status"], event["phase"]) == ("success", "Succeeded")
    skipped = [line for line in capsys.readouterr().out.splitlines() if "not forwarding the job's Events" in line]
    assert len(skipped) == 1, skipped
    assert f"may not list events in namespace {namespace}" in skipped[0], skipped
