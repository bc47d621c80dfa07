"""controller/push_server.py: the endpoint's chain of checks, in order, over real HTTP.

The Kubernetes side is a stand-in with the TokenReview contract (answers from a table, calls
counted): what the API server says of real tokens is the integration test's
(tests/integration/test_progress_push.py). Here: what is asked of it, when, and how often.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from airflow_t9k.controller.push_auth import POD_NAME, POD_UID
from airflow_t9k.controller.push_server import ProgressEndpoint
from airflow_t9k.controller.pushed import PushedReports
from airflow_t9k.controller.reconcile.desired import build_pod, slots
from airflow_t9k.k8s.errors import Forbidden
from airflow_t9k.kinds.registry import KINDS
from tests.builders import generic

Obj = dict[str, Any]
AUD = "airflow-t9k-progress"
URL = "/apis/batch.tensorstack.dev/v1beta1/namespaces/ns/genericjobs/{}/progress"
BODY = {
    "trainerStatus": {
        "progressPercentage": 10,
        "metrics": [{"name": "current_step", "value": "3"}, {"name": "loss", "value": "0.5"}],
    }
}


def jwt(pod: str, ns: str = "ns", aud: str = AUD, uid: str | None = None, alg: str = "RS256", sig: str = "sig") -> str:
    enc = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()  # noqa: E731
    payload = {"aud": [aud], "exp": 4_000_000_000,
               "kubernetes.io": {"namespace": ns, "pod": {"name": pod, "uid": uid or f"uid-{pod}"}}}  # fmt: skip
    return f"{enc({'alg': alg})}.{enc(payload)}.{sig}"


class FakeKube:
    """TokenReviews answered from ``identities`` (token -> (namespace, pod)); anything else unauthenticated."""

    def __init__(self) -> None:
        self.identities: dict[str, tuple[str, str]] = {}
        self.reviews = 0
        self.forbidden = False

    async def create(self, path: str, *, body: Obj) -> Obj:
        assert path == "/apis/authentication.k8s.io/v1/tokenreviews"
        assert body["kind"] == "TokenReview"
        self.reviews += 1
        if self.forbidden:
            raise Forbidden(403, "Forbidden", "tokenreviews is forbidden")
        found = self.identities.get(body["spec"]["token"])
        if found is None or body["spec"]["audiences"] != [AUD]:
            return {"status": {"authenticated": False, "error": "invalid bearer token"}}
        ns, pod = found
        return {"status": {"authenticated": True, "audiences": [AUD],
                           "user": {"username": f"system:serviceaccount:{ns}:default",
                                    "extra": {POD_NAME: [pod], POD_UID: [f"uid-{pod}"]}}}}  # fmt: skip


class Host:
    def __init__(self) -> None:
        self.metrics: Counter[str] = Counter()
        self.queued: list[Any] = []
        self.pushed = PushedReports(self.queued.append, interval=10, rate=1.0, burst=3)
        self.jobs: dict[tuple[str, str, str], Obj] = {}
        self.pods: dict[tuple[str, str], Obj] = {}
        self.lead = True

    def add_job(self, name: str, replicas: int = 2, ns: str = "ns") -> None:
        job = generic(name, ("worker", replicas))
        job["metadata"]["namespace"] = ns
        self.jobs[("GenericJob", ns, name)] = job
        for slot in slots(KINDS["GenericJob"], job):
            pod = build_pod(KINDS["GenericJob"], job, slot, 0, False)
            pod["metadata"]["uid"] = f"uid-{slot.pod_name}"
            pod["status"] = {"podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}]}  # where the test client sends from
            self.pods[(ns, slot.pod_name)] = pod

    def leading(self) -> bool:
        return self.lead

    def cached_job(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self.jobs.get((kind, namespace, name))

    def cached_pod(self, namespace: str, name: str) -> Obj | None:
        return self.pods.get((namespace, name))

    def why_not_managed(self, namespace: str) -> str | None:
        return "kube-system is never reconciled" if namespace == "kube-system" else None


@contextlib.asynccontextmanager
async def endpoint(**kw: Any) -> AsyncIterator[tuple[Host, FakeKube, TestClient]]:
    host, kube = Host(), FakeKube()
    host.add_job("job")
    host.add_job("other")
    for pod in ("job-worker-0", "job-worker-1", "other-worker-0"):
        kube.identities[jwt(pod)] = ("ns", pod)
    kube.identities[jwt("job-worker-0", ns="elsewhere")] = ("elsewhere", "job-worker-0")
    ep = ProgressEndpoint(host, kube, kinds=["GenericJob"], **{"review_rate": 5, "review_burst": 5, **kw})  # type: ignore[arg-type]
    async with TestClient(TestServer(ep.app())) as client:
        yield host, kube, client


async def post(
    client: TestClient, job: str = "job", token: str | None = None, body: Any = BODY, **kw: Any
) -> tuple[int, Any, Any]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    resp = await client.request(kw.pop("method", "POST"), kw.pop("path", URL.format(job)), data=data, headers=headers)
    return resp.status, await resp.json(), resp.headers


@pytest.mark.asyncio
async def test_a_replica_pushes_and_its_job_is_queued_with_the_values():
    async with endpoint() as (host, kube, client):
        code, body, _ = await post(client, token=jwt("job-worker-1"))
        assert code == 200, body
        assert body == {"kind": "ProgressReport", "accepted": {"percent": 10, "step": 3, "metrics": {"loss": 0.5}}, "ignored": []}
        report = host.pushed.report(("GenericJob", "ns", "job"), "uid-job")
        assert report["replica"] == "job-worker-1"
        assert report["values"] == {"percent": 10, "step": 3, "metrics": {"loss": 0.5}}
        assert host.queued == [("GenericJob", "ns", "job")]
        # More within the interval: merged, and the job is queued once more only when the interval is up.
        code, _, _ = await post(
            client, token=jwt("job-worker-1"), body={"trainerStatus": {"metrics": [{"name": "acc", "value": "0.7"}]}}
        )
        assert code == 200
        assert host.pushed.report(("GenericJob", "ns", "job"), "uid-job")["values"]["metrics"] == {"loss": 0.5, "acc": 0.7}
        assert host.queued == [("GenericJob", "ns", "job")]
        assert host.pushed.entries[("GenericJob", "ns", "job")].pending is not None
        assert (kube.reviews, host.metrics["progress_push"], host.metrics["token_review"]) == (1, 2, 1)  # the answer was cached


@pytest.mark.asyncio
async def test_what_is_refused_before_asking_the_api_server():
    async with endpoint() as (host, kube, client):
        cases = [
            ({"token": None}, 401, "Authorization: Bearer"),
            ({"token": "not-a-jwt"}, 401, "not a service-account token"),
            ({"token": jwt("job-worker-0", aud="https://kubernetes.default.svc")}, 401, "audience must be"),
            ({"token": jwt("job-worker-0", ns="elsewhere")}, 403, "not in namespace 'ns'"),  # a pod of another namespace
            ({"path": "/apis/batch.tensorstack.dev/v1beta1/namespaces/ns/beamjobs/job/progress",
              "token": jwt("job-worker-0")}, 404, "no job kind"),  # a kind this controller does not reconcile
            ({"path": "/healthz"}, 404, None),
            ({"method": "GET", "token": jwt("job-worker-0")}, 405, "only POST"),
        ]  # fmt: skip
        for kw, code, words in cases:
            got, body, _ = await post(client, **kw)
            assert got == code, (kw, body)
            if words:
                assert body["kind"] == "Status"
                assert body["code"] == code
                assert words in body["message"], body
        assert kube.reviews == 0
        host.lead = False
        got, body, headers = await post(client, token=jwt("job-worker-0"))
        assert (got, headers["Retry-After"], "not the leader" in body["message"]) == (503, "1", True)
        assert kube.reviews == 0


@pytest.mark.asyncio
async def test_what_the_controllers_cache_refuses_before_any_token_review():
    """Issue 45, 2: the claims name the pod; the job, the replica (name and uid) and its address
    are looked up in the cache first, so a forged token of a made-up pod costs no TokenReview."""
    async with endpoint() as (host, kube, client):
        host.pods[("ns", "other-worker-1")]["status"] = {"podIP": "10.244.0.9", "podIPs": [{"ip": "10.244.0.9"}]}
        host.pods[("ns", "job-worker-1")]["status"] = {"phase": "Pending"}  # no address yet
        host.add_job("job", ns="kube-system")
        not_here = "is not a replica of GenericJob ns/{} here: no such job, its namespace is not reconciled here"
        cases = [
            ({"token": jwt("other-worker-0")}, 403, "pod other-worker-0 " + not_here.format("job")),  # another job's pod
            ({"token": jwt("made-up-7", alg="none", sig="")}, 403, "pod made-up-7 " + not_here.format("job")),
            ({"token": jwt("job-worker-0", uid="uid-made-up")}, 403, "pod job-worker-0 " + not_here.format("job")),
            ({"job": "missing", "token": jwt("missing-worker-0")}, 403, not_here.format("missing")),  # no 404: no oracle
            ({"path": "/apis/batch.tensorstack.dev/v1beta1/namespaces/kube-system/genericjobs/job/progress",
              "token": jwt("job-worker-0", ns="kube-system")}, 403, "not reconciled here"),
            ({"job": "other", "token": jwt("other-worker-1")}, 403,
             "the request comes from 127.0.0.1, not from an address of pod other-worker-1"),  # another pod's address
            ({"token": jwt("job-worker-1")}, 503, "has no IP address in the controller's cache yet"),
        ]  # fmt: skip
        for kw, code, words in cases:
            got, body, headers = await post(client, **kw)
            assert (got, body["kind"], body["code"]) == (code, "Status", code), (kw, body)
            assert words in body["message"], body
            assert kw["token"] not in body["message"]
            if code == 503:
                assert headers["Retry-After"] == "1"
        assert (kube.reviews, host.metrics["token_review"]) == (0, 0)
        assert host.pushed.report(("GenericJob", "ns", "job"), "uid-job") is None


@pytest.mark.asyncio
async def test_without_the_source_check_a_replica_pushes_from_anywhere():
    async with endpoint(check_source=False) as (host, kube, client):
        host.pods[("ns", "job-worker-0")]["status"] = {"podIP": "10.244.0.9"}
        assert (await post(client, token=jwt("job-worker-0")))[0] == 200
        assert (await post(client, token=jwt("made-up-7")))[0] == 403  # the rest of the screen stays
        assert kube.reviews == 1


@pytest.mark.asyncio
async def test_who_the_api_server_vouches_for_must_be_a_replica_of_that_job():
    """The screen reads claims anyone can write and only refuses; the TokenReview decides."""
    async with endpoint() as (host, kube, client):
        lying = jwt("job-worker-0", sig="lying")  # claims job-worker-0; the API server says it is other-worker-0's
        kube.identities[lying] = ("ns", "other-worker-0")
        code, body, _ = await post(client, "job", token=lying)
        assert code == 403
        assert "pod other-worker-0 is not a replica of GenericJob ns/job" in body["message"]
        forged = jwt("job-worker-0", sig="forged")  # the same claims, a signature the API server refuses
        for _ in range(3):
            code, body, _ = await post(client, token=forged)
            assert code == 401
            assert "did not accept the token" in body["message"]
        assert kube.reviews == 2  # the refusal is cached too: forged once
        assert host.pushed.report(("GenericJob", "ns", "job"), "uid-job") is None


@pytest.mark.asyncio
async def test_one_namespaces_new_tokens_cannot_take_every_token_review():
    async with endpoint(review_rate=5, review_burst=5, namespace_review_rate=1, namespace_review_burst=3) as (host, kube, client):
        for i in range(5):
            host.add_job(f"j{i}", 1)
            kube.identities[jwt(f"j{i}-worker-0")] = ("ns", f"j{i}-worker-0")
        host.add_job("quiet", 1, ns="quiet")
        kube.identities[jwt("quiet-worker-0", ns="quiet")] = ("quiet", "quiet-worker-0")
        codes = [(await post(client, f"j{i}", token=jwt(f"j{i}-worker-0")))[0] for i in range(5)]
        assert codes == [200] * 3 + [429] * 2  # the namespace's burst; the global one had 2 more
        code, body, headers = await post(client, "j4", token=jwt("j4-worker-0"))
        assert (code, "from namespace ns" in body["message"], int(headers["Retry-After"]) >= 1) == (429, True, True)
        path = "/apis/batch.tensorstack.dev/v1beta1/namespaces/quiet/genericjobs/quiet/progress"
        code, body, _ = await post(client, token=jwt("quiet-worker-0", ns="quiet"), path=path)
        assert code == 200, body  # another namespace still has its budget
        assert kube.reviews == 4


@pytest.mark.asyncio
async def test_a_replaced_pod_is_no_longer_a_replica():
    async with endpoint() as (host, _, client):
        assert (await post(client, token=jwt("job-worker-0")))[0] == 200
        host.pods[("ns", "job-worker-0")]["metadata"]["uid"] = "uid-of-the-new-pod"  # the token's pod is gone
        code, body, _ = await post(client, token=jwt("job-worker-0"))
        assert code == 403
        assert "not the pod the token was issued to" in body["message"]


@pytest.mark.asyncio
async def test_at_most_the_burst_then_rate_per_job_and_other_jobs_are_not_held_back():
    async with endpoint() as (host, _, client):
        codes = [(await post(client, token=jwt("job-worker-0")))[0] for _ in range(3)]
        code, body, headers = await post(client, token=jwt("job-worker-1"))  # the budget is the job's, not the pod's
        assert codes == [200, 200, 200]
        assert code == 429
        assert int(headers["Retry-After"]) >= 1
        assert "per job" in body["message"]
        assert (await post(client, "other", token=jwt("other-worker-0")))[0] == 200
        assert host.metrics["progress_push_429"] == 1


@pytest.mark.asyncio
async def test_new_tokens_are_checked_at_most_review_burst_at_once():
    async with endpoint() as (host, kube, client):
        for i in range(6):  # six pods of six jobs, new tokens all
            host.add_job(f"j{i}", 1)
            kube.identities[jwt(f"j{i}-worker-0")] = ("ns", f"j{i}-worker-0")
        codes = [(await post(client, f"j{i}", token=jwt(f"j{i}-worker-0")))[0] for i in range(6)]
        assert codes == [200] * 5 + [429]
        assert kube.reviews == 5


@pytest.mark.asyncio
async def test_bodies():
    async with endpoint() as (host, _, client):
        token = jwt("job-worker-0")
        host.pushed.burst = host.pushed.rate = 1000  # not what this test is about
        cases = [
            (b"{not json", 400, "not JSON"),
            ([1, 2], 422, "must be a JSON object"),
            ({"trainerStatus": "45%"}, 422, "must be an object or null"),
            (
                {"trainerStatus": {"metrics": [{"name": "note", "value": "warm"}]}},
                422,
                "ignored: trainerStatus.metrics[0] (note)",
            ),
            (b"{" + b'"a": 1,' * 20000 + b'"b": 2}', 413, "at most 65536 bytes"),
        ]
        for body, code, words in cases:
            got, answer, _ = await post(client, token=token, body=body)
            assert (got, words in answer["message"]) == (code, True), answer
        got, answer, _ = await post(client, token=token, body={"trainerStatus": None})
        assert (got, answer["accepted"]) == (200, {})
        got, answer, _ = await post(client, token=token, body={"step": 4, "name": "x"})
        assert (got, answer["accepted"], answer["ignored"]) == (200, {"step": 4}, ["name"])


@pytest.mark.asyncio
async def test_without_rbac_for_tokenreviews_every_push_is_refused_with_the_reason():
    async with endpoint() as (_, kube, client):
        kube.forbidden = True
        code, body, headers = await post(client, token=jwt("job-worker-0"))
        assert code == 503
        assert "create tokenreviews" in body["message"]
        assert headers["Retry-After"] == "30"


@pytest.mark.asyncio
async def test_a_namespace_not_managed_is_refused():
    async with endpoint() as (host, kube, client):
        host.jobs[("GenericJob", "kube-system", "job")] = {
            **generic("job"),
            "metadata": {**generic("job")["metadata"], "namespace": "kube-system"},
        }
        kube.identities[jwt("job-worker-0", ns="kube-system")] = ("kube-system", "job-worker-0")
        path = "/apis/batch.tensorstack.dev/v1beta1/namespaces/kube-system/genericjobs/job/progress"
        code, body, _ = await post(client, token=jwt("job-worker-0", ns="kube-system"), path=path)
        assert code == 403
        assert "not reconciled here" in body["message"]


@pytest.mark.asyncio
async def test_over_tls_the_helpers_body_is_taken_and_a_client_without_the_ca_is_not(tmp_path):
    import ssl

    from airflow_t9k.controller.push_server import serve_push
    from airflow_t9k.controller.tls import self_signed
    from airflow_t9k.progress import _Reporter
    from tests.support.controller import free_port

    host, kube = Host(), FakeKube()
    host.add_job("job")
    kube.identities[jwt("job-worker-0")] = ("ns", "job-worker-0")
    tls = self_signed(["127.0.0.1"])
    port = free_port()
    runner = await serve_push(ProgressEndpoint(host, kube, kinds=["GenericJob"]), "127.0.0.1", port, tls.context)  # type: ignore[arg-type]
    try:
        body = _Reporter.body(None, {"step": 7, "total_steps": 70, "loss": 0.5})  # type: ignore[arg-type]
        headers = {"Authorization": f"Bearer {jwt('job-worker-0')}", "Content-Type": "application/json"}
        url = f"https://127.0.0.1:{port}{URL.format('job')}"
        async with aiohttp.ClientSession() as session:
            async with session.post(url, data=body, headers=headers, ssl=ssl.create_default_context(cadata=tls.ca_pem)) as resp:
                answer = await resp.json()
            assert resp.status == 200, answer
            assert answer["accepted"] == {"percent": 10, "step": 7, "total_steps": 70, "metrics": {"loss": 0.5}}
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await session.post(url, data=body, headers=headers, ssl=ssl.create_default_context())
    finally:
        await runner.cleanup()
