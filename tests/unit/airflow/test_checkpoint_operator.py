"""``checkpoint=``, ``termination_grace_period=`` and ``T9K_ATTEMPT`` on every operator, through
to the pods the controller builds; XCom ``checkpoint`` from the job's result."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
from airflow.sdk.exceptions import AirflowException

from airflow_t9k.api.checkpoint import pod_templates
from airflow_t9k.controller.reconcile import Create
from airflow_t9k.controller.reconcile.desired import RESTART_COUNT_ENV
from airflow_t9k.operators.job import T9kJobOperator
from airflow_t9k.operators.kinds import OPERATORS, GenericJobOperator, PyTorchTrainingJobOperator
from tests.builders import run
from tests.unit.airflow.test_operators import FakeTI, complete, event, finishing_op, op

VOLUME = "airflow-t9k-checkpoint"


def render(o, try_number: int = 1, max_tries: int | None = None, **ti):
    t = FakeTI(**ti)
    t.try_number = try_number
    if max_tries is not None:  # Airflow's: retries + 1 tries in the first series (docs/airflow.md, "Re-runs")
        t.max_tries = max_tries
    return o.render_job({"ti": t})


def mounts(job) -> list[tuple[str, dict, dict]]:
    """(container, its checkpoint mount, its env) for every container of every template."""
    out = []
    for t in pod_templates(job):
        for c in [*t["spec"].get("initContainers", []), *t["spec"]["containers"]]:
            mount = next((m for m in c.get("volumeMounts", []) if m["name"] == VOLUME), None)
            out.append((c["name"], mount, {e["name"]: e.get("value") for e in c.get("env", [])}))
    return out


@pytest.mark.parametrize("kind", sorted(OPERATORS))
def test_every_operator_mounts_the_checkpoint_in_every_replica(kind):
    o = op(
        OPERATORS[kind], command="python t.py", replicas=3, checkpoint="ckpt/exp", termination_grace_period=timedelta(minutes=2)
    )
    job = render(o, run_id="manual_1")
    templates = pod_templates(job)
    assert templates
    assert all(t["spec"]["terminationGracePeriodSeconds"] == 120 for t in templates)
    assert all(t["spec"]["volumes"][-1] == {"name": VOLUME, "persistentVolumeClaim": {"claimName": "ckpt"}} for t in templates)
    found = mounts(job)
    assert found
    assert all(m == {"name": VOLUME, "mountPath": "/t9k/checkpoint", "subPath": "exp/dag/manual_1/train"} for _, m, _ in found)
    assert all(env["T9K_CHECKPOINT_DIR"] == "/t9k/checkpoint" and env["T9K_ATTEMPT"] == "1" for _, _, env in found)


def test_the_directory_is_the_same_for_every_try_of_a_series_and_differs_by_map_index():
    o = op(PyTorchTrainingJobOperator, command="python t.py", replicas=2, retries=6, checkpoint={"claim": "ckpt"})
    by_try = {n: mounts(render(o, try_number=n, max_tries=6, map_index=4)) for n in (1, 2, 7)}
    sub_paths = {m["subPath"] for found in by_try.values() for _, m, _ in found}
    assert len(sub_paths) == 1
    assert sub_paths.pop().endswith("/train/map-4")
    assert {n: {env["T9K_ATTEMPT"] for _, _, env in found} for n, found in by_try.items()} == {1: {"1"}, 2: {"2"}, 7: {"7"}}
    by_index = {i: mounts(render(o, map_index=i))[0][1]["subPath"] for i in (-1, 0, 1)}
    assert len(set(by_index.values())) == 3, by_index


def test_a_job_given_whole_gets_it_too_and_the_checkpoint_may_be_templated():
    job = {"kind": "GenericJob", "spec": {"replicaSpecs": [
        {"type": "worker", "replicas": 2, "template": {"spec": {"containers": [{"name": "m", "image": "img"}],
                                                                  "initContainers": [{"name": "restore",
                                                                                      "image": "img"}]}}}]}}  # fmt: skip
    o = op(T9kJobOperator, job=job, checkpoint={"claim": "{{ params.claim }}", "path": "runs", "mount_path": "/ckpt"})
    o.render_template_fields({"ti": FakeTI(), "params": {"claim": "team-ckpt"}})
    rendered = o.rendered_job
    assert rendered["spec"]["replicaSpecs"][0]["template"]["spec"]["volumes"] == [
        {"name": VOLUME, "persistentVolumeClaim": {"claimName": "team-ckpt"}}
    ]
    assert [(name, m["mountPath"], env["T9K_CHECKPOINT_DIR"]) for name, m, env in mounts(rendered)] == [
        ("restore", "/ckpt", "/ckpt"), ("m", "/ckpt", "/ckpt")]  # fmt: skip


def test_without_checkpoint_only_the_attempt_is_told():
    job = render(op(GenericJobOperator, command="python t.py"), try_number=3)
    [(_, mount, env)] = mounts(job)
    assert mount is None
    assert env == {"T9K_ATTEMPT": "3"}
    assert "terminationGracePeriodSeconds" not in pod_templates(job)[0]["spec"]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [({"checkpoint": {"volume": {"emptyDir": {}}}}, "deleted with its pod"),
     ({"checkpoint": "ckpt/../x"}, "may not leave the volume"),
     ({"checkpoint": ["ckpt"]}, "must be a claim name"),
     ({"termination_grace_period": -1}, "whole number of seconds"),
     ({"termination_grace_period": 1.5}, "whole number of seconds"),
     ({"checkpoint": "ckpt", "volume_mounts": [{"name": "d", "mountPath": "/t9k/checkpoint"}],
       "volumes": [{"name": "d", "emptyDir": {}}]}, None)],
    ids=["emptydir", "dot-dot", "a-list", "negative-grace", "fractional-grace", "mount-path-taken"],
)  # fmt: skip
def test_bad_input_fails_with_a_clear_error(kwargs, error):
    if error is not None:  # known when the DAG is parsed
        with pytest.raises(ValueError, match=error):
            op(GenericJobOperator, command="python t.py", **kwargs)
        return
    o = op(GenericJobOperator, command="python t.py", **kwargs)  # a clash with the pod options: when the job is built
    with pytest.raises(AirflowException, match="already mounts 'd' at /t9k/checkpoint"):
        render(o)


def test_a_bad_templated_checkpoint_fails_at_render():
    o = op(GenericJobOperator, command="python t.py", checkpoint="{{ params.claim }}")
    with pytest.raises(AirflowException, match="PersistentVolumeClaim name"):
        o.render_template_fields({"ti": FakeTI(), "params": {"claim": "Not_A_Claim"}})


CONTROLLED = [
    "GenericJob",
    "PyTorchTrainingJob",
    "TensorFlowTrainingJob",
    "XGBoostTrainingJob",
    "DeepSpeedJob",
    "MPIJob",
    "ColossalAIJob",
]


@pytest.mark.parametrize("kind", CONTROLLED)
def test_the_controllers_pods_keep_the_mount_and_learn_their_restart_count(kind):
    job = render(op(OPERATORS[kind], command="python t.py", replicas=2, checkpoint="ckpt", termination_grace_period=45))
    job["metadata"].update(uid="uid-j", generation=1)
    pods = {a.name: a.manifest for a in run(job).actions if isinstance(a, Create) and a.kind == "Pod"}
    assert len(pods) >= 2
    for name, pod in pods.items():
        containers = [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]
        # Every container reads the restart count from its own pod's annotation, which the plan writes.
        assert all(RESTART_COUNT_ENV in c["env"] for c in containers), name
        assert pod["metadata"]["annotations"]["batch.tensorstack.dev/restart-count"] == "0"
        if kind == "ColossalAIJob" and name.endswith("-launcher"):
            continue  # runs `colossalai run` only, from spec.launcher: the training runs in the workers
        assert pod["spec"]["terminationGracePeriodSeconds"] == 45, name
        mount = mounts(job)[0][1]  # the operator's, as submitted
        for c in containers:
            assert mount in c["volumeMounts"], (
                name,
                c,
            )
            assert {"name": "T9K_CHECKPOINT_DIR", "value": "/t9k/checkpoint"} in c["env"], (
                name,
                c,
            )


@pytest.mark.parametrize(
    ("status", "message", "pushed"),
    [("success", '{"loss": 0.01, "checkpoint": "step-000040.pt"}', "step-000040.pt"),
     ("failed", '{"checkpoint": "step-000012.pt", "error": "nan loss"}', "step-000012.pt"),
     ("success", '{"loss": 0.01}', None), ("success", "plain text", None)],
    ids=["success", "failed", "no-key", "not-json"],
)  # fmt: skip
def test_the_checkpoint_the_program_reports_becomes_xcom_checkpoint(status, message, pushed):
    c = {"ti": FakeTI()}
    ev = event(status, phase="Succeeded" if status == "success" else "Failed",
               state={"phase": "Succeeded" if status == "success" else "Failed", "result_message": message})  # fmt: skip
    complete(finishing_op(), c, ev)
    assert c["ti"].xcom.get("checkpoint") == pushed
    assert ("checkpoint" in c["ti"].xcom) is (pushed is not None)


def test_the_location_goes_to_xcom_for_a_downstream_task():
    o = op(
        GenericJobOperator, command="python t.py", checkpoint={"volume": {"nfs": {"server": "nas", "path": "/c"}}, "path": "r"}
    )
    c = {"ti": FakeTI(run_id="manual_1", map_index=2)}
    o._push_checkpoint_location(c)
    assert c["ti"].xcom["checkpoint_location"] == {
        "volume": {"nfs": {"server": "nas", "path": "/c"}},
        "sub_path": "r/dag/manual_1/train/map-2",
        "mount_path": "/t9k/checkpoint",
    }


def test_checkpoint_with_a_job_template_mounts_into_the_containers_the_job_names():
    from airflow_t9k.api import checkpoint as ckpt

    job = {"kind": "GenericJob", "spec": {"templateRef": {"name": "t"}, "replicaSpecs": [
        {"type": "a", "replicas": 1, "template": {"spec": {"containers": [{"name": "main"}]}}},
        {"type": "b", "replicas": 1}]}}  # fmt: skip
    found = ckpt.parse("claim/dir")
    with pytest.raises(ValueError, match="leaves its containers to its job template"):
        ckpt.apply(copy.deepcopy(job), attempt=1, checkpoint=found, directory="x")
    job["spec"]["replicaSpecs"][1]["template"] = {"spec": {"containers": [{"name": "main"}]}}
    ckpt.apply(job, attempt=1, checkpoint=found, directory="x")
    for r in job["spec"]["replicaSpecs"]:
        assert r["template"]["spec"]["containers"][0]["volumeMounts"][0]["subPath"] == "x"
    bare = {"kind": "GenericJob", "spec": {"templateRef": {"name": "t"}, "replicaSpecs": [{"type": "a", "replicas": 1}]}}
    ckpt.apply(bare, attempt=2)  # no checkpoint: a template for the attempt's env is made, nothing refused
    assert bare["spec"]["replicaSpecs"][0]["template"] == {"spec": {}}


# -- issue 44, item 5: each scope on a retry and on a Clear; the location of the job actually run ----
# (try number, max_tries) with retries=2: the first series is tries 1-3 (max_tries 2); a Clear after
# try 2 sets max_tries = 2 + 2, its series starting at try 3.
TRIES = {"first": (1, 2), "retry": (2, 2), "clear": (3, 4), "clear-retry": (4, 4)}


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        ("series", {"first": "", "retry": "", "clear": "/series-3", "clear-retry": "/series-3"}),
        ("run", {"first": "", "retry": "", "clear": "", "clear-retry": ""}),
        ("try", {"first": "/try-1", "retry": "/try-2", "clear": "/try-3", "clear-retry": "/try-4"}),
    ],
)
def test_each_scope_on_a_retry_and_on_a_clear(scope, expected):
    o = op(GenericJobOperator, command="python t.py", retries=2, checkpoint="ckpt/exp", checkpoint_scope=scope)
    base = "exp/dag/manual_1/train"
    got = {when: mounts(render(o, n, max_tries=m, run_id="manual_1"))[0][1]["subPath"] for when, (n, m) in TRIES.items()}
    assert got == {when: base + own for when, own in expected.items()}


def test_series_is_the_default_scope():
    assert op(GenericJobOperator, command="python t.py", checkpoint="ckpt").checkpoint_scope == "series"


def _ran(sub_path: str) -> dict:
    """A job as the API server returns it, mounting ``sub_path`` of the NFS checkpoint volume."""
    template = {"spec": {"volumes": [{"name": VOLUME, "nfs": {"server": "nas", "path": "/c"}}],
                         "containers": [{"name": "main", "volumeMounts": [{"name": VOLUME, "mountPath": "/ckpt",
                                                                           "subPath": sub_path}]}]}}  # fmt: skip
    return {"kind": "GenericJob", "metadata": {"name": "j", "namespace": "ml", "uid": "u1"},
            "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template}]}}  # fmt: skip


@pytest.mark.parametrize("scope", ["try", "series", "run"])
def test_the_location_pushed_is_the_one_of_the_job_actually_run(scope):
    """A try that reattaches to an earlier try's job reports that job's directory, not its own."""
    from tests.support.task import Store

    o = op(GenericJobOperator, command="python t.py", checkpoint={"volume": {"nfs": {"server": "nas", "path": "/c"}}},
           checkpoint_scope=scope)  # fmt: skip
    store = Store()
    c = {"ti": FakeTI(run_id="manual_1"), "task_state_store": store}
    c["ti"].try_number = 5
    o._push_checkpoint_location(c, _ran("dag/manual_1/train/try-1"))
    where = {"volume": {"nfs": {"server": "nas", "path": "/c"}}, "sub_path": "dag/manual_1/train/try-1", "mount_path": "/ckpt"}
    assert c["ti"].xcom["checkpoint_location"] == where
    assert store["t9k_checkpoint"]["location"] == where
    # A retry that delivers that job again after it was deleted: the location recorded with it.
    again = {"ti": FakeTI(run_id="manual_1"), "task_state_store": store}
    o._push_checkpoint_location(again, uid="u1")
    assert again["ti"].xcom["checkpoint_location"] == where


def test_a_job_without_the_mount_reports_no_location():
    o = op(GenericJobOperator, command="python t.py", checkpoint="ckpt")
    c = {"ti": FakeTI()}
    job = _ran("x")
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["volumes"] = []
    o._push_checkpoint_location(c, job)
    assert "checkpoint_location" not in c["ti"].xcom


@pytest.mark.parametrize(
    ("before", "image", "expected"),
    [
        (None, "img:2", ""),  # the task's first job
        ("same", "img:1", ""),  # a Clear of the same job resumes, as "run" always did
        ("other", "img:2", "/spec-"),  # another configuration: a directory of its own
        ("no-digest", "img:2", ""),  # the job before was an older version's
        ("same-config-dir", "img:2", "/spec-"),  # that configuration's own, found again
    ],
)  # fmt: skip
def test_run_scope_never_resumes_another_configurations_checkpoints(before, image, expected):
    from airflow_t9k.api.specdigest import SPEC_DIGEST
    from tests.support.task import Store

    def rendered(img):
        o = op(GenericJobOperator, image=img, command="python t.py", checkpoint="ckpt/exp", checkpoint_scope="run")
        return o, render(o, run_id="manual_1")

    o, job = rendered(image)
    base = "exp/dag/manual_1/train"
    store = Store()
    earlier = rendered("img:1")[1]["metadata"]["annotations"][SPEC_DIGEST]
    if before == "same":
        store["t9k_checkpoint"] = {"uid": "u0", "digest": earlier, "location": {"sub_path": base}}
    elif before == "other":
        store["t9k_checkpoint"] = {"uid": "u0", "digest": earlier, "location": {"sub_path": base}}
    elif before == "no-digest":
        store["t9k_checkpoint"] = {"uid": "u0", "digest": None, "location": {"sub_path": base}}
    elif before == "same-config-dir":
        digest = job["metadata"]["annotations"][SPEC_DIGEST]
        store["t9k_checkpoint"] = {"uid": "u0", "digest": digest, "location": {"sub_path": f"{base}/spec-{digest[3:15]}"}}
    o._checkpoint_for_new_job(job, store)
    sub_path = mounts(job)[0][1]["subPath"]
    assert sub_path.startswith(base + expected)
    if expected:
        assert sub_path == f"{base}/spec-{job['metadata']['annotations'][SPEC_DIGEST][3:15]}"
    else:
        assert sub_path == base
