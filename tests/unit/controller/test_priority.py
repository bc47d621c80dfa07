"""Priority without Kueue (issue 47, item 3): t9kScheduler.priority as a PriorityClass, by table.

The map (``--priority-class-map``), which class a priority gets, the pods that get it (a template's
own wins), what ``status.scheduling`` says, the Warning when the platform's class is missing, and
a preempted replica replaced without spending its budget."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from airflow_t9k.controller.reconcile import Create, Observed, plan
from airflow_t9k.controller.reconcile.priority import Choice, PriorityBand, apply, choose, describe, parse_map, warning
from airflow_t9k.controller.reconcile.steps import modes
from tests.builders import NOW, colossal, evidence, generic, pod, restart
from tests.unit.controller.steps.state import state

Obj = dict[str, Any]

T9K = {"t9kScheduler": {"queue": "gpu", "priority": 70}}
BANDS = parse_map("0-49=batch-low,50-89=batch-normal,90-100=batch-high")


def pclass(name: str, value: int) -> Obj:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


CLASSES = {c["metadata"]["name"]: c for c in (pclass("batch-low", 100), pclass("batch-normal", 500), pclass("batch-high", 1000))}


def observed(*objects: Obj, bands: tuple[PriorityBand, ...] = BANDS, classes: dict | None = None, **kw: Any) -> Observed:
    return replace(Observed.of(*objects, **kw), priority_map=bands, pod_priority_classes=CLASSES if classes is None else classes)


@pytest.mark.parametrize(
    ("text", "bands"),
    [
        ("0-49=low,50-100=high", [(0, 49, "low"), (50, 100, "high")]),
        ("50-100=high, 0-49=low", [(0, 49, "low"), (50, 100, "high")]),  # sorted, spaces allowed
        ("7=seven", [(7, 7, "seven")]),
        ("0-100=airflow-t9k-priority-{priority}", [(0, 100, "airflow-t9k-priority-{priority}")]),
        ("", []),
        (["0-9=a", "10-19=b"], [(0, 9, "a"), (10, 19, "b")]),  # the flag given twice
    ],
)
def test_the_map_parses(text, bands):
    assert [(b.low, b.high, b.name) for b in parse_map(text)] == bands


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("0-49", "is not LOW-HIGH=NAME"),
        ("low=x", "is not LOW-HIGH=NAME"),
        ("-5=x", "is not LOW-HIGH=NAME"),  # priorities are never negative (the CRD's minimum is 0)
        ("9-3=x", "3 is below 9"),
        ("0-49=Batch_Low", "is not a PriorityClass name"),
        ("0-50=a,50-60=b", "overlap"),
        ("0-10=system-cluster-critical", "the cluster's own components"),
    ],
)
def test_a_bad_map_is_refused_naming_the_entry(text, error):
    with pytest.raises(ValueError, match=error):
        parse_map(text)


@pytest.mark.parametrize(
    ("scheduler", "bands", "classes", "name", "why"),
    [
        (T9K, BANDS, None, "batch-normal", None),
        ({"t9kScheduler": {"priority": 95}}, BANDS, None, "batch-high", None),
        ({"t9kScheduler": {}}, BANDS, None, "batch-normal", None),  # seed 001's default priority, 50
        ({"t9kScheduler": {"priority": 120}}, BANDS, None, None, "names no PriorityClass for it"),
        (T9K, BANDS, {}, None, "PriorityClass batch-normal (--priority-class-map 50-89=batch-normal) does not exist"),
        (T9K, (), None, None, "without --priority-class-map"),
        (T9K, parse_map("0-100=p-{priority}"), {"p-70": pclass("p-70", 70)}, "p-70", None),  # one class a value
    ],
    ids=["band", "high", "default-50", "uncovered", "class-missing", "no-map", "one-a-value"],
)  # fmt: skip
def test_which_class_a_priority_gets(scheduler, bands, classes, name, why):
    choice = choose(generic(scheduler=scheduler), observed(bands=bands, classes=classes))
    assert choice is not None
    assert choice.name == name
    assert (choice.why_not or None) == why if why is None else why in choice.why_not
    if name:
        assert choice.value == (classes or CLASSES)[name]["value"]


def test_a_job_without_t9k_scheduler_gets_no_class():
    assert choose(generic(), observed()) is None


def test_a_template_that_names_its_own_priority_keeps_it():
    rendered = {"a": {"spec": {}}, "b": {"spec": {"priorityClassName": "mine"}}, "c": {"spec": {"priority": 7}}}
    apply(Choice(70, "batch-normal", 500), rendered)
    assert [r["spec"].get("priorityClassName") for r in rendered.values()] == ["batch-normal", "mine", None]
    untouched = copy.deepcopy(rendered)
    apply(Choice(70, why_not="x"), rendered)
    apply(None, rendered)
    assert rendered == untouched


def _created_pods(p) -> dict[str, Obj]:
    return {a.name: a.manifest for a in p.actions if isinstance(a, Create) and a.kind == "Pod"}


def test_every_pod_of_the_job_gets_the_class_the_plan_creates():
    job = generic("job", ("worker", 2), ("ps", 1), scheduler=T9K)
    job["spec"]["replicaSpecs"][1]["template"]["spec"]["priorityClassName"] = "ps-own"
    p = plan(job, observed(evidence(job)), NOW)
    pods = _created_pods(p)
    assert {n: m["spec"].get("priorityClassName") for n, m in pods.items()} == {
        "job-worker-0": "batch-normal", "job-worker-1": "batch-normal", "job-ps-0": "ps-own"}  # fmt: skip
    # The annotation stays: seed 001's record of the priority, whatever enforces it.
    assert {m["metadata"]["annotations"]["scheduler.tensorstack.dev/priority"] for m in pods.values()} == {"70"}
    said = p.status["scheduling"]
    assert said["priorityClassName"] == "batch-normal"
    assert said["priority"].startswith("70: PriorityClass batch-normal (value 500) on the pods"), said
    assert "ps (ps-own) keep their pod template's own" in said["priority"]


def test_a_colossalai_launcher_gets_the_class_too():
    # Seed 003 puts only the workers in the queue, but a preempted launcher would end the job.
    job = colossal(scheduler={"t9kScheduler": {"priority": 95}})
    pods = _created_pods(plan(job, observed(evidence(job)), NOW))
    assert pods
    assert {m["spec"].get("priorityClassName") for m in pods.values()} == {"batch-high"}


@pytest.mark.parametrize(
    ("obs", "starts", "event"),
    [
        (observed(), "70: PriorityClass batch-normal (value 500) on the pods", False),
        (observed(classes={}), "70: ignored, only the pod annotation", True),
        (observed(bands=()), "70: ignored, only the pod annotation", False),  # no map: as before, no warning
        (observed(queueing="kueue"), ("70: enforced by Kueue (the Workload's priority orders the queue and "
                                      "preempts); PriorityClass batch-normal"), False),
        (observed(classes={}, queueing="kueue"), "70: enforced by Kueue", True),
    ],
    ids=["class", "class-missing", "no-map", "kueue-and-class", "kueue-class-missing"],
)  # fmt: skip
def test_status_says_what_the_priority_does(obs, starts, event):
    p = state(generic(scheduler=T9K), observed=obs)
    p = modes.scheduler(p)
    said = p.sb.new["scheduling"]
    assert said["priority"].startswith(starts), said
    assert ("priorityClassName" in said) == ("batch-normal (value 500) on the pods" in said["priority"])
    reasons = [e.reason for e in p.events]
    assert ("PriorityNotEnforced" in reasons) is event
    again = modes.scheduler(state(generic(scheduler=T9K), status=p.sb.new, observed=obs))
    assert "PriorityNotEnforced" not in [e.reason for e in again.events]  # said once


def test_the_queue_admission_condition_says_the_priority_is_enforced():
    p = modes.scheduler(state(generic(scheduler=T9K), observed=observed()))
    message = p.sb.condition("QueueAdmission")["message"]
    assert "queue admission is not enforced (the priority is: PriorityClass batch-normal on the pods)" in message


def test_the_warning_names_the_missing_class():
    choice = choose(generic(scheduler=T9K), observed(classes={}))
    said = warning(choice)
    assert said is not None
    assert "PriorityClass batch-normal" in said
    assert "does not exist" in said
    assert warning(choose(generic(scheduler=T9K), observed(bands=()))) is None


def test_describe_without_kueue_or_map_keeps_the_old_words():
    said = describe(Choice(5, why_not="the controller runs without --priority-class-map"), False, "no Kueue", {})
    assert said == ("5: ignored, only the pod annotation scheduler.tensorstack.dev/priority (no Kueue; the controller runs "
                    "without --priority-class-map)")  # fmt: skip


def preempted(name: str) -> Obj:
    """A replica kube-scheduler preempted for a higher-priority pod: marked, then being deleted."""
    p = pod(name, "Running", deleting=True)
    p["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                                  "message": "Preempted by pod 1234 on node kwok-node-0"}]  # fmt: skip
    return p


def test_a_preempted_replica_spends_no_restart_and_comes_back_with_its_class():
    # restartPolicy Never: any counted restart would fail the job.
    job = restart(generic("job", ("worker", 1), scheduler={"t9kScheduler": {"priority": 10}}), "Never")
    running = plan(job, observed(evidence(job), pod("job-worker-0")), NOW)
    victim = plan({**job, "status": running.status}, observed(evidence(job), preempted("job-worker-0")), NOW)
    [entry] = victim.status["restartHistory"]
    assert entry["cause"].startswith("PreemptionByScheduler: Preempted by pod 1234"), entry
    assert entry["counted"] is False
    assert victim.status["phase"] == "Running"
    gone = plan({**job, "status": victim.status}, observed(evidence(job)), NOW)
    [created] = _created_pods(gone).values()
    assert created["spec"]["priorityClassName"] == "batch-low"
    assert created["metadata"]["annotations"]["batch.tensorstack.dev/restart-count"] == "0"
    assert gone.status["phase"] != "Failed"
    assert [e["restartCount"] for t in gone.status["tasks"] for e in t["status"]] == [0]


# -- the controller process: the flag, and PriorityClasses watched only with a map ---------------


def test_the_flag_is_parsed_and_two_flags_that_overlap_are_refused():
    from airflow_t9k.cli import build_parser
    from airflow_t9k.controller.cli import priority_bands

    args = build_parser().parse_args(["controller", "--priority-class-map", "0-49=low", "--priority-class-map", "50=mid"])
    assert [str(b) for b in priority_bands(args.priority_class_map)] == ["0-49=low", "50=mid"]
    with pytest.raises(ValueError, match="overlap"):
        priority_bands(build_parser().parse_args(["controller", "--priority-class-map", "0-49=a",
                                                  "--priority-class-map", "40-60=b"]).priority_class_map)  # fmt: skip
    with pytest.raises(SystemExit):  # argparse's usage error, naming the entry
        build_parser().parse_args(["controller", "--priority-class-map", "high=x"])


@pytest.mark.parametrize("mapped", [False, True])
def test_priority_classes_are_watched_only_with_a_map(mapped):
    from airflow_t9k.controller.runner import Controller, Settings

    bands = BANDS if mapped else ()
    controller = Controller(kube=None, settings=Settings(namespaces=["ns"], kinds=["GenericJob"], priority_map=bands))  # type: ignore[arg-type]
    assert (("PriorityClass", "") in controller.informers) is mapped
    job = generic(scheduler=T9K)
    if mapped:
        controller.informers[("PriorityClass", "")].cache[("", "batch-normal")] = CLASSES["batch-normal"]
    got = controller.observed(job, {"Pod": {}, "Service": {}, "ConfigMap": {}, "Job": {}})
    assert got.priority_map == bands
    assert dict(got.pod_priority_classes) == ({"batch-normal": CLASSES["batch-normal"]} if mapped else {})
