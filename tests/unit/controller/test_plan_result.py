"""The decisive replica's termination message is kept in status, also after clean-up."""

from __future__ import annotations

from tests.builders import generic, pod, pytorch, run

M, W0 = "pt-master-0", "pt-worker-0"


def ended(name: str, message: str, phase: str = "Succeeded", code: int = 0) -> dict:
    p = pod(name, phase, code)
    p["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = message
    return p


def containers(plan, name: str) -> list[dict]:
    return next(e for t in plan.status["tasks"] for e in t["status"] if e["name"] == name)["containers"]


def test_only_the_decisive_replica_carries_its_message():
    p = run(pytorch(), ended(M, '{"metric": 0.93}'), ended(W0, "worker says hi"), pod("pt-worker-1"))
    assert containers(p, M)[0]["message"] == '{"metric": 0.93}'
    assert "message" not in containers(p, W0)[0]
    assert p.status["phase"] == "Succeeded"


def test_the_message_outlives_the_pods_clean_up():
    job = pytorch(runPolicy={"cleanUpPolicy": "All"})
    first = run(job, ended(M, "s3://bucket/model"), pod(W0), pod("pt-worker-1"))
    assert sorted(first.deletes("Pod")) == [M, W0, "pt-worker-1"]
    after = run(job, status=first.status)  # the pods are gone
    assert containers(after, M)[0]["message"] == "s3://bucket/model"


def test_a_long_message_is_bounded():
    p = run(generic("job", ("worker", 1)), ended("job-worker-0", "x" * 10_000))
    assert len(containers(p, "job-worker-0")[0]["message"]) <= 4096


def test_a_failed_decisive_replica_keeps_its_message_too():
    p = run(pytorch(), ended(M, "Traceback: ValueError: bad lr", "Failed", 1), pod(W0), pod("pt-worker-1"))
    assert p.status["phase"] == "Failed"
    assert containers(p, M)[0]["message"] == "Traceback: ValueError: bad lr"
