"""Which job a later try takes (api/rerun.py): a retry never trains a job that succeeded again;
a Clear runs it anew; a failure is run anew by the next try; a Clear takes a job that still runs
only when the job it renders now has the same spec digest (api/specdigest.py)."""

from __future__ import annotations

import copy
import logging
from types import SimpleNamespace

import pytest

from airflow_t9k.api import specdigest
from airflow_t9k.api.checkpoint import ENV_RERUN, set_env
from airflow_t9k.api.rerun import ANEW, CONSUMED_BY, DELIVERED_BY, REPLACE, TAKE, first_try, in_series, reuse, take_again
from airflow_t9k.k8s.errors import AlreadyExists
from airflow_t9k.operators import lineage_parent
from airflow_t9k.operators.kinds import GenericJobOperator, PyTorchTrainingJobOperator
from tests.support.task import FakeTI, Store
from tests.unit.airflow.test_operators import op


@pytest.mark.parametrize(
    ("try_number", "max_tries", "retries", "expected"),
    [
        (1, 2, 2, 1),  # the first run
        (3, 2, 2, 1),  # its second retry: same series
        (4, 5, 2, 4),  # cleared after try 3: Airflow set max_tries = 3 + 2
        (5, 5, 2, 4),  # a retry after that Clear
        (2, 1, 0, 2),  # no retries: every later try is a Clear
        (2, None, 2, 2),  # Airflow does not say: a new series (runs anew, as before)
        (2, True, 2, 2),  # not an int
    ],
)  # fmt: skip
def test_the_first_try_of_a_series_is_airflows_own_arithmetic(try_number, max_tries, retries, expected):
    assert first_try(try_number, max_tries, retries) == expected


def _job(phase, **marks):
    return {"metadata": {"annotations": {k: str(v) for k, v in marks.items()}}, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("job", "series_start", "take"),
    [
        (_job("Running"), 3, True),
        (_job("Running", **{CONSUMED_BY: 1}), 3, True),  # wait_for_completion=False consumed it while it ran
        (_job("Succeeded"), 3, True),  # nobody delivered it: whoever finds it does
        (_job("Succeeded", **{DELIVERED_BY: 1}), 1, True),  # a retry: deliver again, never train again
        (_job("Succeeded", **{DELIVERED_BY: 2}), 1, True),
        (_job("Succeeded", **{DELIVERED_BY: 1}), 2, False),  # cleared since: run anew
        (_job("Succeeded", **{CONSUMED_BY: 1}), 1, True),  # marked by an earlier version: counts as delivered
        (_job("Succeeded", **{CONSUMED_BY: 1}), 2, False),
        (_job("Failed"), 2, True),  # the try that saw it fail died before marking: end with that failure
        (_job("Failed", **{CONSUMED_BY: 1}), 1, False),  # a retry after a failure runs anew
        (_job("Succeeded", **{DELIVERED_BY: "x"}), 2, True),  # an unreadable mark is no mark
    ],
    ids=["running", "running-consumed", "succeeded-undelivered", "retry-after-delivery", "retry-later-try",
         "clear-after-delivery", "old-mark-retry", "old-mark-clear", "failed-unconsumed", "failed-consumed", "bad-mark"],
)  # fmt: skip
def test_which_job_a_later_try_takes(job, series_start, take):
    assert take_again(job, series_start)[0] is take


# -- issue 44, item 4: a Clear reattaches only to the job it renders now ---------------------------
DIGEST = specdigest.SPEC_DIGEST
NFS = {"volume": {"nfs": {"server": "nas", "path": "/x"}}, "path": "exp"}


def _ti(try_number=1, max_tries=None, map_index=-1, run_id="manual__1"):
    ti = FakeTI(run_id=run_id, try_number=try_number, max_tries=max_tries)
    ti.map_index = map_index
    return ti


def _render(o, **ti):
    return o.render_job({"ti": _ti(**ti)})


def _lineage(monkeypatch, run_id):
    ids = (("ns", "dag.train", run_id), ("ns", "dag", "root-run"))
    monkeypatch.setattr(lineage_parent, "lineage_ids", lambda ti: ids)


