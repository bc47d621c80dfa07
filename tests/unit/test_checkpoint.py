"""``checkpoint=`` as data: the forms it takes, the errors it gives, this task's directory, and
what it does to every pod template of every job layout (airflow_t9k/api/checkpoint.py)."""

from __future__ import annotations

import copy

import pytest

from airflow_t9k.api import checkpoint as ckpt

PVC = {"persistentVolumeClaim": {"claimName": "ckpt"}}


@pytest.mark.parametrize(
    ("given", "volume", "path", "mount"),
    [
        ("ckpt", PVC, "", "/t9k/checkpoint"),
        ("ckpt/exp/a", PVC, "exp/a", "/t9k/checkpoint"),
        ({"claim": "ckpt", "path": "/exp/"}, None, None, None),  # absolute: an error, below
        ({"claim": "ckpt", "path": "exp//./a/"}, PVC, "exp/a", "/t9k/checkpoint"),
        ({"claim": "ckpt", "mount_path": "/ckpt/"}, PVC, "", "/ckpt"),
        ({"volume": {"nfs": {"server": "nas", "path": "/x"}}, "path": "p"}, {"nfs": {"server": "nas", "path": "/x"}}, "p",
         "/t9k/checkpoint"),
        # A whole Volume (what V1Volume becomes): its name is replaced by ours.
        ({"volume": {"name": "mine", "hostPath": {"path": "/data"}}}, {"hostPath": {"path": "/data"}}, "", "/t9k/checkpoint"),
    ],
    ids=["claim", "claim-and-dir", "absolute-path", "path-normalised", "mount-path", "nfs", "whole-volume"],
)  # fmt: skip
def test_forms(given, volume, path, mount):
    if volume is None:
        with pytest.raises(ValueError, match="relative to its root"):
            ckpt.parse(given)
        return
    got = ckpt.parse(given)
    assert (got.volume, got.path, got.mount_path) == (volume, path, mount)


@pytest.mark.parametrize(
    ("given", "error"),
    [
        (42, "must be a claim name"),
        ("Bad_Claim", "PersistentVolumeClaim name"),
        ({}, "exactly one of 'claim'"),
        ({"claim": "a", "volume": {"nfs": {}}}, "exactly one of 'claim'"),
        ({"claim": "a", "size": "1Gi"}, r"unknown keys \['size'\]"),
        ({"claim": "a", "path": "x/../../etc"}, r"may not leave the volume"),
        ({"claim": "a", "mount_path": "relative"}, "absolute path"),
        ({"claim": "a", "mount_path": "/"}, "absolute path"),
        ({"volume": {"emptyDir": {}}}, "deleted with its pod"),
        ({"volume": {"configMap": {"name": "c"}}}, "read-only"),
        ({"volume": {"nfs": {}, "hostPath": {}}}, "exactly one volume source"),
        ({"volume": {"name": "only-a-name"}}, "exactly one volume source"),
        ({"volume": "pvc"}, "must be a volume source"),
        ({"volume": {"hostPath": "/data"}}, "must be a mapping"),
    ],
    ids=["not-a-form", "bad-claim", "neither", "both", "unknown-key", "dot-dot", "relative-mount", "root-mount", "emptydir",
         "configmap", "two-sources", "no-source", "source-not-a-dict", "source-spec-not-a-dict"],
)  # fmt: skip
def test_bad_input_says_what_is_wrong(given, error):
    with pytest.raises(ValueError, match=error):
        ckpt.parse(given)


RUN = "scheduled__2026-11-25T00:00:00+00:00"


def test_task_dir_is_readable_and_has_no_try_number():
    assert ckpt.task_dir("dag", "manual_1", "train") == "dag/manual_1/train"
    assert ckpt.task_dir("dag", "manual_1", "train", 3) == "dag/manual_1/train/map-3"
    # ':' and '+' are made safe, and the part then carries a digest of what it was.
    part = ckpt.task_dir("dag", RUN, "train").split("/")[1]
    assert part.startswith("scheduled__2026-11-25T00_00_00_00_00-")
    assert len(part) == len("scheduled__2026-11-25T00_00_00_00_00-") + 8


@pytest.mark.parametrize(
    "other",
    [("dag2", RUN, "train", -1), ("dag", RUN.replace("00:00:00", "00:00:01"), "train", -1), ("dag", RUN, "eval", -1),
     ("dag", RUN, "train", 0), ("dag", RUN, "train", 1),
     # made the same by sanitising; the digest keeps them apart
     ("dag", RUN.replace(":", "_"), "train", -1)],
    ids=["dag", "run", "task", "map-0", "map-1", "sanitised-alike"],
)  # fmt: skip
def test_task_dirs_differ_where_the_task_differs(other):
    assert ckpt.task_dir("dag", RUN, "train", -1) != ckpt.task_dir(*other)


