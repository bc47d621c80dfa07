"""Operators without a cluster: names, labels, rendering, typed conveniences, completion events."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
import yaml
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowException

from airflow_t9k.operators.job import T9kJobOperator, job_name
from airflow_t9k.kinds.registry import KINDS
from airflow_t9k.operators.kinds import (
    OPERATORS,
    AscendJobOperator,
    ColossalAIJobOperator,
    GenericJobOperator,
    PyTorchTrainingJobOperator,
)

DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


class FakeTI:
    """Just what the operator reads from and writes to the task instance."""

    def __init__(self, dag_id="dag", run_id="manual__2026-11-25T10:00:00+00:00", task_id="train", map_index=-1):
        self.dag_id, self.run_id, self.task_id, self.map_index, self.try_number = dag_id, run_id, task_id, map_index, 1
        self.xcom: dict[str, object] = {}

    def xcom_push(self, key, value):
        self.xcom[key] = value


def ctx(**kw):
    return {"ti": FakeTI(**kw)}


def op(cls=GenericJobOperator, **kw):
    kw.setdefault("task_id", "train")
    kw.setdefault("namespace", "ml")
    if cls is not T9kJobOperator and "job" not in kw:
        kw.setdefault("image", "img")
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        return cls(**kw)


@pytest.mark.parametrize(
    ("args", "other"),
    [
        (("d", "r", "t", -1), ("d", "r", "t", 0)),
        (("d", "r", "t", -1), ("d", "r2", "t", -1)),
        (("d", "r", "t", -1), ("d2", "r", "t", -1)),
        (("d", "r", "t", -1), ("d", "r", "t2", -1)),
    ],
    ids=["map-index", "run", "dag", "task"],
)
def test_job_name_is_deterministic_and_distinct(args, other):
    assert job_name(*args) == job_name(*args)
    assert job_name(*args) != job_name(*other)


@pytest.mark.parametrize("task_id", ["train", "Train_Model.v2", "0-leading-digits", "x" * 200, "___", "group.sub_task"])
def test_job_name_is_a_short_dns_label(task_id):
    name = job_name("dag", "manual__2026:+00", task_id, 3)
    assert DNS_1035.match(name) and len(name) <= 35  # leaves room for -<type>-<rank> Service names


def test_render_labels_and_annotates_the_job_with_its_task():
    job = op().render_job(ctx(run_id="scheduled__2026-11-25T00:00:00+00:00", map_index=2))
    labels, annotations = job["metadata"]["labels"], job["metadata"]["annotations"]
    assert labels["airflow-t9k.io/run-id"] == "scheduled__2026-11-25T00_00_00_00_00"
    assert labels["airflow-t9k.io/map-index"] == "2" and labels["airflow-t9k.io/try-number"] == "1"
    assert annotations["airflow-t9k.io/run-id"] == "scheduled__2026-11-25T00:00:00+00:00"
    assert all(re.match(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", v) for v in labels.values())
    assert job["metadata"]["namespace"] == "ml"
    assert job["apiVersion"] == "batch.tensorstack.dev/v1beta1"


def test_explicit_name_in_the_job_is_kept():
    job = op(T9kJobOperator, job={"kind": "GenericJob", "metadata": {"name": "mine"}, "spec": {}}).render_job(ctx())
    assert job["metadata"]["name"] == "mine"


def test_yaml_string_job_is_parsed():
    text = yaml.safe_dump({"kind": "GenericJob", "spec": {"replicaSpecs": []}})
    assert op(T9kJobOperator, job=text).render_job(ctx())["kind"] == "GenericJob"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"job": {"kind": "GenericJob"}, "image": "x"}, "either job= or the conveniences"),
        ({"image": "x", "machine_type": "2U8G"}, "aUbGcP"),
        ({"image": "x", "machine_type": "1U1G0P", "container_resources": {}}, "machine_type= or container_resources="),
        ({"image": "x", "replicas": 0}, "positive integer"),
        ({"image": "x", "delete_on_finish": "sometimes"}, "delete_on_finish"),
        ({"image": "x", "on_kill_action": "ignore"}, "on_kill_action"),
        ({"image": None}, "needs job= or image="),
    ],
)
def test_bad_arguments_fail_at_dag_parse(kwargs, error):
    with pytest.raises(ValueError, match=error):
        op(**kwargs)


def test_wrong_kind_for_a_typed_operator_is_an_error():
    with pytest.raises(AirflowException, match="submits PyTorchTrainingJob"):
        op(PyTorchTrainingJobOperator, job={"kind": "GenericJob", "spec": {}}).render_job(ctx())


@pytest.mark.parametrize("kind", sorted(OPERATORS))
def test_every_kind_operator_builds_a_job_of_its_kind(kind):
    job = op(OPERATORS[kind], image="img", command=["python", "train.py"], replicas=2, machine_type="2U8G1P",
             pod_annotations={"a": "b"}).render_job(ctx())  # fmt: skip
    assert job["kind"] == kind
    text = yaml.safe_dump(job)
    assert "image: img" in text and "nvidia.com/gpu: '1'" in text and "a: b" in text


def test_pytorch_operator_spec():
    spec = op(PyTorchTrainingJobOperator, command=["python", "t.py"], replicas=3, env={"A": "1"}).render_job(ctx())["spec"]
    rs = spec["replicaSpecs"][0]
    assert (rs["type"], rs["replicas"], rs["restartPolicy"]) == ("worker", 3, "ExitCode")
    c = rs["template"]["spec"]["containers"][0]
    assert (c["name"], c["command"], c["env"]) == ("pytorch", ["python", "t.py"], [{"name": "A", "value": "1"}])


def test_colossalai_operator_spec():
    spec = op(ColossalAIJobOperator, command=["train.py"], args=["--e", "3"], replicas=2).render_job(ctx())["spec"]
    assert spec["launcher"] == {"image": "img"}
    assert spec["worker"]["command"] == ["train.py", "--e", "3"]
    assert spec["worker"]["template"]["spec"]["containers"][0]["name"] == "worker"


def test_only_the_job_field_is_read_as_a_template_file(tmp_path):
    (tmp_path / "job.yaml").write_text("kind: GenericJob\nspec: {workers: '{{ params.n }}'}\n")
    with DAG("d", start_date=datetime(2026, 1, 1), schedule=None, template_searchpath=[str(tmp_path)], params={"n": 4}):
        t = T9kJobOperator(task_id="t", job="job.yaml")
        typed = GenericJobOperator(task_id="g", image="i", command=["deepspeed", "--deepspeed_config=ds.json"])
    t.resolve_template_files()
    typed.resolve_template_files()
    assert t.job.startswith("kind: GenericJob")
    assert typed.command == ["deepspeed", "--deepspeed_config=ds.json"]
    t.render_template_fields({"params": {"n": 4}})
    typed.render_template_fields({"params": {}})
    assert yaml.safe_load(t.job)["spec"]["workers"] == "4"
    assert typed.command == ["deepspeed", "--deepspeed_config=ds.json"]


def event(status, **extra):
    base = {"status": status, "kind": "GenericJob", "name": "j", "namespace": "ml", "uid": "u", "phase": None,
            "message": "m", "state": {"phase": None, "message": "", "reason": "", "aggregate": {}, "failed_replicas": []}, "logs": {}}  # fmt: skip
    base.update(extra)
    return base


def test_execute_complete_success_returns_identity_and_pushes_phase():
    c = ctx()
    ev = event("success", phase="Succeeded", state={"phase": "Succeeded", "message": "done", "aggregate": {"succeeded": 2}})
    out = op().execute_complete(c, ev)
    assert out["phase"] == "Succeeded" and out["uid"] == "u"
    assert c["ti"].xcom["phase"] == "Succeeded"
    assert c["ti"].xcom["summary"] == "phase Succeeded (succeeded 2): done"


@pytest.mark.parametrize("status", ["failed", "error"])
def test_execute_complete_failure_names_replicas_and_log_tails(status):
    ev = event(status, phase="Failed", message='phase Failed: The job is failed with rule: {"worker": [1]}',
               state={"phase": "Failed", "failed_replicas": ["j-worker-1"]}, logs={"j-worker-1": "Traceback: boom"})  # fmt: skip
    with pytest.raises(AirflowException) as exc:
        op().execute_complete(ctx(), ev)
    text = str(exc.value)
    assert 'rule: {"worker": [1]}' in text and "failed replicas: j-worker-1" in text and "Traceback: boom" in text


def test_dry_run_prints_the_rendered_job(capsys):
    op(PyTorchTrainingJobOperator, command=["python", "t.py"], machine_type="1U1G1P").dry_run()
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["kind"] == "PyTorchTrainingJob"
    assert printed["metadata"]["name"] == job_name("dag", "manual__dry-run", "train", -1)
    assert printed["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"


@pytest.mark.parametrize(
    ("template", "expected"),
    [("", "https://k8s:6443/apis/batch.tensorstack.dev/v1beta1/namespaces/ml/pytorchtrainingjobs/j"),
     ("https://t9k.example/{namespace}/{plural}/{name}?uid={uid}", "https://t9k.example/ml/pytorchtrainingjobs/j?uid=u")],
    ids=["api-path", "dashboard-template"],
)  # fmt: skip
def test_job_link(template, expected):
    from airflow_t9k.links import job_url

    ident = {"kind": "PyTorchTrainingJob", "name": "j", "namespace": "ml", "uid": "u", "server": "https://k8s:6443"}
    assert job_url(ident, template) == expected


@pytest.mark.parametrize(("framework", "leader"), [("pytorch", "Master"), ("tensorflow", "Chief"), ("mindspore", "Scheduler")])
def test_ascend_operator_builds_a_job_the_controller_accepts(framework, leader):
    job = op(AscendJobOperator, framework=framework, command=["bash", "t.sh"], replicas=3, npus=2,
             restart_policy="ExitCode").render_job(ctx())  # fmt: skip
    assert job["apiVersion"] == "mindxdl.gitee.com/v1" and job["metadata"]["labels"]["framework"] == framework
    specs = job["spec"]["replicaSpecs"]
    assert {t: s["replicas"] for t, s in specs.items()} == {leader: 1, "Worker": 2}
    container = specs["Worker"]["template"]["spec"]["containers"][0]
    assert container["name"] == "ascend" and container["resources"]["limits"] == {"huawei.com/Ascend910": 2}
    KINDS["AscendJob"].validate({**job, "metadata": {**job["metadata"], "uid": "u"}})  # raises InvalidSpec if not


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [({"framework": "jax"}, "framework must be one of"), ({"replicas": 1}, "at least 2"), ({"npus": -1}, "non-negative")],
)
def test_ascend_operator_bad_arguments(kwargs, error):
    with pytest.raises(ValueError, match=error):
        op(AscendJobOperator, **kwargs)


def test_pause_on_kill_is_refused_for_a_kind_without_pause_mode():
    with pytest.raises(AirflowException, match="AscendJob does not have"):
        op(AscendJobOperator, replicas=2, on_kill_action="pause").render_job(ctx())
    assert op(on_kill_action="pause").render_job(ctx())["kind"] == "GenericJob"