@pytest.mark.parametrize("scope", ["series", "run", "try"])
def test_the_digest_ignores_what_differs_between_tries(monkeypatch, scope):
    o = op(PyTorchTrainingJobOperator, command="python t.py", replicas=2, retries=2, checkpoint=NFS, checkpoint_scope=scope,
           env={"LR": "0.1"}, labels={"team": "ml"})  # fmt: skip
    _lineage(monkeypatch, "run-of-try-1")
    first = _render(o, try_number=1, max_tries=2)  # retries=2: the first series is tries 1-3
    _lineage(monkeypatch, "run-of-try-4")
    cleared = _render(o, try_number=4, max_tries=5)  # a Clear after try 3: max_tries = 3 + retries
    # What a submission, an end and a kill add to the job, and a run anew's name and T9K_RERUN.
    cleared["metadata"]["name"] += "-t4"
    cleared["metadata"]["annotations"].update({"airflow-t9k.io/submission": "nonce", CONSUMED_BY: "3", DELIVERED_BY: "3",
                                              "airflow-t9k.io/paused-by": "kill of try 3"})  # fmt: skip
    set_env(cleared, ENV_RERUN, "2")
    assert first["metadata"]["labels"]["airflow-t9k.io/try-number"] != cleared["metadata"]["labels"]["airflow-t9k.io/try-number"]
    first_env = first["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "OPENLINEAGE_PARENT_RUN_ID", "value": "run-of-try-1"} in first_env
    assert first["metadata"]["annotations"][DIGEST] == cleared["metadata"]["annotations"][DIGEST]
    assert specdigest.digest(first) == specdigest.digest(cleared) == first["metadata"]["annotations"][DIGEST]
    assert first["metadata"]["annotations"][DIGEST].startswith("v1:")


def test_every_lineage_variable_is_left_out_of_the_digest():
    assert all(specdigest._per_try_env(n) for n in lineage_parent.NAMES)
    assert not specdigest._per_try_env("OPENLINEAGE_URL")  # the author's own lineage settings count


BASE = {"image": "img:1", "command": "python t.py", "replicas": 2, "env": {"LR": "0.1"}, "labels": {"team": "ml"},
        "checkpoint": NFS}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "hint"),
    [
        ({"image": "img:2"}, "image of worker/main: img:1 -> img:2"),
        ({"command": "python t2.py"}, "command of worker/main"),
        ({"replicas": 4}, "replicas of worker: 2 -> 4"),
        ({"env": {"LR": "0.2"}}, "env of worker/main: LR"),
        ({"env": {"LR": "0.1", "SEED": "1"}}, "env of worker/main: SEED"),
        ({"labels": {"team": "cv"}}, "metadata.labels"),
        ({"namespace": "other"}, "metadata.namespace"),
        ({"checkpoint": {**NFS, "path": "exp2"}}, "volumeMounts of worker/main"),
        ({"shm_size": "1Gi"}, "worker"),
        ({"spec": {"runPolicy": {"backoffLimit": 3}}}, "spec.runPolicy"),
    ],
    ids=["image", "command", "replicas", "env-value", "env-added", "label", "namespace", "checkpoint-dir", "pod-option",
         "spec"],
)  # fmt: skip
def test_the_digest_changes_with_what_the_author_sets_and_the_log_says_what(change, hint):
    before = _render(op(GenericJobOperator, **BASE))
    after = _render(op(GenericJobOperator, **{**BASE, **change}))
    assert before["metadata"]["annotations"][DIGEST] != after["metadata"]["annotations"][DIGEST]
    said = "; ".join(specdigest.changes(before, after))
    assert hint in said, said


def test_a_mapped_sweeps_digest_is_that_map_indexs_rendering():
    """A sweep's expand list changed between the first run and a Clear: only the map index whose
    element changed renders another job (each map index compares with its own earlier job)."""

    def sweep(rates):
        return [_render(op(GenericJobOperator, **{**BASE, "env": {"LR": lr}}), map_index=i)["metadata"]["annotations"][DIGEST]
                for i, lr in enumerate(rates)]  # fmt: skip

    before, after = sweep(["0.1", "0.2"]), sweep(["0.1", "0.3"])
    assert before[0] == after[0]
    assert before[1] != after[1]


