"""controller/metrics_auth.py: who may read /metrics when it is served securely. The review
bodies as a table; the guard's decisions and its cache against a recording stand-in for the two
reviews (the real API server's answers: tests/security/test_metrics_auth.py)."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.metrics_auth import ALLOWED_FOR, REFUSED_FOR, MetricsGuard, access_review


@pytest.mark.parametrize(
    ("user", "spec"),
    [({"username": "system:serviceaccount:mon:prometheus", "uid": "u1", "groups": ["system:serviceaccounts"]},
      {"user": "system:serviceaccount:mon:prometheus", "uid": "u1", "groups": ["system:serviceaccounts"]}),
     ({"username": "alice", "extra": {"scopes": ["a"]}}, {"user": "alice", "extra": {"scopes": ["a"]}}),
     ({}, {"user": ""})],
)  # fmt: skip
def test_the_access_review_asks_for_get_on_the_metrics_url(user, spec):
    review = access_review(user)
    assert review["kind"] == "SubjectAccessReview"
    assert review["spec"] == {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}, **spec}


class Reviews:
    """Answers TokenReviews and SubjectAccessReviews from two tables; counts them."""

    def __init__(self, users: dict[str, str], allowed: set[str]) -> None:
        self.users, self.allowed, self.calls = users, allowed, 0

    async def create(self, path: str, body: dict) -> dict:
        self.calls += 1
        if body["kind"] == "TokenReview":
            user = self.users.get(body["spec"]["token"])
            return {"status": {"authenticated": user is not None, "user": {"username": user} if user else {}}}
        return {"status": {"allowed": body["spec"]["user"] in self.allowed}}


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("header", "code"),
    [(None, 401), ("Basic abc", 401), ("Bearer forged", 401), ("Bearer stranger", 403), ("Bearer prometheus", None)],
)
async def test_the_guard_lets_through_only_an_allowed_token_and_remembers(header, code):
    now = [0.0]
    kube = Reviews({"stranger": "bob", "prometheus": "prom"}, {"prom"})
    guard = MetricsGuard(kube, clock=lambda: now[0])  # type: ignore[arg-type]
    first = await guard.check(header)
    assert (first.code if first else None) == code
    asked = kube.calls
    second = await guard.check(header)  # a scrape later: from the cache
    assert (second.code if second else None) == code
    assert kube.calls == asked
    now[0] += max(ALLOWED_FOR, REFUSED_FOR) + 1  # then asked again
    await guard.check(header)
    assert kube.calls == (asked * 2 if header and header.startswith("Bearer") else 0)
