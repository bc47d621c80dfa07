"""controller/push_auth.py: who may push progress for a job, and how often (tables)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from airflow_t9k.controller.push_auth import (
    POD_NAME,
    POD_UID,
    Bucket,
    Identity,
    NamespaceBuckets,
    Refused,
    TokenCache,
    address,
    bearer,
    claims,
    identity_of,
    membership,
    pod_addresses,
    precheck,
    screen,
)
from airflow_t9k.controller.reconcile.desired import build_pod, slots
from airflow_t9k.kinds.registry import KINDS
from tests.builders import generic, pytorch

Obj = dict[str, Any]
AUD = "airflow-t9k-progress"
NOW = 1_800_000_000


def jwt(payload: Any, header: Obj | None = None) -> str:
    enc = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{enc(header or {'alg': 'RS256'})}.{enc(payload)}.c2lnbmF0dXJl"


def token_claims(ns: str = "ns", aud: Any = (AUD,), exp: Any = NOW + 3600, pod: Any = None) -> Obj:
    return {"aud": list(aud) if isinstance(aud, tuple) else aud, "exp": exp, "iss": "https://kubernetes.default.svc",
            "kubernetes.io": {"namespace": ns, "pod": {"name": "job-worker-0", "uid": "p-uid"} if pod is None else pod,
                              "serviceaccount": {"name": "default", "uid": "sa-uid"}},
            "sub": f"system:serviceaccount:{ns}:default"}  # fmt: skip


# -- the token bucket ----------------------------------------------------------------------


def test_bucket_lets_a_burst_through_then_the_rate():
    b = Bucket(rate=1.0, burst=3, now=0)
    assert [b.take(0) for _ in range(4)] == [0, 0, 0, 1.0]  # the fourth waits a second
    assert b.take(0.5) == pytest.approx(0.5)
    assert b.take(1.0) == 0  # a second on: one more
    assert b.take(1.0) == pytest.approx(1.0)
    assert [b.take(100) for _ in range(4)] == [0, 0, 0, 1.0]  # idle time refills at most the burst


def test_namespace_buckets_are_one_per_namespace_and_bounded():
    b = NamespaceBuckets(rate=1.0, burst=2, size=2)
    assert [b.take("flood", 0) for _ in range(4)] == [0, 0, 1.0, 1.0]  # the flood spends its own
    assert [b.take("quiet", 0) for _ in range(2)] == [0, 0]  # another namespace still has its burst
    assert b.take("flood", 1.0) == 0  # the rate refills
    assert b.take("third", 1.0) == 0  # a third namespace: the least recently used (quiet) is forgotten
    assert len(b) == 2
    assert b.take("flood", 1.0) == pytest.approx(1.0)  # flood was remembered, still drained
    assert [b.take("quiet", 1.0) for _ in range(3)] == [0, 0, 1.0]  # quiet starts again full


def test_bucket_over_a_minute_allows_burst_plus_rate_times_seconds():
    b = Bucket(rate=2.0, burst=10, now=0)
    taken = sum(1 for i in range(6000) if b.take(i / 100) == 0)  # asked 100 times a second for 60 s
    assert taken == 10 + 2 * 60 - 1  # the last refill lands at 59.99 s


# -- the header and the first look at the token ----------------------------------------------


@pytest.mark.parametrize(
    ("header", "token"),
    [("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER  abc ", "abc"), ("Basic abc", None), ("Bearer", None),
     ("Bearer a b", None), ("", None), (None, None), ("Bearer " + "x" * 20000, None)],
)  # fmt: skip
def test_bearer(header, token):
    if token is None:
        with pytest.raises(Refused) as err:
            bearer(header)
        assert err.value.code == 401
    else:
        assert bearer(header) == token


@pytest.mark.parametrize(
    ("token", "code", "words"),
    [
        (jwt(token_claims()), None, ""),
        (jwt(token_claims(aud=AUD)), None, ""),  # aud as one string
        ("not-a-jwt", 401, "not a service-account token"),
        ("a.b.c", 401, "not a service-account token"),
        (jwt([1, 2]), 401, "not a service-account token"),
        (jwt(token_claims(aud=("https://kubernetes.default.svc",))), 401, "audience must be"),
        (jwt(token_claims(aud=None)), 401, "audience must be"),
        (jwt(token_claims(exp=NOW - 1)), 401, "expired"),
        (jwt({**token_claims(), "kubernetes.io": {"namespace": "ns"}}), 401, "not bound to a pod"),
        (jwt(token_claims(pod="job-worker-0")), 401, "not bound to a pod"),
        (jwt(token_claims(ns="other")), 403, "not in namespace 'ns'"),
        (jwt(token_claims(pod={"name": "job-worker-0"})), 401, "not bound to a pod"),  # no uid
        (jwt(token_claims(pod={"name": "", "uid": "p-uid"})), 401, "not bound to a pod"),
        (jwt(token_claims(pod={"name": 7, "uid": "p-uid"})), 401, "not bound to a pod"),
    ],
)
def test_precheck(token, code, words):
    if code is None:  # the pod it claims (unverified), to look up in the cache
        assert precheck(token, AUD, "ns", NOW) == Identity("ns", "default", "job-worker-0", "p-uid")
        return
    with pytest.raises(Refused) as err:
        precheck(token, AUD, "ns", NOW)
    assert err.value.code == code
    assert words in err.value.message
    assert token not in err.value.message


def test_claims_of_a_token_with_padding_cut_off():
    assert claims(jwt({"a": "x" * 7}))["a"] == "x" * 7


# -- the TokenReview's answer -------------------------------------------------------------------


def review(authenticated: bool = True, audiences: Any = (AUD,), username: str = "system:serviceaccount:ns:default",
           pods: Any = ("job-worker-0",), uids: Any = ("p-uid",), error: str | None = None) -> Obj:  # fmt: skip
    extra = {} if pods is None else {POD_NAME: list(pods), POD_UID: list(uids)}
    status: Obj = {"authenticated": authenticated, "audiences": list(audiences),
                   "user": {"username": username, "uid": "sa-uid", "groups": [], "extra": extra}}  # fmt: skip
    if error:
        status["error"] = error
    return {"kind": "TokenReview", "status": status}


@pytest.mark.parametrize(
    ("answer", "result"),
    [
        (review(), Identity("ns", "default", "job-worker-0", "p-uid")),
        (review(authenticated=False, error="token has been invalidated"),
         (401, "did not accept the token: token has been invalidated")),
        (review(audiences=("other",)), (401, "not valid for audience")),
        (review(audiences=()), (401, "not valid for audience")),
        (review(username="alice"), (403, "not a service-account token bound to a pod")),
        (review(pods=None), (403, "not a service-account token bound to a pod")),  # a token of no pod
        (review(pods=("a", "b"), uids=("1", "2")), (403, "bound to a pod")),
        ({}, (401, "did not accept")),
    ],
)  # fmt: skip
def test_identity_of_a_token_review(answer, result):
    if isinstance(result, Identity):
        assert identity_of(answer, AUD) == result
        return
    with pytest.raises(Refused) as err:
        identity_of(answer, AUD)
    assert (err.value.code, result[1] in err.value.message) == (result[0], True)


# -- membership: the token's pod must be one of the job's replicas -----------------------------------


def replica(job: Obj, index: int = 0, **meta: Any) -> Obj:
    kind = KINDS[job["kind"]]
    slot = slots(kind, job)[index]
    p = build_pod(kind, job, slot, 0, False)
    p["metadata"].update({"uid": f"uid-{slot.pod_name}", **meta})
    return p


JOB = generic("job", ("worker", 2))
OTHER = generic("other", ("worker", 2))
PT = pytorch("pt", ("master", 1), ("worker", 2))


def who(p: Obj, ns: str = "ns") -> Identity:
    return Identity(ns, "default", p["metadata"]["name"], p["metadata"]["uid"])


def stranger() -> Obj:
    """A pod of the job's name that the job does not control (someone copied its labels)."""
    p = replica(JOB, 1)
    p["metadata"]["ownerReferences"][0]["uid"] = "uid-someone-else"
    return p