def _live(phase="Running", digest="v1:aaa", submitted_by=1, paused=False):
    meta = {"labels": {"airflow-t9k.io/try-number": str(submitted_by)}, "annotations": {}}
    if digest is not None:
        meta["annotations"][DIGEST] = digest
    spec = {"runMode": {"pause": {"enabled": True}}} if paused else {}
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("job", "same_series", "digest", "action"),
    [
        # a retry (the same series) reattaches whatever the DAG renders now
        (_live(), True, "v1:bbb", TAKE),
        (_live(paused=True, phase="Paused"), True, "v1:bbb", TAKE),
        # a Clear (a later series): the same digest reattaches, another ends it and runs anew
        (_live(), False, "v1:aaa", TAKE),
        (_live(), False, "v1:bbb", REPLACE),
        (_live(phase="Pending"), False, "v1:bbb", REPLACE),
        (_live(paused=True, phase="Paused"), False, "v1:aaa", TAKE),
        (_live(paused=True, phase="Paused"), False, "v1:bbb", REPLACE),
        # a job an older version submitted (no digest), or another version's digest: taken as the same
        (_live(digest=None), False, "v1:bbb", TAKE),
        (_live(digest="v0:aaa"), False, "v1:bbb", TAKE),
        # an ended job: as before with the same spec; with another, never taken (its end is another job's)
        (_live(phase="Succeeded"), False, "v1:aaa", TAKE),
        (_live(phase="Succeeded"), False, "v1:bbb", ANEW),
        (_live(phase="Failed"), False, "v1:bbb", ANEW),
        (_live(phase="Failed"), True, "v1:bbb", TAKE),  # a retry ends with the failure no try consumed
        (_job("Succeeded", **{DELIVERED_BY: 1}), False, None, ANEW),  # no digest rendered: as before
    ],
    ids=["retry-running", "retry-paused", "clear-same", "clear-changed", "clear-changed-pending", "clear-paused-same",
         "clear-paused-changed", "clear-no-digest", "clear-other-version", "clear-succeeded-same", "clear-succeeded-changed",
         "clear-failed-changed", "retry-failed-changed", "clear-delivered"],
)  # fmt: skip
def test_what_a_later_try_does_with_the_recorded_job(job, same_series, digest, action):
    decision = reuse(job, 3, digest, same_series)
    assert decision.action == action, decision
    if job["metadata"]["annotations"].get(DIGEST) is None and not same_series and action == TAKE:
        assert "older version" in decision.note


@pytest.mark.parametrize(
    ("submitted_by", "took", "series_start", "same"),
    [(1, [], 1, True), (2, [], 1, True), (1, [], 3, False), (1, [1, 2], 3, False), (1, [1, 3], 3, True), (None, [], 1, False)],
    ids=["submitted-this-series", "submitted-later-try", "cleared-since", "taken-before-the-clear", "taken-by-this-series",
         "no-label"],
)  # fmt: skip
def test_whether_the_job_is_of_this_series(submitted_by, took, series_start, same):
    job = {"metadata": {"labels": {} if submitted_by is None else {"airflow-t9k.io/try-number": str(submitted_by)}}}
    assert in_series(job, series_start, took) is same


# -- the same through the operator, against an in-memory API server ---------------------------------
class Cluster:
    """What execute reads and writes of the API server: jobs by name, the writes made."""

    api_client = SimpleNamespace(configuration=SimpleNamespace(host="https://k8s.test"))

    def __init__(self):
        self.jobs: dict[str, dict] = {}
        self.calls: list[tuple] = []

    def get_namespace(self):
        return "ml"

    def get_job(self, kind, name, namespace):
        return copy.deepcopy(self.jobs.get(name))

    def create_job(self, job, namespace):
        name = job["metadata"]["name"]
        if name in self.jobs:
            raise AlreadyExists(409, "AlreadyExists", f"{name} exists")
        made = copy.deepcopy(job)
        made["metadata"]["uid"] = f"uid-{len(self.calls)}-{name}"
        made["status"] = {"phase": "Running"}
        self.jobs[name] = made
        self.calls.append(("create", name))
        return copy.deepcopy(made)

    def patch_job(self, kind, name, namespace, patch):
        self.calls.append(("patch", name, patch))
        job = self.jobs[name]
        job["metadata"].setdefault("annotations", {}).update(patch.get("metadata", {}).get("annotations") or {})
        job["metadata"]["annotations"] = {k: v for k, v in job["metadata"]["annotations"].items() if v is not None}
        if "spec" in patch:
            job["spec"]["runMode"] = patch["spec"]["runMode"]
        return copy.deepcopy(job)

    def delete_job(self, kind, name, namespace, uid=None):
        self.calls.append(("delete", name, uid))
        return self.jobs.pop(name, None) is not None


def _op(cluster, image="img:1", **kw):
    o = op(GenericJobOperator, image=image, replicas=2, retries=1, wait_for_completion=False, **kw)
    o._hook = cluster
    o._cached_logger = logging.getLogger("t9k-test")
    return o


def _run(o, store, try_number, max_tries):
    ti = _ti(try_number=try_number, max_tries=max_tries)
    return o.execute({"ti": ti, "task_state_store": store}), ti


