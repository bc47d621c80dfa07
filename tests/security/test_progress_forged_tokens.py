"""Forged tokens must not spend everyone's TokenReview budget (issue 45, 2; docs/progress.md,
"The push path"), against the real API server and a real controller with the push path on.

Anyone who reaches the endpoint can write a JWT: unsigned (``alg: none``), for the right
audience, naming any namespace and a made-up pod. Such a token used to reach a TokenReview:
400 of them took the whole budget of new tokens (100 a second over all namespaces, 200 at once)
and every replica's new token got 429, cluster-wide, while the API server took 100
TokenReviews a second under the controller's identity.

Now the controller's cache answers first (the job, the replica by name and uid, the request's
source address), and each namespace has a TokenReview budget of its own. The attacker floods:
made-up pods in its own namespace and in the victim's, naming the victim's job; its own real
pod's name and uid from another address; and its own real pod's name and uid from that pod's
address (these pass the cache, so they reach TokenReviews: at most the attacker's namespace's
budget). Meanwhile the victim's replica pushes with a fresh token and is taken.

The test's POSTs come from this machine: kwok gives a hostNetwork pod the node's address,
127.0.0.1 on the local cluster (tests/support/push.py, FROM_HERE), so those pods are "here" and
the source check stays on, as by default."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
import uuid
from collections import Counter
from typing import Any

import aiohttp
import pytest
from kubernetes import client

from tests.support.cluster import wait_until
from tests.support.jobs import Jobs
from tests.support.push import AUDIENCE, CA_ANNOTATION, FROM_HERE, env_of, post, push_flags, token

GJ = "GenericJob"
MADE_UP = 400  # forged tokens of made-up pods
OWN_POD = 150  # forged tokens naming the attacker's own running replica, from its address
ELSEWHERE = 20  # ... naming its replica that is not here (its address is another)
NAMESPACE_BURST, NAMESPACE_RATE = 50, 25  # push_server.ProgressEndpoint's defaults
# Connections the flood keeps open. Here attacker and victim share one address, 127.0.0.1, and the
# endpoint bounds the connections from one address (32): the victim's must find room.
AT_ONCE = 16


def forged(namespace: str, pod: str, uid: str) -> str:
    """An unsigned JWT with the claims of a projected token: right audience, a day to live."""
    enc = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()  # noqa: E731
    claims = {"aud": [AUDIENCE], "exp": int(time.time()) + 86400, "iat": int(time.time()), "nbf": int(time.time()),
              "iss": "https://kubernetes.default.svc.cluster.local", "sub": f"system:serviceaccount:{namespace}:default",
              "kubernetes.io": {"namespace": namespace, "pod": {"name": pod, "uid": uid},
                                "serviceaccount": {"name": "default", "uid": str(uuid.uuid4())}}}  # fmt: skip
    return f"{enc({'alg': 'none', 'typ': 'JWT'})}.{enc(claims)}."


def job(name: str, here: bool) -> dict:
    spec = {**(FROM_HERE if here else {}), "containers": [{"name": "main", "image": "busybox"}]}
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": GJ, "metadata": {"name": name},
            "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"spec": spec}}]}}  # fmt: skip


def running(jobs: Jobs, name: str) -> client.V1Pod:
    jobs.wait_phase(GJ, name, "Running", timeout=40)
    return jobs.live_pods(name)[f"{name}-worker-0"]


async def flood(requests: list[tuple[str, str, str]], ca: str, victim: Any) -> tuple[Counter[tuple[str, int]], Any, float]:
    """Send every (what, url, token) of ``requests`` on ``AT_ONCE`` connections; the victim's push once 300 are answered
    (the budget a TokenReview per forged token would have spent by then). The answers by
    (what, status), the victim's answer, and when it came (seconds into the flood)."""
    context = ssl.create_default_context(cadata=ca)
    answers: Counter[tuple[str, int]] = Counter()
    answered = asyncio.Event()
    queue: asyncio.Queue[tuple[str, str, str]] = asyncio.Queue()
    for item in requests:
        queue.put_nowait(item)
    began = time.monotonic()
    body = json.dumps({"step": 1, "loss": 9.9})

    async def worker(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            what, url, tok = queue.get_nowait()
            async with session.post(url, data=body, headers={"Authorization": f"Bearer {tok}",
                                                             "Content-Type": "application/json"}) as resp:  # fmt: skip
                await resp.read()
                answers[(what, resp.status)] += 1
            if sum(answers.values()) >= 300:
                answered.set()

    async def legit() -> tuple[tuple[int, Any], float]:
        await answered.wait()
        answer = await asyncio.to_thread(victim)  # a fresh real token, minted now, sent beside the flood
        return answer, time.monotonic() - began

    connector = aiohttp.TCPConnector(limit=AT_ONCE, ssl=context)
    async with aiohttp.ClientSession(connector=connector) as session:
        *_, (answer, at) = await asyncio.gather(*(worker(session) for _ in range(AT_ONCE)), legit())
    return answers, answer, at


def test_forged_tokens_cost_no_token_review_and_another_namespace_still_pushes(cluster, core, api_client, jobs, namespace,
                                                                               controller_factory):  # fmt: skip
    if cluster.external:
        pytest.skip("the pods' addresses are the local cluster's kwok's (FROM_HERE)")
    victim_ns = f"t9k-test-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=victim_ns, labels={"airflow-t9k/test": "true"})))
    try:
        wait_until(lambda: core.list_namespaced_service_account(victim_ns).items, timeout=30, what="default SA")
        victims = Jobs(api_client, victim_ns)
        _, flags = push_flags()  # the source check on, as by default
        controller = controller_factory("-n", victim_ns, "--progress-interval", "1", *flags)
        victims.create(job("train", here=True))
        jobs.create(job("mine", here=True))  # the attacker's own replicas: one here, one not
        jobs.create(job("box", here=False))
        replica, mine, box = running(victims, "train"), running(jobs, "mine"), running(jobs, "box")
        assert replica.status.pod_ip == mine.status.pod_ip == "127.0.0.1", (replica.status.pod_ip, mine.status.pod_ip)
        assert box.status.pod_ip not in (None, "", "127.0.0.1"), box.status.pod_ip
        url, ca = env_of(replica)["T9K_PROGRESS_URL"], replica.metadata.annotations[CA_ANNOTATION]
        own_url = env_of(mine)["T9K_PROGRESS_URL"]
        box_url = env_of(box)["T9K_PROGRESS_URL"]
        before = controller.metrics()

        requests: list[tuple[str, str, str]] = []
        for i in range(MADE_UP):  # made-up pods: half in the attacker's namespace, half naming the victim's job
            ns, target = (namespace, own_url) if i % 2 else (victim_ns, url)
            requests.append(("made-up", target, forged(ns, f"train-worker-{i}", str(uuid.uuid4()))))
        requests += [("not here", box_url, forged(namespace, box.metadata.name, box.metadata.uid)) for _ in range(ELSEWHERE)]
        requests += [("own pod", own_url, forged(namespace, mine.metadata.name, mine.metadata.uid)) for _ in range(OWN_POD)]

        def victim() -> tuple[int, Any]:
            return post(url, token(core, victim_ns, replica), {"step": 42, "loss": 0.5}, ca)

        t0 = time.monotonic()
        answers, (code, answer), at = asyncio.run(flood(requests, ca, victim))
        took = time.monotonic() - t0
        after = controller.metrics()
        reviews = after.get("token_review", 0) - before.get("token_review", 0)
        print(f"\nflood: {len(requests)} forged tokens in {took:.1f} s ({len(requests) / took:.0f}/s); answers "
              f"{dict(sorted(answers.items()))}; TokenReviews {reviews:g}; the victim's push at {at:.1f} s: {code}")  # fmt: skip

        assert code == 200, answer  # another namespace's replica, a new token: taken, not 429
        assert answer["accepted"] == {"step": 42, "metrics": {"loss": 0.5}}
        assert answers[("made-up", 403)] == MADE_UP, answers  # refused from the cache, before any TokenReview
        assert answers[("not here", 403)] == ELSEWHERE, answers  # the right pod and uid, from another address
        own = answers[("own pod", 401)] + answers[("own pod", 429)]
        assert own == OWN_POD, answers  # the TokenReview refuses the unsigned token, or the namespace's budget is spent
        # TokenReviews: the victim's one, and the attacker's own pod's within its namespace's budget only.
        assert reviews <= 1 + NAMESPACE_BURST + NAMESPACE_RATE * took, reviews
        assert answers[("own pod", 401)] == reviews - 1, (answers, reviews)
        assert answers[("own pod", 429)] >= OWN_POD - NAMESPACE_BURST - NAMESPACE_RATE * took, answers
        wait_until(lambda: ((victims.get(GJ, "train").get("status") or {}).get("progress") or {}).get("step") == 42,
                   timeout=20, what="the victim's values in its status")  # fmt: skip
        assert (jobs.get(GJ, "mine").get("status") or {}).get("progress") is None  # nothing forged was taken
    finally:
        core.delete_namespace(victim_ns, propagation_policy="Background")