def renamed() -> Obj:
    """Controlled by the job, but not under a name the controller gives a replica."""
    p = replica(JOB, 0)
    p["metadata"]["name"] = "job-debugger"
    return p


@pytest.mark.parametrize(
    ("job", "pod", "identity", "refusal"),
    [
        (JOB, replica(JOB, 0), None, None),
        (JOB, replica(JOB, 1), None, None),  # any replica, not only the one whose log is followed
        (PT, replica(PT, 2), None, None),
        (JOB, replica(OTHER, 0), None, "is not a replica of GenericJob ns/job"),  # a pod of another job
        (JOB, None, Identity("ns", "default", "job-worker-0", "uid-job-worker-0"), "is not a replica"),  # not cached
        (JOB, replica(JOB, 0), Identity("other", "default", "job-worker-0", "uid-job-worker-0"), "in namespace 'other'"),
        (JOB, replica(JOB, 0, uid="uid-new"), Identity("ns", "default", "job-worker-0", "uid-job-worker-0"),
         "not the pod the token was issued to"),  # a replaced pod of the same name
        (JOB, replica(JOB, 0, namespace="elsewhere"), None, "not the pod the token was issued to"),
        (JOB, stranger(), None, "is not a replica"),
        (JOB, renamed(), None, "not a name the controller gives"),
    ],
)  # fmt: skip
def test_membership(job, pod, identity, refusal):
    identity = identity or who(pod)
    found = membership(KINDS[job["kind"]], job, pod, identity)
    if refusal is None:
        assert found is None
    else:
        assert found is not None
        assert refusal in found