@pytest.mark.parametrize("text", [".", "..", "a/b", "x" * 300])
def test_a_part_is_always_one_safe_path_component(text):
    parts = ckpt.task_dir(text, "r", "t").split("/")
    assert len(parts) == 3
    assert parts[0] not in (".", "..")
    assert len(parts[0]) <= ckpt.PART_LIMIT + 9


def _t(*containers: str, init: str | None = None) -> dict:
    spec: dict = {"containers": [{"name": c, "image": "img"} for c in containers]}
    if init:
        spec["initContainers"] = [{"name": init, "image": "img"}]
    return {"spec": spec}


LAYOUTS = {
    "replicaSpecs-list": {"kind": "PyTorchTrainingJob", "spec": {"replicaSpecs": [
        {"type": "master", "template": _t("pytorch", init="fetch")}, {"type": "worker", "template": _t("pytorch", "sidecar")}]}},
    "replicaSpecs-map": {"kind": "AscendJob", "spec": {"replicaSpecs": {"Master": {"template": _t("ascend")},
                                                                       "Worker": {"template": _t("ascend")}}}},
    "worker": {"kind": "MPIJob", "spec": {"worker": {"replicas": 2, "template": _t("mpi-worker")}}},
    "jobTemplate": {"kind": "BeamJob", "spec": {"flinkClusterTemplate": {"spec": {}},
                                                "jobTemplate": {"spec": {"template": _t("submit-job")}}}},
}  # fmt: skip


@pytest.mark.parametrize(
    ("layout", "templates"), [("replicaSpecs-list", 2), ("replicaSpecs-map", 2), ("worker", 1), ("jobTemplate", 1)]
)
def test_apply_reaches_every_container_of_every_template(layout, templates):
    job = copy.deepcopy(LAYOUTS[layout])
    c = ckpt.parse({"claim": "ckpt", "path": "exp"})
    ckpt.apply(job, attempt=2, checkpoint=c, directory="exp/d/r/t", grace_seconds=90)
    found = ckpt.pod_templates(job)
    assert len(found) == templates
    for t in found:
        spec = t["spec"]
        assert spec["terminationGracePeriodSeconds"] == 90
        assert spec["volumes"] == [{"name": "airflow-t9k-checkpoint", **PVC}]
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            assert container["volumeMounts"] == [
                {"name": "airflow-t9k-checkpoint", "mountPath": "/t9k/checkpoint", "subPath": "exp/d/r/t"}
            ]
            assert {e["name"]: e["value"] for e in container["env"]} == {
                "T9K_ATTEMPT": "2",
                "T9K_CHECKPOINT_DIR": "/t9k/checkpoint",
            }


def test_apply_without_checkpoint_only_tells_the_attempt():
    job = copy.deepcopy(LAYOUTS["worker"])
    job["spec"]["worker"]["template"]["spec"]["containers"][0]["env"] = [{"name": "T9K_ATTEMPT", "value": "stale"}]
    ckpt.apply(job, attempt=3)
    spec = job["spec"]["worker"]["template"]["spec"]
    assert spec["containers"][0]["env"] == [{"name": "T9K_ATTEMPT", "value": "3"}]  # ours replaces a stale one
    assert "volumes" not in spec
    assert "terminationGracePeriodSeconds" not in spec


@pytest.mark.parametrize(
    ("change", "error"),
    [(lambda s: s["containers"][0].update(volumeMounts=[{"name": "x", "mountPath": "/t9k/checkpoint/"}]), "already mounts 'x'"),
     (lambda s: s.update(volumes=[{"name": "airflow-t9k-checkpoint", "emptyDir": {}}]), "already has a volume named")],
    ids=["mount-path-taken", "volume-name-taken"],
)  # fmt: skip
def test_apply_refuses_to_shadow_what_the_template_has(change, error):
    job = copy.deepcopy(LAYOUTS["worker"])
    change(job["spec"]["worker"]["template"]["spec"])
    with pytest.raises(ValueError, match=error):
        ckpt.apply(job, attempt=1, checkpoint=ckpt.parse("ckpt"), directory="d")


def test_apply_to_a_job_without_templates_is_an_error_only_when_something_is_asked():
    ckpt.apply({"kind": "X", "spec": {}}, attempt=1)
    with pytest.raises(ValueError, match="found no pod template"):
        ckpt.apply({"kind": "X", "spec": {}}, attempt=1, grace_seconds=5)


@pytest.mark.parametrize(
    ("result", "reported"),
    [({"loss": 0.1, "checkpoint": "epoch-0004.pt"}, "epoch-0004.pt"), ({"checkpoint": {"step": 40}}, {"step": 40}),
     ({"loss": 0.1}, None), ("checkpoint", None), (None, None), ([1], None)],
)  # fmt: skip
def test_reported_checkpoint_is_the_results_checkpoint_key(result, reported):
    assert ckpt.reported(result) == reported


