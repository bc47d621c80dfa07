"""What the UI shows of jobs, pods and Events (airflow_t9k/ui/view.py), and how the reader
narrows its LISTs: tables of cases."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from airflow_t9k.ui import view
from airflow_t9k.ui.reader import Reader

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)
A = "airflow-t9k.io"


def job(kind="GenericJob", name="j", dag="d", run="r", task="t", map_index="-1", status=None, spec=None, **ann):
    annotations = {f"{A}/dag-id": dag, f"{A}/run-id": run, f"{A}/task-id": task, f"{A}/map-index": map_index, **ann}
    if dag is None:
        annotations = {}
    return {"kind": kind, "metadata": {"name": name, "namespace": "ns", "uid": "u1", "annotations": annotations,
                                       "creationTimestamp": "2026-01-01T11:00:00Z"},
            "spec": spec or {}, "status": status or {}}  # fmt: skip


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({}, "Pending"),
        ({"phase": "Running"}, "Running"),
        ({"conditions": [{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}]}, "Running"),
        ({"conditions": [{"type": "Running", "status": "True"}, {"type": "Succeeded", "status": "False"}]}, "Running"),
        ({"phase": "Paused", "conditions": [{"type": "Running", "status": "True"}]}, "Paused"),
    ],
)
def test_phase(status, expected):
    assert view.phase(job(status=status)) == expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({}, {"running": 0, "succeeded": 0, "failed": 0, "restarts": 0}),
        (
            {"aggregate": {"running": 2, "succeeded": 1, "failed": 0}, "tasks": [{"restartCount": 2}, {"restartCount": 1}]},
            {"running": 2, "succeeded": 1, "failed": 0, "restarts": 3},
        ),
        (
            {"replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 2, "failed": 1}}, "backoffCount": 4},
            {"running": 3, "succeeded": 0, "failed": 1, "restarts": 4},
        ),
    ],
)
def test_counts_come_from_the_status_alone(status, expected):
    assert view.counts(job(status=status)) == expected


def test_readable_matches_the_exact_dag_id_annotation():
    long_a, long_b = "x" * 70 + "a", "x" * 70 + "b"  # the same 63-character label
    jobs = [job(name="1", dag=long_a), job(name="2", dag=long_b), job(name="3", dag="other"), job(name="4", dag=None)]
    assert [j["metadata"]["name"] for j in view.readable(jobs, {long_a, "other"})] == ["1", "3"]
    assert view.readable(jobs, set()) == []


def uid(j, value):
    j["metadata"]["uid"] = value
    return j


OWNED_CASES = [
    # (jobs, recorded task -> uid, names kept)
    ("the recorded job", [uid(job(name="a"), "u1")], {("d", "r", "t", -1): "u1"}, ["a"]),
    # Attack: a job planted with another team's task annotations; the task recorded its own uid.
    (
        "a forged job claiming the task",
        [uid(job(name="a"), "u1"), uid(job(name="evil"), "u9")],
        {("d", "r", "t", -1): "u1"},
        ["a"],
    ),
    ("a task that recorded nothing", [uid(job(name="evil"), "u9")], {}, []),
    ("an earlier try's job", [uid(job(name="old"), "u0"), uid(job(name="new"), "u2")], {("d", "r", "t", -1): "u2"}, ["new"]),
    ("another map index", [uid(job(name="m", map_index="1"), "u1")], {("d", "r", "t", -1): "u1"}, []),
    ("no annotations", [uid(job(name="x", dag=None), "u1")], {("d", "r", "t", -1): "u1"}, []),
    ("no uid", [uid(job(name="x"), "")], {("d", "r", "t", -1): ""}, []),
]


@pytest.mark.parametrize(("jobs", "recorded", "kept"), [c[1:] for c in OWNED_CASES], ids=[c[0] for c in OWNED_CASES])
def test_the_list_keeps_only_the_job_each_task_recorded(jobs, recorded, kept):
    assert [j["metadata"]["name"] for j in view.owned(jobs, recorded)] == kept


IDENTITY = {"kind": "GenericJob", "namespace": "ns", "name": "j", "uid": "u1"}


@pytest.mark.parametrize(
    ("change", "expected"),
    [({}, True), ({"uid": "u2"}, False), ({"name": "k"}, False), ({"namespace": "other"}, False), ({"kind": "MPIJob"}, False)],
)
def test_recorded_is_the_very_object(change, expected):
    assert view.recorded(job(), {**IDENTITY, **change}) is expected


KEY = ("d", "r", "t", -1)


@pytest.mark.parametrize(
    ("annotations", "key", "expected"),
    [
        ({}, KEY, True),
        # Attack (issue 29): a task records another task's job (uid and all); its annotations name that task.
        ({"dag": "victim"}, KEY, False),
        ({"run": "other-run"}, KEY, False),
        ({"task": "other-task"}, KEY, False),
        ({"map_index": "3"}, KEY, False),
        ({"dag": None}, KEY, False),  # a job no task submitted (made with kubectl)
        ({"map_index": "3"}, ("d", "r", "t", 3), True),
    ],
    ids=["its-own", "another-dag", "another-run", "another-task", "another-map-index", "no-annotations", "mapped"],
)
def test_a_task_job_is_the_recorded_object_annotated_with_that_task(annotations, key, expected):
    assert view.task_job(job(**annotations), IDENTITY, key) is expected
    assert view.task_job(uid(job(**annotations), "u2"), IDENTITY, key) is False  # and only the recorded uid


def test_summary_row_durations_and_task():
    row = view.summary(job(status={"phase": "Succeeded", "startTime": "2026-01-01T11:00:10Z",
                                   "conditions": [{"type": "Succeeded", "status": "True",
                                                   "lastTransitionTime": "2026-01-01T11:01:10Z"}]}),
                       NOW)  # fmt: skip
    assert row["task"] == {"dag_id": "d", "run_id": "r", "task_id": "t", "map_index": -1}
    assert (row["age_seconds"], row["duration_seconds"], row["ended"]) == (3600, 60, "2026-01-01T11:01:10Z")
    running = view.summary(job(status={"phase": "Running", "startTime": "2026-01-01T11:30:00Z"}), NOW)
    assert (running["duration_seconds"], running["ended"]) == (1800, None)


def pod(name, type_="worker", rank="0", phase="Running", node="n1", containers=None, ann=None, deleting=False):
    meta = {"name": name, "labels": {view.TYPE_LABEL: type_, view.RANK_LABEL: rank}, "annotations": ann or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T11:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase, "containerStatuses": containers or []}}


def test_replica_rows_sorted_by_type_and_rank_with_exit_codes_and_restarts():
    failed = [
        {
            "restartCount": 1,
            "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-01-01T11:05:00Z"}},
        }
    ]
    waiting = [{"restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}]
    rows = view.replicas([pod("j-worker-10", rank="10"), pod("j-worker-2", rank="2", phase="Failed", containers=failed),
                          pod("j-master-0", type_="master", containers=waiting, ann={"batch.tensorstack.dev/restart-count": "3"}),
                          pod("j-worker-x", rank="x", deleting=True)])  # fmt: skip
    assert [(r["type"], r["rank"], r["pod"]) for r in rows] == [
        ("master", 0, "j-master-0"),
        ("worker", 2, "j-worker-2"),
        ("worker", 10, "j-worker-10"),
        ("worker", None, "j-worker-x"),
    ]
    master, w2, _, wx = rows
    assert (master["restarts"], master["reason"], master["exit_code"]) == (3, "ContainerCreating", None)
    assert (w2["phase"], w2["exit_code"], w2["reason"], w2["restarts"], w2["finished"]) == (
        "Failed",
        137,
        "OOMKilled",
        1,
        "2026-01-01T11:05:00Z",
    )
    assert wx["phase"] == "Terminating"


def test_events_of_the_job_and_its_pods_by_uid_oldest_first():
    def ev(name, uid, reason, t):
        return {"involvedObject": {"kind": "Pod", "name": name, "uid": uid}, "reason": reason, "type": "Normal",
                "lastTimestamp": t}  # fmt: skip

    items = [ev("j-worker-0", "p0", "Started", "2026-01-01T11:00:02Z"), ev("j", "u1", "SuccessfulCreate", "2026-01-01T11:00:01Z"),
             # Another DAG's objects whose names look like ours (a same-named job in the namespace earlier,
             # a pod named j-...): matched by name they leaked into this tab.
             ev("j-worker-0", "p-other", "Leaked", "2026-01-01T11:00:00Z"), ev("j", "u-other", "Leaked", "2026-01-01T11:00:00Z"),
             ev("k", "k1", "Other", "2026-01-01T11:00:00Z")]  # fmt: skip
    assert [e["reason"] for e in view.events(items, {"u1", "p0"})] == ["SuccessfulCreate", "Started"]
    many = [ev("j", "u1", f"r{i}", f"2026-01-01T11:{i // 60:02d}:{i % 60:02d}Z") for i in range(150)]
    assert len(view.events(many, {"u1"})) == view.MAX_EVENTS
    assert view.events(many, {"u1"})[-1]["reason"] == "r149"


@pytest.mark.parametrize(
    ("refs", "owned"),
    [
        ([{"uid": "u1", "kind": "GenericJob", "name": "j"}], True),
        ([{"uid": "u2", "kind": "GenericJob", "name": "j"}], False),  # a same-named job's pod
        ([], False),
        (None, False),
    ],
)
def test_pods_are_the_jobs_by_owner_uid(refs, owned):
    p = pod("j-worker-0")
    if refs is not None:
        p["metadata"]["ownerReferences"] = refs
    assert view.owned_by(p, "u1") is owned


def test_the_reader_asks_for_events_by_field_selector_and_keeps_owned_pods():
    calls = []

    def transport(method, path, query=None, **_):
        calls.append((path, dict(query or [])))
        if path.endswith("/pods"):
            mine, other = pod("j-worker-0"), pod("j-worker-1")
            mine["metadata"]["ownerReferences"] = [{"uid": "u1"}]
            other["metadata"]["ownerReferences"] = [{"uid": "u-other"}]
            return {"items": [mine, other]}
        return {"items": []}

    reader = Reader(transport)
    assert [p["metadata"]["name"] for p in reader.pods(job())] == ["j-worker-0"]
    reader.events(job())
    assert calls[1:] == [("/api/v1/namespaces/ns/events", {"fieldSelector": "involvedObject.uid=u1"}),
                         ("/api/v1/namespaces/ns/events", {"fieldSelector": "involvedObject.kind=Pod"})]  # fmt: skip


ELASTIC = {"elastic": {"enabled": True, "minReplicas": 2, "maxReplicas": 4, "expectedReplicas": 3}}


@pytest.mark.parametrize(
    ("kind", "spec", "replicas", "problem"),
    [
        ("PyTorchTrainingJob", ELASTIC, 4, None),
        ("DeepSpeedJob", ELASTIC, 2, None),
        ("PyTorchTrainingJob", ELASTIC, 5, "between minReplicas 2 and maxReplicas 4"),
        ("PyTorchTrainingJob", ELASTIC, 1, "between minReplicas 2"),
        # No maxReplicas: bounded by the declared replicas, as the controller clamps (not unbounded).
        ("PyTorchTrainingJob", {"elastic": {"enabled": True}, "replicaSpecs": [{"replicas": 3}]}, 3, None),
        ("PyTorchTrainingJob", {"elastic": {"enabled": True}, "replicaSpecs": [{"replicas": 3}]}, 1000, "maxReplicas 3"),
        ("DeepSpeedJob", {"elastic": {"enabled": True, "minReplicas": 2}, "worker": {"replicas": 1}}, 3, "maxReplicas 2"),
        ("PyTorchTrainingJob", ELASTIC, "3", "whole number"),
        ("PyTorchTrainingJob", ELASTIC, True, "whole number"),
        ("PyTorchTrainingJob", {"elastic": {"enabled": False}}, 3, "not an Elastic job"),
        ("GenericJob", ELASTIC, 3, "not an Elastic job"),
    ],
)
def test_scale_only_elastic_jobs_within_bounds(kind, spec, replicas, problem):
    found = view.scale_error(job(kind=kind, spec=spec), replicas)
    assert (found is None) if problem is None else (problem in found), found


def test_the_list_is_one_label_selected_list_per_kind_shared_for_a_moment():
    calls = []

    def transport(method, path, query=None, **_):
        calls.append((method, path, dict(query or [])))
        return {"items": [{"metadata": {"name": f"{len(calls)}"}}]}

    reader = Reader(transport, kinds=["GenericJob", "MPIJob"])
    first = reader.jobs()
    assert reader.jobs() == first
    assert reader.jobs("MPIJob") == [j for j in first if j["kind"] == "MPIJob"]
    assert sorted(p for _, p, _ in calls) == ["/apis/batch.tensorstack.dev/v1beta1/genericjobs",
                                              "/apis/batch.tensorstack.dev/v1beta1/mpijobs"]  # fmt: skip
    assert all(m == "GET" and q == {"labelSelector": f"{A}/dag-id"} for m, _, q in calls)
    assert {j["kind"] for j in first} == {"GenericJob", "MPIJob"}


def test_the_tab_gets_the_recorded_job_by_one_get_and_only_while_the_uid_is_the_same():
    calls = []
    store = {"j": job(name="j")}

    def transport(method, path, query=None, **_):
        calls.append((method, path))
        name = path.rsplit("/", 1)[-1]
        return {**store[name]} if name in store else _missing()

    reader = Reader(transport, kinds=["GenericJob", "MPIJob"])
    assert reader.recorded_job(IDENTITY, KEY)["metadata"]["name"] == "j"
    assert calls == [("GET", "/apis/batch.tensorstack.dev/v1beta1/namespaces/ns/genericjobs/j")]
    assert reader.recorded_job(IDENTITY, ("other-dag", "r", "t", -1)) is None  # another task's record of it
    store["j"] = uid(job(name="j"), "u-replacement")  # deleted and created again by someone else
    assert reader.recorded_job(IDENTITY, KEY) is None
    del store["j"]
    assert reader.recorded_job(IDENTITY, KEY) is None
    calls.clear()
    assert reader.recorded_job({**IDENTITY, "kind": "BeamJob"}, KEY) is None  # a kind this reader does not read
    assert Reader(transport, namespace="team-b").recorded_job(IDENTITY, KEY) is None  # outside the UI's namespace
    assert calls == []


def _missing():
    from airflow_t9k.k8s.errors import NotFound

    raise NotFound(404, "NotFound", "gone")


# ---- what the controller kept before clean-up (issue 23, point 3) ----

SUMMARY = {"job": "j", "phase": "Failed", "keptAt": "2026-01-01T12:00:00Z",
           "rootCause": {"replica": "j-worker-0", "detail": "exit code 3", "exitCode": 3},
           "replicas": {"j-worker-0": {"phase": "Failed", "containers": [
               {"name": "main", "state": "terminated", "exitCode": 3, "reason": "Error", "message": "loss is nan"}]},
               "j-worker-1": {"phase": "Running", "containers": []}}}  # fmt: skip


def evidence_data(**extra):
    import json

    return {"summary.json": json.dumps(SUMMARY), "j-worker-0.log": "a\nb\nc\n", "j-worker-1.log": "x\n",
            "events.json": json.dumps([{"type": "Warning", "reason": "Failed", "message": "m", "count": 2, "time": "t"}]),
            **extra}  # fmt: skip


RECORDED = {"created": {"ConfigMap": {"j-evidence": {"uid": "cm1"}}}}


@pytest.mark.parametrize(
    ("status", "uid", "gets", "used"),
    [
        (RECORDED, "cm1", 1, True),  # the ConfigMap the controller made and recorded
        # Issue 29, 8: a pre-made one (its ownerReference may name the job: a uid is no secret).
        (RECORDED, "forged", 1, False),
        ({}, "cm1", 0, False),  # no record: not even read
        ({"created": {"ConfigMap": {"j-evidence": {"at": "2026-01-01T00:00:00Z"}}}}, "cm1", 0, False),  # decided, not made
    ],
    ids=["recorded", "pre-made", "no-record", "decided-only"],
)
def test_the_evidence_configmap_is_used_only_when_its_uid_is_on_record(status, uid, gets, used):
    calls = []

    def transport(method, path, query=None, **_):
        calls.append((method, path))
        refs = [{"uid": "u1", "controller": True}]
        return {"metadata": {"name": "j-evidence", "uid": uid, "ownerReferences": refs}, "data": evidence_data()}

    found = Reader(transport).evidence({**job(), "status": status})
    assert calls == [("GET", "/api/v1/namespaces/ns/configmaps/j-evidence")] * gets
    assert (found is not None) == used


def test_no_evidence_configmap_is_none():
    assert Reader(lambda *a, **k: _missing()).evidence(job()) is None


def test_kept_shows_gone_replicas_with_exit_codes_messages_logs_and_events():
    kept = view.kept(evidence_data(), live={"j-worker-1"})
    assert [r["pod"] for r in kept["replicas"]] == ["j-worker-0"]  # a live replica is shown live
    [c] = kept["replicas"][0]["containers"]
    assert (c["exit_code"], c["reason"], c["message"]) == (3, "Error", "loss is nan")
    assert kept["replicas"][0]["log"] == "a\nb\nc\n"
    assert kept["events"] == [{"type": "Warning", "reason": "Failed", "message": "m", "count": 2, "time": "t"}]
    assert kept["root_cause"]["replica"] == "j-worker-0"
    assert kept["kept_at"] == "2026-01-01T12:00:00Z"
    assert view.kept(evidence_data(), live={"j-worker-0", "j-worker-1"}) is None  # nothing gone
    assert view.kept({"summary.json": "not json", "j-worker-0.log": "z"}, live=set())["replicas"][0]["log"] == "z"


def test_kept_is_bounded_whatever_the_configmap_holds():
    import json

    # Past every bound: 500 replicas of 50 containers, the first one's messages 100 kB each (a
    # ConfigMap holds 1 MiB at most; this is 5 MB, the rest short so that building it takes no time).
    long, short = [{"name": "c", "message": "m" * 100_000}] * 50, [{"name": "c", "message": "m"}] * 50
    many = {f"p{i}": {"phase": "Failed", "containers": long if i == 0 else short} for i in range(500)}
    data = {"summary.json": json.dumps({"replicas": many}), "p0.log": "l\n" * 100_000,
            "events.json": json.dumps([{"message": "e"}] * 1000)}  # fmt: skip
    kept = view.kept(data, live=set())
    assert len(kept["replicas"]) == view.KEPT_REPLICAS
    assert len(kept["events"]) == view.KEPT_EVENTS
    assert all(len(r["containers"]) <= 16 for r in kept["replicas"])
    assert len(kept["replicas"][0]["containers"][0]["message"]) < view.KEPT_TEXT + 100
    assert len(kept["replicas"][0]["log"]) == view.KEPT_LOG_BYTES
    assert view.tail("1\n2\n3\n", 2) == "2\n3\n"


def test_root_cause_and_restart_history_come_from_the_status():
    status = {"phase": "Failed", "rootCause": {"replica": "j-worker-0", "detail": "d", "exitCode": 3, "permanent": True},
              "restartHistory": [{"time": "t", "replica": "j-worker-1", "cause": "Evicted", "counted": False,
                                  "podUID": "p"}]}  # fmt: skip
    d = view.detail(job(status=status), [], [], NOW)
    assert d["root_cause"] == {"replica": "j-worker-0", "detail": "d", "exit_code": 3, "finished": None, "permanent": True}
    assert d["restart_history"] == [
        {"time": "t", "replica": "j-worker-1", "cause": "Evicted", "counted": False, "exit_code": None}
    ]
    assert d["kept"] is None
    plain = view.detail(job(), [], [], NOW)
    assert (plain["root_cause"], plain["restart_history"]) == (None, [])


def test_a_stall_shows_in_the_tabs_conditions_and_restart_history():
    """Hang detection (controller/reconcile/stall.py): the tab lists the Stalled condition with the
    job's other conditions, and the counted group restart it caused."""
    stalled = {
        "type": "Stalled",
        "status": "True",
        "reason": "ProgressDeadlineExceeded",
        "message": "No replica reported progress for 600s",
        "lastTransitionTime": "2026-01-01T11:50:00Z",
    }
    running = {"type": "Running", "status": "True", "reason": "-", "message": "m", "lastTransitionTime": "2026-01-01T11:00:00Z"}
    entry = {
        "time": "2026-01-01T11:51:00Z",
        "replica": "j-worker-0 (whole group)",
        "counted": True,
        "podUID": "stall/x",
        "cause": "ProgressDeadlineExceeded: No replica reported progress for 600s",
        "reason": "ProgressDeadlineExceeded",
    }
    d = view.detail(job(status={"phase": "Running", "conditions": [stalled, running], "restartHistory": [entry]}), [], [], NOW)
    assert [c["type"] for c in d["conditions"]] == ["Running", "Stalled"]  # over time
    assert d["conditions"][1]["reason"] == "ProgressDeadlineExceeded"
    assert d["restart_history"][0]["cause"].startswith("ProgressDeadlineExceeded: ")
    assert d["restart_history"][0]["counted"] is True


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (None, None),  # nothing ran: an empty cell
        # a finished job: its totals, and what the restarts wasted
        ({"accelerators": {"nvidia.com/gpu": 7200, "huawei.com/Ascend910": 3600}, "wasted": {"nvidia.com/gpu": 1800},
          "runs": 3, "open": {}, "closed": []},
         {"accelerator_hours": 3.0, "by_resource": {"huawei.com/Ascend910": 1.0, "nvidia.com/gpu": 2.0}, "wasted_hours": 0.5,
          "running": False}),
        # a running job: its ended runs, plus the running one up to now (8 GPUs for 30 minutes)
        ({"accelerators": {"nvidia.com/gpu": 3600}, "wasted": {"nvidia.com/gpu": 3600}, "runs": 1, "closed": [],
          "open": {"u2": {"pod": "j-worker-0", "start": "2026-01-01T11:30:00Z", "accelerators": {"nvidia.com/gpu": 8},
                          "cpu": 1}}},
         {"accelerator_hours": 5.0, "by_resource": {"nvidia.com/gpu": 5.0}, "wasted_hours": 1.0, "running": True}),
    ],
)  # fmt: skip
def test_summary_row_accelerator_hours(usage, expected):
    job = {"kind": "GenericJob", "metadata": {"name": "j"}, "status": {"phase": "Running", **({"usage": usage} if usage else {})}}
    assert view.summary(job, NOW)["usage"] == expected