# -- the cache of answers ---------------------------------------------------------------------


def test_token_cache_keeps_answers_until_their_deadline_and_at_most_its_size():
    cache = TokenCache(size=3)
    ident = Identity("ns", "sa", "p", "u")
    keys = [TokenCache.key(f"token-{i}") for i in range(4)]
    assert all(len(k) == 64 and "token" not in k for k in keys)  # digests, never the token
    for i, k in enumerate(keys[:3]):
        cache.put(k, ident, until=10 + i)
    assert cache.get(keys[0], now=5) == ident
    cache.put(keys[3], Refused(401, "Unauthorized", "no"), until=20)  # the oldest (keys[1]; keys[0] was read) goes
    assert len(cache) == 3
    assert cache.get(keys[1], now=5) is None
    assert cache.get(keys[0], now=10) is None  # past its deadline
    assert isinstance(cache.get(keys[3], now=19), Refused)


# -- the screen: the cache before any TokenReview (issue 45, 2) --------------------------------------


@pytest.mark.parametrize(
    ("text", "ip"),
    [("10.0.0.7", "10.0.0.7"), ("::ffff:10.0.0.7", "10.0.0.7"), ("::FFFF:a00:7", "10.0.0.7"), ("fd00::0001", "fd00::1"),
     (" fd00:0:0::1 ", "fd00::1"), ("fe80::1%eth0", "fe80::1"), ("10.0.0.256", None), ("", None), (None, None),
     (7, None), ("pod-a", None)],
)  # fmt: skip
def test_address(text, ip):
    assert (str(address(text)) if address(text) is not None else None) == ip


def running(ips: Any = ("10.0.0.7",), index: int = 0) -> Obj:
    p = replica(JOB, index)
    if ips is not None:
        p["status"] = {"phase": "Running", "podIP": ips[0] if ips else "", "podIPs": [{"ip": ip} for ip in ips]}
    return p


