"""hooks/doctor.py: the rights it asks about, and how it reports (against the real API server:
tests/integration/test_doctor.py)."""

from __future__ import annotations

from airflow_t9k.hooks.doctor import Check, needed, report, review


def test_it_asks_for_every_right_the_tasks_and_the_triggerer_use():
    names = [r.named() for r in needed(["GenericJob", "PyTorchTrainingJob"])]
    for verb in ("create", "get", "list", "watch", "patch", "delete"):
        assert f"{verb} genericjobs.batch.tensorstack.dev" in names
        assert f"{verb} pytorchtrainingjobs.batch.tensorstack.dev" in names
    assert {"list events", "watch events", "get pods", "list pods", "get pods/log", "get configmaps"} <= set(names)
    (log,) = [r for r in needed(["GenericJob"]) if r.subresource]
    assert review("ml", log)["spec"]["resourceAttributes"] == {"namespace": "ml", "verb": "get", "group": "",
                                                               "resource": "pods", "subresource": "log"}  # fmt: skip


def test_the_report_says_what_to_fix():
    text = report([Check("the cluster", True, "reaches Kubernetes v1.36.3"), Check("create genericjobs", False, "MISSING")])
    assert text.splitlines()[1].startswith("NO  create genericjobs")
    assert text.splitlines()[-1] == "1 of 2 checks passed: fix the NO lines"