PROGRESS = {"replica": "j-worker-0", "step": 120, "totalSteps": 1000, "epoch": 2, "percent": 12.0, "summary": "12% 120/1000",
            "eta": "2m30s", "etaSeconds": 150, "metrics": {"loss": 0.31, "acc": 0.9}, "reportedAt": "2026-01-01T11:59:58Z",
            "updated": "2026-01-01T12:00:00Z",
            "history": {"every": 10, "points": [{"time": "2026-01-01T11:58:00Z", "step": 0, "metrics": {"loss": 2.0}},
                                                {"time": "2026-01-01T11:59:58Z", "step": 120,
                                                 "metrics": {"loss": 0.31, "acc": 0.9}}]}}  # fmt: skip


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({}, None),
        ({"progress": "garbage"}, None),
        ({"progress": PROGRESS}, {
            "step": 120, "total_steps": 1000, "epoch": 2, "total_epochs": None, "percent": 12.0, "eta_seconds": 150,
            "summary": "12% 120/1000", "eta": "2m30s", "replica": "j-worker-0", "updated": "2026-01-01T12:00:00Z",
            "reported_at": "2026-01-01T11:59:58Z", "metrics": {"loss": 0.31, "acc": 0.9},
            "history": [{"time": "2026-01-01T11:58:00Z", "step": 0, "epoch": None, "metrics": {"loss": 2.0}},
                        {"time": "2026-01-01T11:59:58Z", "step": 120, "epoch": None, "metrics": {"loss": 0.31, "acc": 0.9}}]}),
        # whatever the status holds, numbers only and capped
        ({"progress": {"step": "12", "metrics": {"loss": "x", "ok": True, **{f"m{i}": i for i in range(40)}},
                       "history": {"points": [{"time": 5}, {"time": "not a time"}, "x",
                                              *[{"time": "2026-01-01T11:00:00Z",
                                                 "metrics": {f"m{i}": i for i in range(20)}}] * 300]}}},
         "capped"),
    ],
)  # fmt: skip
def test_progress_for_the_tab(status, expected):
    out = view.progress(status)
    if expected != "capped":
        assert out == expected
        return
    assert out["step"] is None
    assert len(out["metrics"]) == view.PROGRESS_METRICS
    assert "loss" not in out["metrics"]
    assert len(out["history"]) == view.PROGRESS_POINTS
    assert all(len(p["metrics"]) == view.CHART_METRICS for p in out["history"])


def test_the_tab_has_the_progress():
    detail = view.detail(job(status={"phase": "Running", "progress": PROGRESS}), [], [], NOW)
    assert detail["progress"]["summary"] == "12% 120/1000"
    assert view.detail(job(status={"phase": "Running"}), [], [], NOW)["progress"] is None


def test_the_jobs_page_row_has_the_progress_cell():
    row = view.summary(job(status={"phase": "Running", "progress": PROGRESS}), NOW)
    assert row["progress"] == {"summary": "12% 120/1000", "eta": "2m30s", "metrics": {"loss": 0.31, "acc": 0.9}}
    assert view.summary(job(status={"phase": "Running"}), NOW)["progress"] is None
    assert view.summary(job(status={"progress": ["x"]}), NOW)["progress"] is None