@pytest.mark.parametrize(
    ("template", "kept"),
    [({"spec": {"containers": [{"name": "m", "env": "A=1"}]}}, lambda s: s["containers"][0]["env"] == "A=1"),
     ({"spec": {"containers": "m"}}, lambda s: s["containers"] == "m"),
     ({"spec": {"containers": [{"name": "m", "volumeMounts": "x"}]}}, lambda s: s["containers"][0]["volumeMounts"] == "x"),
     ({"spec": "x"}, lambda s: s == "x")],
    ids=["env-string", "containers-string", "mounts-string", "spec-string"],
)  # fmt: skip
def test_a_malformed_template_is_left_for_the_api_server_to_name(template, kept):
    # The API server refuses it with the field's path (tests/integration/test_podtemplate_schema.py);
    # building the job must not fail first with a Python error.
    job = {"kind": "GenericJob", "spec": {"replicaSpecs": [{"type": "worker", "template": template}]}}
    ckpt.apply(job, attempt=1, checkpoint=ckpt.parse("ckpt"), directory="d", grace_seconds=5)
    assert kept(job["spec"]["replicaSpecs"][0]["template"]["spec"])


@pytest.mark.parametrize(
    ("given", "warned"),
    [
        ({"volume": {"hostPath": {"path": "/data"}}}, True),  # issue 29, 8: not isolated by namespace
        ({"volume": {"nfs": {"server": "nas", "path": "/export"}}}, False),
        ("claim/dir", False),
    ],
)
def test_a_host_path_checkpoint_is_warned_about(given, warned):
    from airflow_t9k.api.checkpoint import warning

    why = warning(ckpt.parse(given))
    assert (why is not None) is warned
    if warned:
        assert "'/data'" in why
        assert "not isolated by namespace" in why
        assert "PersistentVolumeClaim" in why


# -- issue 28, point 9: the program knows which re-run it is, and the DAG author picks the scope --
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_rerun_number_reaches_every_container(layout):
    job = copy.deepcopy(LAYOUTS[layout])
    ckpt.set_env(job, ckpt.ENV_RERUN, "2")
    for t in ckpt.pod_templates(job):
        for container in [*t["spec"].get("initContainers", []), *t["spec"]["containers"]]:
            assert {"name": "T9K_RERUN", "value": "2"} in container["env"]


def test_a_try_scoped_directory_is_the_tries_own_inside_the_tasks():
    c = ckpt.parse({"claim": "ckpt", "path": "exp"})
    run = ckpt.sub_path(c, "d", "r", "t")
    assert ckpt.sub_path(c, "d", "r", "t", try_number=3) == f"{run}/try-3"
    assert ckpt.sub_path(c, "d", "r", "t", -1, None) == run


def test_checkpoint_scope_is_checked_and_picks_the_directory():
    from tests.unit.airflow.test_operators import ctx, op

    with pytest.raises(ValueError, match="checkpoint_scope must be one of"):
        op(checkpoint="ckpt", checkpoint_scope="forever")
    c = ctx()
    c["ti"].try_number = 4
    mounts = {
        scope: op(checkpoint="ckpt/exp", checkpoint_scope=scope).render_job(c)["spec"]["replicaSpecs"][0]["template"]["spec"][
            "containers"
        ][0]["volumeMounts"][0]["subPath"]
        for scope in ckpt.SCOPES
    }
    assert mounts["try"] == f"{mounts['run']}/try-4"


# -- issue 44, item 5: the series scope, and the location read back from a job -------------------
@pytest.mark.parametrize(
    ("scope", "try_number", "series_start", "own"),
    [("series", 1, 1, ""), ("series", 3, 1, ""), ("series", 4, 4, "series-4"), ("series", 5, 4, "series-4"),
     ("run", 4, 4, ""), ("try", 1, 1, "try-1"), ("try", 5, 4, "try-5")],
    ids=["series-first", "series-retry", "series-clear", "series-clear-retry", "run-clear", "try-first", "try-clear-retry"],
)  # fmt: skip
def test_the_scopes_directory_inside_the_tasks(scope, try_number, series_start, own):
    assert ckpt.scope_dir(scope, try_number, series_start) == own
    c = ckpt.parse("ckpt/exp")
    assert ckpt.sub_path(c, "d", "r", "t", own=own) == "/".join(p for p in ("exp/d/r/t", own) if p)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_location_is_read_back_from_the_job_and_can_be_moved(layout):
    job = copy.deepcopy(LAYOUTS[layout])
    c = ckpt.parse({"volume": {"nfs": {"server": "nas", "path": "/x"}}, "path": "exp", "mount_path": "/ckpt"})
    ckpt.apply(job, attempt=1, checkpoint=c, directory="exp/d/r/t/series-4")
    assert ckpt.location_in(job) == ckpt.location(c, "exp/d/r/t/series-4")
    ckpt.set_sub_path(job, "exp/d/r/t/spec-0123456789ab")
    assert ckpt.location_in(job)["sub_path"] == "exp/d/r/t/spec-0123456789ab"
    assert ckpt.location_in(LAYOUTS[layout]) is None  # no checkpoint mounted
    assert ckpt.location_in(None) is None