def test_pod_addresses():
    assert pod_addresses(running(("10.0.0.7", "fd00::7"))) == {address("10.0.0.7"), address("fd00::7")}
    assert pod_addresses({"status": {"podIP": "10.0.0.8"}}) == {address("10.0.0.8")}  # before podIPs existed
    assert pod_addresses(running(None)) == pod_addresses(running(())) == set()
    assert pod_addresses({"status": {"podIP": 3, "podIPs": ["10.0.0.1", {"ip": None}]}}) == set()
    assert pod_addresses({"status": "x"}) == set()


def claimed_by(p: Obj, **kw: Any) -> Identity:
    return Identity("ns", "default", kw.get("name", p["metadata"]["name"]), kw.get("uid", p["metadata"]["uid"]))


NOT_HERE = "is not a replica of GenericJob ns/job here"
POD = running()
DUAL = running(("10.0.0.7", "fd00::7"))


@pytest.mark.parametrize(
    ("job", "unmanaged", "pod", "claimed", "remote", "check", "refusal"),
    [
        (JOB, None, POD, claimed_by(POD), "10.0.0.7", True, None),
        (JOB, None, POD, claimed_by(POD), "::ffff:10.0.0.7", True, None),  # a dual-stack listener's IPv4 peer
        (JOB, None, DUAL, claimed_by(DUAL), "fd00:0::7", True, None),  # its IPv6 address, spelled otherwise
        (JOB, None, DUAL, claimed_by(DUAL), "10.0.0.7", True, None),
        (JOB, None, running(index=1), claimed_by(running(index=1)), "10.0.0.7", True, None),  # any replica
        (JOB, None, POD, claimed_by(POD), "10.0.0.8", False, None),  # the check off: from anywhere
        (None, None, POD, claimed_by(POD), "10.0.0.7", True, (403, NOT_HERE)),  # no such job
        (JOB, "not selected", POD, claimed_by(POD), "10.0.0.7", True, (403, NOT_HERE)),  # not reconciled here
        (JOB, None, None, claimed_by(POD, name="job-worker-9"), "10.0.0.7", True, (403, NOT_HERE)),  # a made-up pod
        (JOB, None, POD, claimed_by(POD, uid="made-up"), "10.0.0.7", True, (403, NOT_HERE)),  # a made-up uid
        (JOB, None, running(index=0) | {"metadata": replica(OTHER, 0)["metadata"]}, claimed_by(replica(OTHER, 0)),
         "10.0.0.7", False, (403, NOT_HERE)),  # a pod of another job, the check off or not
        (JOB, None, POD, claimed_by(POD), "10.0.0.8", True, (403, "comes from 10.0.0.8, not from an address of pod")),
        (JOB, None, POD, claimed_by(POD), "127.0.0.1", True, (403, "comes from 127.0.0.1")),
        (JOB, None, POD, claimed_by(POD), "fd00::7", True, (403, "comes from fd00::7")),
        (JOB, None, POD, claimed_by(POD), None, True, (403, "comes from an unknown address")),
        (JOB, None, POD, claimed_by(POD), "not-an-ip", True, (403, "comes from not-an-ip")),
        (JOB, None, running(None), claimed_by(POD), "10.0.0.7", True, (503, "no IP address in the controller's cache yet")),
        (JOB, None, running(()), claimed_by(POD), "10.0.0.7", True, (503, "no IP address")),
        (JOB, None, running(None), claimed_by(POD), "10.0.0.7", False, None),  # no address, nothing to compare
    ],
)  # fmt: skip
def test_screen(job, unmanaged, pod, claimed, remote, check, refusal):
    kind = KINDS["GenericJob"]
    if refusal is None:
        screen(kind, "job", job, unmanaged, pod, claimed, remote, check)
        return
    with pytest.raises(Refused) as err:
        screen(kind, "job", job, unmanaged, pod, claimed, remote, check)
    assert (err.value.code, refusal[1] in err.value.message) == (refusal[0], True), err.value.message
    assert err.value.reason == {403: "Forbidden", 503: "ServiceUnavailable"}[refusal[0]]
    if refusal[0] == 503:
        assert err.value.retry_after == 1