@pytest.mark.parametrize(
    ("image", "action", "old_after"),
    [("img:1", "delete", "running"), ("img:2", "delete", None), ("img:2", "pause", "paused"), ("img:2", "keep", "running")],
    ids=["same-spec-reattaches", "changed-delete", "changed-pause", "changed-keep"],
)  # fmt: skip
def test_a_clear_ends_a_running_job_of_another_spec_as_on_kill_action_says(caplog, image, action, old_after):
    cluster, store = Cluster(), Store()
    first, _ = _run(_op(cluster, on_kill_action=action), store, 1, 1)
    with caplog.at_level(logging.INFO, logger="t9k-test"):
        # A Clear after try 1: Airflow sets max_tries = 1 + retries, and try 2 starts a new series.
        cleared, _ = _run(_op(cluster, image=image, on_kill_action=action), store, 2, 2)
    said = caplog.text
    old = next((j for j in cluster.jobs.values() if j["metadata"]["uid"] == first["uid"]), None)
    if image == "img:1":
        assert cleared["uid"] == first["uid"]
        assert "the job it renders now is the same" in said
        return
    assert cleared["uid"] != first["uid"]
    assert cleared["name"] == (f"{first['name']}-t2" if old is not None else first["name"])
    assert "image of worker/main: img:1 -> img:2" in said
    assert f"on_kill_action={action!r}" in said
    new = cluster.jobs[cleared["name"]]
    assert new["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["image"] == "img:2"
    if old_after is None:
        assert old is None
        assert ("delete", first["name"], first["uid"]) in cluster.calls
    elif old_after == "paused":
        assert old["spec"]["runMode"]["pause"]["enabled"] is True
        assert old["metadata"]["annotations"]["airflow-t9k.io/paused-by"] == "replaced by try 2"
    else:
        assert "runMode" not in old["spec"]
        assert "leaving" in said
        assert "on_kill_action='keep'" in said


def test_a_retry_reattaches_whatever_the_dag_renders_now():
    cluster, store = Cluster(), Store()
    first, _ = _run(_op(cluster), store, 1, 1)
    retry, _ = _run(_op(cluster, image="img:2"), store, 2, 1)  # the same series: max_tries unchanged
    assert retry["uid"] == first["uid"]
    assert [c[0] for c in cluster.calls if c[0] in ("create", "delete")] == ["create"]


def test_a_retry_after_a_clear_that_reattached_keeps_reattaching():
    cluster, store = Cluster(), Store()
    first, _ = _run(_op(cluster), store, 1, 1)
    _run(_op(cluster), store, 2, 2)  # the Clear takes it (same spec): try 2 records it
    retry, _ = _run(_op(cluster, image="img:2"), store, 3, 2)  # its retry: the same series as try 2
    assert retry["uid"] == first["uid"]


def test_a_job_without_digest_is_taken_and_the_log_says_so_once(caplog):
    cluster, store = Cluster(), Store()
    first, _ = _run(_op(cluster), store, 1, 1)
    del cluster.jobs[first["name"]]["metadata"]["annotations"][DIGEST]  # as an older version submitted it
    with caplog.at_level(logging.INFO, logger="t9k-test"):
        cleared, _ = _run(_op(cluster, image="img:2"), store, 2, 2)
    assert cleared["uid"] == first["uid"]
    assert caplog.text.count("older version of airflow-t9k") == 1


def test_a_paused_job_of_another_spec_is_not_resumed_by_a_clear():
    cluster, store = Cluster(), Store()
    first, _ = _run(_op(cluster, on_kill_action="pause"), store, 1, 1)
    cluster.jobs[first["name"]]["spec"]["runMode"] = {"pause": {"enabled": True}}
    cluster.jobs[first["name"]]["metadata"]["annotations"]["airflow-t9k.io/paused-by"] = "kill of try 1"
    cleared, _ = _run(_op(cluster, image="img:2", on_kill_action="pause"), store, 2, 2)
    assert cleared["uid"] != first["uid"]
    old = cluster.jobs[first["name"]]
    assert old["spec"]["runMode"]["pause"]["enabled"] is True
    assert not [c for c in cluster.calls if c[0] == "patch" and c[1] == first["name"] and "spec" in c[2]]


@pytest.mark.parametrize(
    ("record", "max_tries", "series_start", "same"),
    [({"try": 2, "max_tries": 3}, 3, 1, True),  # a retry of the series that delivered
     ({"try": 2, "max_tries": 3}, 5, 1, False),  # a Clear since (Airflow's max_tries moved on)...
     ({"try": 2, "max_tries": 3}, 3, 4, True),  # ...and not fooled by today's retries (raised from 2 to 5 since)
     ({"try": 4, "max_tries": 6}, 3, 1, False),
     ({"try": 2}, 3, 1, True),  # an older record: today's retries decide, as before
     ({"try": 2}, 3, 3, False),
     ({"try": 2, "max_tries": 3}, None, 1, True)],  # a task instance that does not say
    ids=["retry", "cleared", "retries-changed", "other-series", "old-record", "old-record-cleared", "no-max-tries"],
)  # fmt: skip
def test_a_delivery_belongs_to_the_series_airflow_numbered(record, max_tries, series_start, same):
    """Issue 44, item 7: the retry-vs-Clear decision read today's ``retries``; a DAG whose retries
    changed between two tries of one series took a retry for a Clear (and trained again)."""
    from airflow_t9k.operators.submit import same_series

    assert same_series(record, max_tries, series_start) is same
