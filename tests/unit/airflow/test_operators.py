"""Operators without a cluster: names, labels, rendering, typed conveniences, completion events."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
import yaml
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowException, AirflowTaskTimeout

from airflow_t9k.kinds.registry import KINDS
from airflow_t9k.operators.job import T9kJobOperator, job_name
from airflow_t9k.operators.kinds import (
    OPERATORS,
    AscendJobOperator,
    ColossalAIJobOperator,
    GenericJobOperator,
    PyTorchTrainingJobOperator,
)

ATTEMPT = {"name": "T9K_ATTEMPT", "value": "1"}  # every operator sets it (docs/checkpoints.md)
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
    assert DNS_1035.match(name)
    assert len(name) <= 35


def test_render_labels_and_annotates_the_job_with_its_task():
    job = op().render_job(ctx(run_id="scheduled__2026-11-25T00:00:00+00:00", map_index=2))
    labels, annotations = job["metadata"]["labels"], job["metadata"]["annotations"]
    assert labels["airflow-t9k.io/run-id"] == "scheduled__2026-11-25T00_00_00_00_00"
    assert labels["airflow-t9k.io/map-index"] == "2"
    assert labels["airflow-t9k.io/try-number"] == "1"
    assert annotations["airflow-t9k.io/run-id"] == "scheduled__2026-11-25T00:00:00+00:00"
    assert all(re.match(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", v) for v in labels.values())
    assert job["metadata"]["namespace"] == "ml"
    assert job["apiVersion"] == "batch.tensorstack.dev/v1beta1"


@pytest.mark.parametrize(
    ("name_suffix", "run_ids", "expected"),
    [
        (True, ("scheduled__1", "scheduled__2"), lambda run: job_name("dag", run, "train", -1, base="mine")),
        (False, ("scheduled__1", "scheduled__2"), lambda run: "mine"),
    ],
    ids=["suffixed-per-run", "as-given"],
)
def test_explicit_name_gets_a_per_run_suffix_unless_told_not_to(name_suffix, run_ids, expected):
    o = op(T9kJobOperator, job={"kind": "GenericJob", "metadata": {"name": "mine"}, "spec": {}}, name_suffix=name_suffix)
    names = [o.render_job(ctx(run_id=run))["metadata"]["name"] for run in run_ids]
    assert names == [expected(run) for run in run_ids]
    if name_suffix:
        assert names[0] != names[1]
        assert all(n.startswith("mine-") and DNS_1035.match(n) for n in names)


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
        ({"image": None}, "needs job=, image=, or a job template"),
        ({"image": "x", "template": "a", "cluster_template": "b"}, "not both"),
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
    assert "image: img" in text
    assert "nvidia.com/gpu: '1'" in text
    assert "a: b" in text


def test_pytorch_operator_spec():
    spec = op(PyTorchTrainingJobOperator, command=["python", "t.py"], replicas=3, env={"A": "1"}).render_job(ctx())["spec"]
    rs = spec["replicaSpecs"][0]
    assert (rs["type"], rs["replicas"], rs["restartPolicy"]) == ("worker", 3, "ExitCode")
    c = rs["template"]["spec"]["containers"][0]
    # T9K_ATTEMPT: every operator tells the program its try (docs/checkpoints.md).
    assert (c["name"], c["command"], c["env"]) == (
        "pytorch",
        ["python", "t.py"],
        [{"name": "A", "value": "1"}, {"name": "T9K_ATTEMPT", "value": "1"}],
    )


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
            "message": "m", "state": {"phase": None, "message": "", "reason": "", "aggregate": {}, "failed_replicas": []},
            "logs": {}}  # fmt: skip
    base.update(extra)
    return base


class RecordingHook:
    """Records the writes _finish makes; these tests are about the task's outcome, not the API."""

    def __init__(self, current=None):
        self.calls: list[tuple] = []
        # What a GET of the job returns: by default it still runs.
        self.current = current if current is not None else {"kind": "GenericJob",
                                                            "metadata": {"name": "j", "namespace": "ml", "uid": "u"},
                                                            "status": {"phase": "Running"}}  # fmt: skip

    def get_job(self, kind, name, namespace):
        return self.current or None

    def patch_job(self, kind, name, namespace, patch):
        self.calls.append(("patch", name, patch))
        return {"metadata": {"name": name, "uid": "u"}}

    def delete_job(self, kind, name, namespace, uid=None):
        self.calls.append(("delete", name, uid))
        return True


def finishing_op(current=None, **kw):
    o = op(**kw)
    o._hook = RecordingHook(current)
    return o


def complete(o, context, ev):
    """execute_complete as the task runs it: an event other than success must fail the task."""
    if ev["status"] == "success":
        return o.execute_complete(context, ev)
    with pytest.raises(AirflowException):
        o.execute_complete(context, ev)
    return None


def test_execute_complete_success_returns_identity_and_pushes_phase():
    c = ctx()
    ev = event("success", phase="Succeeded", state={"phase": "Succeeded", "message": "done", "aggregate": {"succeeded": 2}})
    o = finishing_op()
    out = o.execute_complete(c, ev)
    # A success is marked delivered, last of what the try delivers (api/rerun.py).
    assert o.hook.calls == [("patch", "j", {"metadata": {"uid": "u", "annotations": {"airflow-t9k.io/delivered-by-try": "1"}}})]
    assert out["phase"] == "Succeeded"
    assert out["uid"] == "u"
    assert c["ti"].xcom["phase"] == "Succeeded"
    assert c["ti"].xcom["summary"] == "phase Succeeded (succeeded 2): done"


@pytest.mark.parametrize("status", ["failed", "error"])
def test_execute_complete_failure_names_replicas_and_log_tails(status):
    ev = event(status, phase="Failed", message='phase Failed: The job is failed with rule: {"worker": [1]}',
               state={"phase": "Failed", "failed_replicas": ["j-worker-1"]}, logs={"j-worker-1": "Traceback: boom"})  # fmt: skip
    with pytest.raises(AirflowException) as exc:
        finishing_op().execute_complete(ctx(), ev)
    text = str(exc.value)
    assert 'rule: {"worker": [1]}' in text
    assert "failed replicas: j-worker-1" in text
    assert "Traceback: boom" in text


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
    assert job["apiVersion"] == "mindxdl.gitee.com/v1"
    assert job["metadata"]["labels"]["framework"] == framework
    specs = job["spec"]["replicaSpecs"]
    assert {t: s["replicas"] for t, s in specs.items()} == {leader: 1, "Worker": 2}
    container = specs["Worker"]["template"]["spec"]["containers"][0]
    assert container["name"] == "ascend"
    assert container["resources"]["limits"] == {"huawei.com/Ascend910": 2}
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


# -- templating: only a top-level job= string is a file (bug 5) -------------------------------
def test_strings_inside_a_job_dict_are_never_read_as_template_files():
    job = {"kind": "GenericJob", "spec": {"args": ["--deepspeed_config=ds.json", "--conf=c.yaml", "{{ params.n }}"]}}
    with DAG("d", start_date=datetime(2026, 1, 1), schedule=None, params={"n": 4}):
        t = T9kJobOperator(task_id="t", job=job)
    t.resolve_template_files()
    t.render_template_fields({"params": {"n": 4}})
    assert t.job["spec"]["args"] == ["--deepspeed_config=ds.json", "--conf=c.yaml", "4"]


# -- command strings (bug 8) ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("command", "args", "expected_command", "expected_args"),
    [
        ("python train.py", None, ["python", "train.py"], None),
        ("python train.py --name 'my run'", "--lr 0.1", ["python", "train.py", "--name", "my run"], ["--lr", "0.1"]),
        (["python", "train.py"], ["--epochs", 3], ["python", "train.py"], ["--epochs", "3"]),
        ("sh -c 'echo $(rank)'", None, ["sh", "-c", "echo $(rank)"], None),
    ],
    ids=["string", "quoted", "list", "shell-c"],
)
def test_a_command_string_is_split_like_a_shell(command, args, expected_command, expected_args):
    c = op(PyTorchTrainingJobOperator, command=command, args=args).render_job(ctx())["spec"]["replicaSpecs"][0]["template"][
        "spec"
    ]["containers"][0]
    assert c["command"] == expected_command
    assert c.get("args") == expected_args


def test_a_command_string_goes_whole_into_launcher_kinds():
    spec = op(ColossalAIJobOperator, command="train.py --e 3", args="--lr 0.1").render_job(ctx())["spec"]
    assert spec["worker"]["command"] == ["train.py", "--e", "3", "--lr", "0.1"]


@pytest.mark.parametrize(("command", "error"), [("python 'unclosed", "cannot be split"), (42, "list of strings or one string")])
def test_a_bad_command_fails_at_dag_parse(command, error):
    with pytest.raises(ValueError, match=error):
        op(command=command)


def test_dry_run_reads_the_template_file_and_renders_like_a_run(capsys, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    root = __import__("pathlib").Path(__file__).resolve().parents[3]
    monkeypatch.syspath_prepend(str(root))
    bag = DagBag(dag_folder=str(root / "dags_examples" / "example_yaml_and_sensor.py"))
    capsys.readouterr()  # the DagBag's own log lines
    bag.dags["example_yaml_and_sensor"].get_task("submit").dry_run()
    printed = yaml.safe_load(capsys.readouterr().out)
    worker = printed["spec"]["replicaSpecs"][0]
    assert printed["kind"] == "GenericJob"
    assert worker["replicas"] == 2
    assert worker["template"]["spec"]["containers"][0]["command"][-1] == "manual__dry-run"


def test_dry_run_shows_xcom_placeholders(capsys):
    op(command="python t.py --data {{ ti.xcom_pull(task_ids='prepare')['path'] }}").dry_run()
    printed = yaml.safe_load(capsys.readouterr().out)
    assert (
        printed["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["command"][-1]
        == "<xcom:prepare:return_value.path>"
    )


# -- pod-level options ------------------------------------------------------------------------
def _templates(job):
    """Every pod template the operator built, whatever the kind's layout."""
    out = []

    def walk(node):
        if isinstance(node, dict):
            if "template" in node and isinstance(node["template"], dict) and "spec" in node["template"]:
                out.append(node["template"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(job["spec"])
    return out


POD_KW = {
    "labels": {"team": "ml"},
    "annotations": {"note": "x"},
    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "pvc"}}],
    "volume_mounts": [{"name": "data", "mountPath": "/data"}],
    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "node_selector": {"pool": "gpu"},
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
    "service_account_name": "trainer",
    "image_pull_secrets": "reg1, reg2",
    "env_from": [{"secretRef": {"name": "creds"}}],
    "priority_class_name": "high",
    "shm_size": "2Gi",
    # What KubernetesPodOperator users reach for (issue 28, point 8): Pod Security ``restricted`` needs the first two.
    "security_context": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "container_security_context": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    "init_containers": [{"name": "fetch", "image": "busybox", "command": ["sh", "-c", "true"]}],
    "host_aliases": [{"ip": "10.0.0.5", "hostnames": ["registry.internal"]}],
    "runtime_class_name": "nvidia",
    "scheduler_name": "volcano",
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(OPERATORS))
def test_pod_level_options_reach_every_replica_of_every_kind(kind):
    job = op(OPERATORS[kind], command="python t.py", replicas=3, pod_annotations={"sim": "1"}, **POD_KW).render_job(ctx())
    templates = _templates(job)
    expected = 1 if kind in ("BeamJob",) else (2 if kind in ("XGBoostTrainingJob", "AscendJob") else 1)
    assert len(templates) == expected
    for t in templates:
        spec, c = t["spec"], t["spec"]["containers"][0]
        assert spec["volumes"] == [
            POD_KW["volumes"][0],
            {"name": "airflow-t9k-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
        ]
        assert c["volumeMounts"] == [{"name": "data", "mountPath": "/data"}, {"name": "airflow-t9k-shm", "mountPath": "/dev/shm"}]
        assert c["envFrom"] == [{"secretRef": {"name": "creds"}}]
        assert spec["tolerations"] == POD_KW["tolerations"]
        assert spec["nodeSelector"] == {"pool": "gpu"}
        assert spec["affinity"] == POD_KW["affinity"]
        assert spec["serviceAccountName"] == "trainer"
        assert spec["imagePullSecrets"] == [{"name": "reg1"}, {"name": "reg2"}]
        assert spec["priorityClassName"] == "high"
        assert spec["securityContext"] == POD_KW["security_context"]
        assert c["securityContext"] == POD_KW["container_security_context"]
        assert spec["initContainers"] == [{**POD_KW["init_containers"][0], "env": [ATTEMPT]}]  # every container gets T9K_ATTEMPT
        assert spec["hostAliases"] == POD_KW["host_aliases"]
        assert (spec["runtimeClassName"], spec["schedulerName"]) == ("nvidia", "volcano")
        assert t["metadata"] == {"labels": {"team": "ml"}, "annotations": {"note": "x", "sim": "1"}}
    assert job["metadata"]["labels"]["team"] == "ml"
    assert job["metadata"]["annotations"]["note"] == "x"


def test_pod_level_options_accept_kubernetes_client_models():
    from kubernetes.client import models as k

    job = op(
        volumes=[k.V1Volume(name="data", persistent_volume_claim=k.V1PersistentVolumeClaimVolumeSource(claim_name="pvc"))],
        volume_mounts=[k.V1VolumeMount(name="data", mount_path="/data", read_only=True)],
        tolerations=[k.V1Toleration(key="gpu", operator="Exists", effect="NoSchedule")],
        affinity=k.V1Affinity(node_affinity=k.V1NodeAffinity(preferred_during_scheduling_ignored_during_execution=[
            k.V1PreferredSchedulingTerm(weight=1, preference=k.V1NodeSelectorTerm(
                match_expressions=[k.V1NodeSelectorRequirement(key="zone", operator="In", values=["a"])]))])),
        image_pull_secrets=[k.V1LocalObjectReference(name="reg")],
        env_from=[k.V1EnvFromSource(config_map_ref=k.V1ConfigMapEnvSource(name="cfg"))],
        security_context=k.V1PodSecurityContext(run_as_non_root=True, fs_group=1000),
        container_security_context=k.V1SecurityContext(read_only_root_filesystem=True),
        init_containers=[k.V1Container(name="fetch", image="busybox")],
        host_aliases=[k.V1HostAlias(ip="10.0.0.5", hostnames=["registry.internal"])],
    ).render_job(ctx())  # fmt: skip
    t = _templates(job)[0]
    assert t["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "pvc"}}]
    assert t["spec"]["containers"][0]["volumeMounts"] == [{"name": "data", "mountPath": "/data", "readOnly": True}]
    assert t["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert t["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 1
    assert t["spec"]["imagePullSecrets"] == [{"name": "reg"}]
    assert t["spec"]["containers"][0]["envFrom"] == [{"configMapRef": {"name": "cfg"}}]
    assert t["spec"]["securityContext"] == {"runAsNonRoot": True, "fsGroup": 1000}
    assert t["spec"]["containers"][0]["securityContext"] == {"readOnlyRootFilesystem": True}
    assert t["spec"]["initContainers"] == [{"name": "fetch", "image": "busybox", "env": [ATTEMPT]}]
    assert t["spec"]["hostAliases"] == [{"ip": "10.0.0.5", "hostnames": ["registry.internal"]}]
    yaml.safe_dump(job)  # plain data all the way down


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [({"shm_size": "lots"}, "Kubernetes quantity"), ({"job": {"kind": "GenericJob"}, "tolerations": []}, "either job= or")],
)
def test_bad_pod_level_options_fail_at_dag_parse(kwargs, error):
    with pytest.raises(ValueError, match=error):
        op(**kwargs)


# -- templated conveniences and the rendered manifest -----------------------------------------
def test_templated_conveniences_render_into_the_final_manifest():
    o = op(replicas="{{ params.n }}", machine_type="{{ params.machine }}", pod_annotations={"run": "{{ run_id }}"},
           shm_size="{{ params.shm }}", tolerations=[{"key": "{{ params.taint }}", "operator": "Exists"}])  # fmt: skip
    c = {
        **ctx(run_id="manual__7"),
        "params": {"n": "3", "machine": "2U8G1P", "shm": "1Gi", "taint": "gpu"},
        "run_id": "manual__7",
    }
    o.render_template_fields(c)
    rs = o.rendered_job["spec"]["replicaSpecs"][0]
    assert rs["replicas"] == 3
    assert rs["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert rs["template"]["metadata"]["annotations"] == {"run": "manual__7"}
    assert rs["template"]["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert o.rendered_job["metadata"]["name"] == job_name("dag", "manual__7", "train", -1)
    assert "rendered_job" in o.template_fields
    assert o.template_fields_renderers["rendered_job"] == "yaml"


@pytest.mark.parametrize(("params", "error"), [({"n": "0"}, "positive integer"), ({"n": "many"}, "positive integer")])
def test_a_bad_templated_value_fails_at_render_with_a_clear_message(params, error):
    o = op(replicas="{{ params.n }}")
    with pytest.raises(AirflowException, match=error):
        o.render_template_fields({**ctx(), "params": params})


# -- writes carry the recorded uid; consumption and pause marks (bugs 1, 4, 7) -----------------
class Store(dict):
    def set(self, key, value, **_):
        self[key] = value


@pytest.mark.parametrize(("status", "delete_on_finish"), [("error", "always"), ("failed", "always"), ("success", "on_success")])
def test_finish_deletes_only_the_uid_this_task_recorded(status, delete_on_finish):
    ended = {"kind": "GenericJob", "metadata": {"name": "j", "namespace": "ml", "uid": "ours"}, "status": {"phase": "Failed"}}
    o = finishing_op(current=ended, delete_on_finish=delete_on_finish)
    store = Store(t9k_job={"kind": "GenericJob", "name": "j", "namespace": "ml", "uid": "ours"})
    ev = event(status, uid="stranger")  # e.g. the trigger saw a replacement of the same name
    with pytest.raises(AirflowException) if status != "success" else __import__("contextlib").nullcontext():
        o.execute_complete({**ctx(), "task_state_store": store}, ev)
    deletes = [c for c in o.hook.calls if c[0] == "delete"]
    assert deletes == [("delete", "j", "ours")]
    assert all(c[2]["metadata"]["uid"] == "ours" for c in o.hook.calls if c[0] == "patch")


class UnreadableHook(RecordingHook):
    def get_job(self, kind, name, namespace):
        from airflow_t9k.k8s.errors import ApiError

        raise ApiError(403, "Forbidden", "genericjobs is forbidden")


def _job(phase, uid="u"):
    return {"kind": "GenericJob", "metadata": {"name": "j", "namespace": "ml", "uid": uid}, "status": {"phase": phase}}


# delete_on_finish="always" after an ``error`` event (the trigger could not read the job, a 403 in
# the triggerer, an exception in the trigger): the job is read again and only an ended one goes.
@pytest.mark.parametrize(
    ("current", "deleted"),
    [
        (_job("Running"), False),  # still training: the retry reattaches to it
        (_job("Pending"), False),
        (_job("Paused"), False),
        (_job("Succeeded"), True),
        (_job("Failed"), True),
        ({}, False),  # gone already
        (_job("Running", uid="someone-elses"), False),  # another object took the name
        ("unreadable", False),  # the worker cannot read it either: leave it
    ],
    ids=["running", "pending", "paused", "succeeded", "failed", "gone", "replaced", "unreadable"],
)
def test_an_error_event_with_delete_always_deletes_only_a_job_that_ended(current, deleted):
    o = finishing_op(delete_on_finish="always")
    if current == "unreadable":
        o._hook = UnreadableHook()
    else:
        o._hook.current = current
    with pytest.raises(AirflowException):
        o.execute_complete(ctx(), event("error", message="403 Forbidden: genericjobs is forbidden"))
    assert [c for c in o.hook.calls if c[0] == "delete"] == ([("delete", "j", "u")] if deleted else [])


@pytest.mark.parametrize(
    ("status", "mark"), [("success", "delivered"), ("failed", "consumed"), ("error", None), ("timeout", None)]
)
def test_a_try_marks_a_failure_consumed_and_a_success_delivered(status, mark):
    o = finishing_op(on_kill_action="pause")
    with pytest.raises(BaseException) if status != "success" else __import__("contextlib").nullcontext():  # noqa: PT011 - any end but success raises
        o.execute_complete(ctx(), event(status))
    marks = [k for c in o.hook.calls if c[0] == "patch" for k in c[2]["metadata"].get("annotations", {}) if k.endswith("-by-try")]
    assert marks == ([f"airflow-t9k.io/{mark}-by-try"] if mark else [])


def test_a_timeout_with_pause_marks_the_pause_as_the_tasks():
    o = finishing_op(on_kill_action="pause")
    with pytest.raises(AirflowTaskTimeout):
        o.execute_complete(ctx(), event("timeout"))
    [(_verb, _name, patch)] = o.hook.calls
    assert patch == {"metadata": {"uid": "u", "annotations": {"airflow-t9k.io/paused-by": "timeout of try 1"}},
                     "spec": {"runMode": {"pause": {"enabled": True}}}}  # fmt: skip


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        ({"spec": {"runMode": {"pause": {"enabled": True}}},
          "metadata": {"annotations": {"airflow-t9k.io/paused-by": "kill of try 1"}}}, True),
        ({"spec": {"runMode": {"pause": {"enabled": True}}}, "metadata": {}}, False),  # paused by a person
        ({"spec": {"runMode": {"pause": {"enabled": False}}}, "metadata": {"annotations": {"airflow-t9k.io/paused-by": "x"}}},
         False),
        ({"spec": {}, "metadata": {}}, False),
    ],
    ids=["ours", "by-hand", "resumed", "never"],
)  # fmt: skip
def test_only_a_pause_by_the_task_is_resumed_by_a_retry(job, expected):
    from airflow_t9k.api.runmode import paused_by_task

    assert paused_by_task(job) is expected


@pytest.mark.parametrize(
    ("given", "sent"),
    [({"limits": {"cpu": 0.5, "memory": "1Gi"}}, {"limits": {"cpu": "0.5", "memory": "1Gi"}}),
     ({"requests": {"cpu": 2, "nvidia.com/gpu": 1}}, {"requests": {"cpu": 2, "nvidia.com/gpu": 1}})],
)  # fmt: skip
def test_fractional_quantities_go_as_strings(given, sent):
    """The CRD's Pod schema takes a quantity as a string or an integer, never a float."""
    job = op(GenericJobOperator, command=["t"], replicas=1, container_resources=given).render_job(ctx())
    assert job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["resources"] == sent


@pytest.mark.parametrize(
    ("message", "result"),
    [('{"metric": 0.93}', {"metric": 0.93}), ("s3://bucket/model-7\n", "s3://bucket/model-7"), (None, None)],
)  # fmt: skip
def test_success_returns_the_deciding_replicas_result(message, result):
    c = ctx()
    ev = event("success", phase="Succeeded", state={"phase": "Succeeded", "result_message": message})
    out = finishing_op().execute_complete(c, ev)
    assert out["result"] == result
    assert c["ti"].xcom.get("result") == result


def test_result_from_none_returns_no_result():
    ev = event("success", phase="Succeeded", state={"phase": "Succeeded", "result_message": '{"metric": 1}'})
    assert finishing_op(result_from=None).execute_complete(ctx(), ev)["result"] is None


def test_a_failed_jobs_result_is_in_the_failure_message():
    ev = event("failed", phase="Failed", state={"phase": "Failed", "result_message": "ValueError: learning rate must be > 0"})
    with pytest.raises(AirflowException, match="ValueError: learning rate must be > 0"):
        finishing_op().execute_complete(ctx(), ev)


@pytest.mark.parametrize("bad", ["worker:x", ":0"])
def test_result_from_is_checked_when_the_dag_is_parsed(bad):
    with pytest.raises(ValueError, match="result_from must look like"):
        op(result_from=bad)


def test_a_seed_excerpt_given_as_the_job_is_refused_with_the_fix():
    from airflow_t9k.operators.job import load_job

    excerpt = "...\nspec:\n  scheduler:\n    t9kScheduler:\n      queue: default\n      priority: 50\n"  # seed 001, as printed
    with pytest.raises(AirflowException, match=r"the job is not whole: it is an excerpt \(it shows only spec.scheduler"):
        load_job(excerpt)


# -- a timeout is re-checked against the job before it is deleted (issue 21, point 3) ----------
def _job_now(phase, uid="u"):
    return {"kind": "GenericJob", "metadata": {"name": "j", "namespace": "ml", "uid": uid}, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("current", "outcome", "deleted"),
    [(_job_now("Running"), "timeout", True),
     (_job_now("Succeeded"), "success", False),
     (_job_now("Failed"), "failed", False),
     (_job_now("Succeeded", uid="stranger"), "timeout", True),
     ({}, "timeout", True)],
    ids=["still-running", "succeeded-meanwhile", "failed-meanwhile", "replaced", "gone"],
)  # fmt: skip
def test_a_timeout_rereads_the_job_before_deleting_it(current, outcome, deleted):
    o = finishing_op(current=current)
    try:
        result = o.execute_complete(ctx(), event("timeout"))
        got = "success" if result["phase"] == "Succeeded" else "?"
    except AirflowTaskTimeout:
        got = "timeout"
    except AirflowException as exc:
        got = "failed" if "Failed" in str(exc) else "?"
    assert got == outcome
    assert any(c[0] == "delete" for c in o.hook.calls) is deleted


@pytest.mark.parametrize(("seen_uid", "identity", "reported"), [("stranger", {"uid": "ours"}, "ours"), ("ours", None, "ours")],
                         ids=["replaced", "no-identity-yet"])  # fmt: skip
def test_the_worker_side_event_carries_the_uid_this_task_recorded(seen_uid, identity, reported):
    o = finishing_op()
    o._identity = identity
    assert o._event_from(_job_now("Running", uid=seen_uid), "error", "m")["uid"] == reported


@pytest.mark.parametrize(("action", "waited", "calls"), [("keep", False, []), ("delete", True, []), ("delete", False, ["delete"]),
                                                         ("pause", False, ["patch"])])  # fmt: skip
def test_on_kill_keeps_the_job_when_told_or_once_the_wait_saw_its_end(action, waited, calls):
    o = finishing_op(on_kill_action=action)
    o._identity = {"kind": "GenericJob", "name": "j", "namespace": "ml", "uid": "u"}
    o._waited = waited
    o.on_kill()
    assert [c[0] for c in o.hook.calls] == calls


def test_a_timeout_with_keep_leaves_the_job_running():
    o = finishing_op(on_kill_action="keep")
    with pytest.raises(AirflowTaskTimeout):
        o.execute_complete(ctx(), event("timeout"))
    assert o.hook.calls == []


# -- the provider's Kubernetes model types, wherever KubernetesPodOperator takes them (point 9) --
def _k8s():
    from kubernetes.client import models as k8s  # what `from airflow.providers.cncf.kubernetes import k8s` users pass

    return k8s


@pytest.mark.parametrize(
    ("kwargs", "where", "expected"),
    [({"container_resources": lambda k: k.V1ResourceRequirements(limits={"cpu": "2", "nvidia.com/gpu": "1"},
                                                                 requests={"cpu": 0.5})},
      lambda t: t["spec"]["containers"][0]["resources"],
      {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}, "requests": {"cpu": "0.5"}}),
     ({"env": lambda k: [k.V1EnvVar(name="A", value="1"), k.V1EnvVar(name="P", value_from=k.V1EnvVarSource(
         field_ref=k.V1ObjectFieldSelector(field_path="metadata.name")))]},
      lambda t: t["spec"]["containers"][0]["env"],
      [{"name": "A", "value": "1"}, {"name": "P", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}, ATTEMPT]),
     ({"volumes": lambda k: [k.V1Volume(name="d", empty_dir=k.V1EmptyDirVolumeSource())]},
      lambda t: t["spec"]["volumes"], [{"name": "d", "emptyDir": {}}]),
     ({"tolerations": lambda k: [k.V1Toleration(key="gpu", operator="Exists")]},
      lambda t: t["spec"]["tolerations"], [{"key": "gpu", "operator": "Exists"}]),
     ({"affinity": lambda k: k.V1Affinity(pod_anti_affinity=k.V1PodAntiAffinity())},
      lambda t: t["spec"]["affinity"], {"podAntiAffinity": {}})],
    ids=["container_resources", "env", "volumes", "tolerations", "affinity"],
)  # fmt: skip
def test_kubernetes_models_are_accepted_as_kubernetes_pod_operator_accepts_them(kwargs, where, expected):
    k = _k8s()
    job = op(PyTorchTrainingJobOperator, command="python t.py", **{n: make(k) for n, make in kwargs.items()}).render_job(ctx())
    assert where(_templates(job)[0]) == expected
    yaml.safe_dump(job)  # plain data all the way down


def test_a_job_dict_may_hold_kubernetes_models():
    k = _k8s()
    template = k.V1PodTemplateSpec(spec=k.V1PodSpec(containers=[k.V1Container(name="m", image="img")]))
    job = op(
        T9kJobOperator,
        job={"kind": "GenericJob", "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template}]}},
    )
    assert job.render_job(ctx())["spec"]["replicaSpecs"][0]["template"] == {
        "spec": {"containers": [{"name": "m", "image": "img", "env": [ATTEMPT]}]}
    }


def test_container_resources_of_another_type_fail_at_dag_parse():
    with pytest.raises(ValueError, match="V1ResourceRequirements"):
        op(container_resources=["2 CPUs"])


# -- a re-run runs beside the job an earlier try took, under this try's name (point 5) --------
def test_a_rerun_tries_this_trys_own_names_in_order():
    from airflow_t9k.api.rerun import MAX_RERUN_NAMES, rerun_names

    names = rerun_names("train-0123456789", 3)
    assert names[:4] == ["train-0123456789", "train-0123456789-t3", "train-0123456789-t3-2", "train-0123456789-t3-3"]
    assert len(names) == len(set(names)) == MAX_RERUN_NAMES


USED = {"phase": "Succeeded", "startTime": "2026-11-25T12:00:00Z",
        "conditions": [{"type": "Completed", "status": "True", "reason": "Succeeded", "message": "done"}],
        "usage": {"accelerators": {"nvidia.com/gpu": 7200}, "wasted": {"nvidia.com/gpu": 1800}, "cpuSeconds": 3600,
                  "runs": 3, "wallSeconds": 4000, "open": {}, "closed": ["a"]}}  # fmt: skip


@pytest.mark.parametrize("status", ["success", "failed"])
def test_the_jobs_usage_goes_to_xcom_beside_the_result(status):
    """The event carries the state as the shared interpreter read the job's status."""
    from airflow_t9k.api.outcome import interpret

    phase = "Succeeded" if status == "success" else "Failed"
    job = {"kind": "GenericJob", "metadata": {"name": "j", "namespace": "ml"}, "status": {**USED, "phase": phase}}
    ev = event(status, phase=phase, state=interpret(job).as_dict())
    c = ctx()
    complete(finishing_op(), c, ev)
    pushed = dict(c["ti"].xcom["usage"])
    total = pushed.pop("task_total")  # the task instance's in all (api/taskcost.py): this one job
    assert pushed == {"accelerator_seconds": {"nvidia.com/gpu": 7200}, "wasted_accelerator_seconds": {"nvidia.com/gpu": 1800},
                      "cpu_seconds": 3600, "runs": 3, "wall_seconds": 4000, "accelerator_hours": 2.0}  # fmt: skip
    assert (total["jobs"], total["accelerator_seconds"], total["cpu_seconds"]) == (1, {"nvidia.com/gpu": 7200}, 3600)


def test_no_usage_no_xcom():
    c = ctx()
    finishing_op().execute_complete(c, event("success", phase="Succeeded", state={"phase": "Succeeded"}))
    assert "usage" not in c["ti"].xcom


def test_template_sends_the_reference_and_leaves_the_image_to_it():
    job = op(
        PyTorchTrainingJobOperator, image=None, template="torch-a100", replicas=4, command=["python", "train.py"]
    ).render_job(ctx())
    assert job["spec"]["templateRef"] == {"name": "torch-a100", "kind": "T9kJobTemplate"}
    [worker] = job["spec"]["replicaSpecs"]
    assert worker["replicas"] == 4
    assert worker["template"]["spec"]["containers"] == [
        {"name": "pytorch", "command": ["python", "train.py"], "env": [{"name": "T9K_ATTEMPT", "value": "1"}]}
    ]
    cluster = op(GenericJobOperator, image=None, cluster_template="{{ ti.task_id }}-t").render_job(ctx())
    assert cluster["spec"]["templateRef"] == {
        "name": "{{ ti.task_id }}-t",
        "kind": "ClusterT9kJobTemplate",
    }  # rendered by Airflow, not here
    assert "launcher" not in op(ColossalAIJobOperator, image=None, template="cai", command=["t.py"]).render_job(ctx())["spec"]
    given = {"kind": "GenericJob", "spec": {"templateRef": {"name": "other"}, "replicaSpecs": [{"type": "w", "replicas": 1}]}}
    with pytest.raises(AirflowException, match="the job names template"):
        op(T9kJobOperator, job=given, template="mine").render_job(ctx())
    same = op(
        T9kJobOperator, job={"kind": "GenericJob", "spec": {"replicaSpecs": [{"type": "w", "replicas": 1}]}}, template="mine"
    )
    assert same.render_job(ctx())["spec"]["templateRef"] == {"name": "mine", "kind": "T9kJobTemplate"}
    assert "job_template" in T9kJobOperator.template_fields
    assert "cluster_job_template" in GenericJobOperator.template_fields


REPORTED = {**USED, "progress": {"replica": "j-worker-0", "step": 1000, "totalSteps": 1000, "epoch": 3, "percent": 100.0,
                                 "summary": "100% 1000/1000", "metrics": {"acc": 0.93, "loss": 0.12},
                                 "history": {"every": 10, "points": [{"time": "2026-11-25T12:00:00Z", "step": 0}]}}}  # fmt: skip


@pytest.mark.parametrize("status", ["success", "failed"])
def test_the_last_reported_metrics_go_to_xcom_beside_the_result(status, capsys):
    """status.progress (docs/progress.md), as the shared interpreter reads it into the event."""
    from airflow_t9k.api.outcome import interpret

    phase = "Succeeded" if status == "success" else "Failed"
    job = {"kind": "GenericJob", "metadata": {"name": "j", "namespace": "ml"}, "status": {**REPORTED, "phase": phase}}
    ev = event(status, phase=phase, state=interpret(job).as_dict())
    c = ctx()
    complete(finishing_op(), c, ev)
    assert c["ti"].xcom["metrics"] == {"step": 1000, "total_steps": 1000, "epoch": 3, "acc": 0.93, "loss": 0.12}
    assert "GenericJob j reported last: step 1000/1000 (100%), epoch 3, acc 0.93, loss 0.12" in capsys.readouterr().out


def test_no_progress_no_metrics_xcom():
    c = ctx()
    finishing_op().execute_complete(c, event("success", phase="Succeeded", state={"phase": "Succeeded"}))
    assert "metrics" not in c["ti"].xcom


IDENTITY = {"kind": "PyTorchTrainingJob", "name": "train-abc", "namespace": "ml", "uid": "u-1"}


@pytest.mark.parametrize(
    ("template", "url"),
    [
        (
            "https://tb.example.com/#scalars&regexInput={namespace}/{name}",
            "https://tb.example.com/#scalars&regexInput=ml/train-abc",
        ),
        ("http://mlflow:5000/#/experiments/3/runs/{uid}", "http://mlflow:5000/#/experiments/3/runs/u-1"),
        ("  https://x/{kind}  ", "https://x/PyTorchTrainingJob"),
        ("https://x/{unknown}", "https://x/{unknown}"),  # only the job's fields are replaced
        ("javascript:alert(1)", ""),  # not http(s): no link
        ("", ""),
        (None, ""),
    ],
)
def test_tool_url(template, url):
    from airflow_t9k.links import tool_url

    assert tool_url(template, IDENTITY) == url


def test_tensorboard_and_mlflow_links_are_templated_and_pushed_at_submission(monkeypatch):
    from airflow_t9k.links import MLflowLink, TensorBoardLink

    o = op(
        PyTorchTrainingJobOperator, tensorboard_url="https://tb/{{ ds }}/{name}", mlflow_url="https://mlflow/runs/{{ run_id }}"
    )
    assert {"tensorboard_url", "mlflow_url"} <= set(o.template_fields)
    assert [link.name for link in o.operator_extra_links] == ["T9k Job", "TensorBoard", "MLflow"]
    o.render_template_fields({"ds": "2026-11-25", "run_id": "manual__1", "ti": FakeTI()})
    assert (o.tensorboard_url, o.mlflow_url) == ("https://tb/2026-11-25/{name}", "https://mlflow/runs/manual__1")
    from airflow.sdk.execution_time import xcom

    monkeypatch.setattr(xcom.XCom, "get_value", staticmethod(lambda ti_key, key: IDENTITY if key == "t9k_job" else None))
    assert TensorBoardLink().get_link(o, ti_key=None) == "https://tb/2026-11-25/train-abc"
    assert MLflowLink().get_link(o, ti_key=None) == "https://mlflow/runs/manual__1"
    assert MLflowLink().get_link(op(), ti_key=None) == ""  # no URL given: no link


@pytest.mark.parametrize(
    ("recorded", "link"),
    [
        ({**IDENTITY, "server": "https://k8s:6443/"},
         "https://k8s:6443/apis/batch.tensorstack.dev/v1beta1/namespaces/ml/pytorchtrainingjobs/train-abc"),
        # Attacks (issue 29): the task's own code pushes t9k_job; its fields would become the link's path.
        ({**IDENTITY, "namespace": "../../../api/v1/namespaces/kube-system/secrets#"}, ""),
        ({**IDENTITY, "name": "x?watch=true"}, ""),
        ({**IDENTITY, "kind": "Secret"}, ""),
        ({**IDENTITY, "uid": "u/../1"}, ""),
        ({**IDENTITY, "server": "javascript:alert(1)//"},
         "/apis/batch.tensorstack.dev/v1beta1/namespaces/ml/pytorchtrainingjobs/train-abc"),
        ("train-abc", ""),
        (None, ""),
    ],
    ids=["ok", "namespace-path", "name-query", "unknown-kind", "uid-path", "server-not-http", "not-a-dict", "none"],
)  # fmt: skip
def test_the_job_link_uses_only_a_well_formed_record(recorded, link):
    from airflow_t9k.links import recorded_url, tool_url

    assert recorded_url(recorded) == link
    if isinstance(recorded, dict) and not link.startswith("https://k8s"):
        # A tool's link gets none of a malformed record's fields.
        assert tool_url("https://tb/{namespace}/{name}", recorded) == ("https://tb/ml/train-abc" if link else "https://tb//")


# -- do_xcom_push=False pushes nothing (issue 28, point 7) -------------------------------------
@pytest.mark.parametrize("status", ["success", "failed"])
def test_do_xcom_push_false_pushes_nothing(status):
    c = ctx()
    state = {"phase": "Succeeded" if status == "success" else "Failed", "result_message": '{"metric": 0.9, "checkpoint": "s3://c"}',
             "usage": {"runs": 1}, "metrics": {"loss": 0.1}}  # fmt: skip
    complete(finishing_op(do_xcom_push=False), c, event(status, phase=state["phase"], state=state))
    assert c["ti"].xcom == {}
    complete(finishing_op(), c, event(status, phase=state["phase"], state=state))
    pushed = {"phase", "summary", "usage", "metrics", "checkpoint"} | ({"result"} if status == "success" else set())
    assert pushed <= set(c["ti"].xcom)  # by default, all of them


# -- templated as KubernetesPodOperator templates them; AscendJob framework, TI name (issue 28, point 7) --
def test_config_file_and_cluster_context_are_templated(tmp_path):
    from airflow_t9k.sensors.job import T9kJobSensor

    for cls in (GenericJobOperator, T9kJobOperator, T9kJobSensor):
        assert {"config_file", "cluster_context"} <= set(cls.template_fields), cls
    o = op(config_file="{{ params.kc }}", cluster_context="{{ params.ctx }}", namespace="ml")
    o.render_template_fields({**ctx(), "params": {"kc": str(tmp_path / "team-a.yaml"), "ctx": "team-a"}})
    assert (o.config_file, o.cluster_context) == (
        str(tmp_path / "team-a.yaml"),
        "team-a",
    )  # a .yaml path is not read as a template
    assert (o.hook.config_file, o.hook.cluster_context) == (str(tmp_path / "team-a.yaml"), "team-a")


def test_an_ascend_jobs_framework_may_be_a_template():
    o = op(AscendJobOperator, framework="{{ params.fw }}", replicas=2)
    o.render_template_fields({**ctx(), "params": {"fw": "mindspore"}})
    assert set(o.rendered_job["spec"]["replicaSpecs"]) == {"Scheduler", "Worker"}
    bad = op(AscendJobOperator, framework="{{ params.fw }}", replicas=2)
    with pytest.raises(AirflowException, match="framework must be one of"):
        bad.render_template_fields({**ctx(), "params": {"fw": "jax"}})
    with pytest.raises(ValueError, match="framework must be one of"):
        op(AscendJobOperator, framework="jax", replicas=2)


def test_a_ti_jobs_name_may_be_a_template():
    from tests.unit.airflow.test_ti_operator import ti_op

    o = ti_op(name="{{ params.name }}")
    o.render_template_fields({**ctx(), "params": {"name": "nightly-7"}})
    assert o.rendered_job["metadata"]["name"] == "nightly-7"
    bad = ti_op(name="{{ params.name }}")
    with pytest.raises(AirflowException, match="must be a Kubernetes object name"):
        bad.render_template_fields({**ctx(), "params": {"name": "Not_A_Name"}})


# -- ttl_after_finished: the controller deletes the finished job (issue 44, item 8) --------------
def _ttl_field(job):
    spec = job["spec"]
    return (
        spec.get("ttlSecondsAfterFinished")
        if job["kind"] == "GenericJob"
        else (spec.get("runPolicy") or {}).get("ttlSecondsAfterFinished")
    )


@pytest.mark.parametrize("kind", sorted(k for k in OPERATORS if k != "AscendJob"))
def test_ttl_after_finished_sets_the_kinds_ttl_seconds_after_finished(kind):
    from datetime import timedelta

    job = op(OPERATORS[kind], ttl_after_finished=timedelta(minutes=5)).render_job(ctx())
    assert _ttl_field(job) == 300
    assert KINDS[kind].ttl_after_finished(job) == 300  # where the controller reads it
    if kind == "GenericJob":
        assert "runPolicy" not in job["spec"]  # GenericJob has none: spec.ttlSecondsAfterFinished, as batch/v1 Job
    if kind == "BeamJob":
        assert job["spec"]["runPolicy"]["cleanUpCluster"] is True  # the run policy it had stays
    assert _ttl_field(op(OPERATORS[kind]).render_job(ctx())) is None  # by default the job stays


@pytest.mark.parametrize(("given", "seconds"), [(0, 0), (86400, 86400), ("td:1.5", 2), ("td:0", 0)])
def test_ttl_after_finished_takes_seconds_or_a_timedelta_rounded_up(given, seconds):
    from datetime import timedelta

    value = timedelta(seconds=float(given[3:])) if isinstance(given, str) else given
    assert _ttl_field(op(ttl_after_finished=value).render_job(ctx())) == seconds


@pytest.mark.parametrize("bad", [-1, "td:-1", 1.5, True, "60"])
def test_a_bad_ttl_after_finished_fails_at_dag_parse(bad):
    from datetime import timedelta

    value = timedelta(seconds=-1) if bad == "td:-1" else bad
    with pytest.raises(ValueError, match="ttl_after_finished must"):
        op(ttl_after_finished=value)


def test_ttl_after_finished_is_refused_where_it_has_no_meaning():
    with pytest.raises(ValueError, match="no meaning for AscendJob"):
        op(AscendJobOperator, replicas=2, ttl_after_finished=60)
    ascend = {"kind": "AscendJob", "metadata": {"labels": {"framework": "pytorch"}}, "spec": {}}
    with pytest.raises(ValueError, match="no meaning for AscendJob"):
        op(T9kJobOperator, job=ascend, ttl_after_finished=0)
    # Given as YAML, the kind is known once the job is read: refused then, before anything is submitted.
    o = op(T9kJobOperator, job=yaml.safe_dump(ascend), ttl_after_finished=0)
    with pytest.raises(AirflowException, match="no meaning for AscendJob"):
        o.render_job(ctx())


def test_ttl_after_finished_and_the_jobs_own_field_must_agree():
    o = op(PyTorchTrainingJobOperator, spec={"runPolicy": {"ttlSecondsAfterFinished": 60, "backoffLimit": 1}},
           ttl_after_finished=30)  # fmt: skip
    with pytest.raises(AirflowException, match="give one"):
        o.render_job(ctx())
    same = op(PyTorchTrainingJobOperator, spec={"runPolicy": {"ttlSecondsAfterFinished": 60, "backoffLimit": 1}},
              ttl_after_finished=60).render_job(ctx())  # fmt: skip
    assert same["spec"]["runPolicy"] == {"ttlSecondsAfterFinished": 60, "backoffLimit": 1}
    job = {"kind": "PyTorchTrainingJob", "spec": {"runPolicy": None, "replicaSpecs": []}}
    assert op(T9kJobOperator, job=job, ttl_after_finished=5).render_job(ctx())["spec"]["runPolicy"] == {
        "ttlSecondsAfterFinished": 5
    }


class GoneHook:
    """The cluster after the TTL deleted the job: it is nowhere, and nothing may be created."""

    def __init__(self):
        from types import SimpleNamespace

        self.calls: list[tuple] = []
        self.api_client = SimpleNamespace(configuration=SimpleNamespace(host="https://k8s"))

    def get_job(self, kind, name, namespace):
        self.calls.append(("get", name))
        return None

    def create_job(self, job, namespace):
        raise AssertionError("a retry of a delivered success submitted a job")

    def patch_job(self, kind, name, namespace, patch):
        from airflow_t9k.k8s.errors import NotFound

        self.calls.append(("patch", name))
        raise NotFound(404, "NotFound", f"{name} not found")

    def delete_job(self, kind, name, namespace, uid=None):
        self.calls.append(("delete", name, uid))
        return False


@pytest.mark.parametrize("delete_on_finish", ["never", "on_success", "always"])
def test_a_retry_delivers_a_success_whose_job_the_ttl_deleted(delete_on_finish):
    """Try 1 delivered the success and failed after (its XCom backend, a lost worker); the TTL
    deleted the job since. The retry delivers the recorded result again and trains nothing."""
    from tests.support.task import context

    o = op(ttl_after_finished=0, delete_on_finish=delete_on_finish, retries=2)
    o._hook = GoneHook()
    name = o.render_job(ctx())["metadata"]["name"]
    ident = {"kind": "GenericJob", "name": name, "namespace": "ml", "uid": "u1"}
    final = {**ident, "status": "success", "phase": "Succeeded", "message": "done",
             "state": {"phase": "Succeeded", "message": "done", "result_message": '{"metric": 0.91}',
                       "aggregate": {"succeeded": 1}}}  # fmt: skip
    c = context(try_number=2, max_tries=2)
    store = c["task_state_store"]
    store.set("t9k_job", ident)
    store.set("t9k_jobs", [{"try": 1, **ident}])
    store.set("t9k_delivered", {"uid": "u1", "try": 1, "event": final})
    out = o.execute(c)
    assert (out["uid"], out["phase"], out["result"]) == ("u1", "Succeeded", {"metric": 0.91})
    assert c["ti"].xcom["result"] == {"metric": 0.91}
    assert c["ti"].xcom["phase"] == "Succeeded"
    assert store["t9k_delivered"]["try"] == 2  # this try delivered it too
    deletes = [call for call in o.hook.calls if call[0] == "delete"]
    assert deletes == ([("delete", name, "u1")] if delete_on_finish != "never" else [])  # gone: nothing to do


def test_earlier_attempts_are_kept_past_the_state_stores_retention():
    """Issue 44, item 7: the record behind the T9k Job tab's "Earlier attempts" used Airflow's
    default retention ([state_store] default_retention_days, 30): a monthly retraining lost it."""
    from airflow.sdk import NEVER_EXPIRE

    from airflow_t9k.operators.job import record_try

    class Recording(Store):
        def __init__(self):
            super().__init__()
            self.retention = {}

        def set(self, key, value, retention=None):
            self[key] = value
            self.retention[key] = retention

    store = Recording()
    ident = {"kind": "GenericJob", "name": "j", "namespace": "ml", "uid": "u1"}
    record_try(store, ident, "n1", 1)
    record_try(store, {**ident, "name": "j-t2", "uid": "u2"}, None, 2)
    assert store.retention == {"t9k_job": None, "t9k_jobs": NEVER_EXPIRE}
    assert [a["try"] for a in store["t9k_jobs"]] == [1, 2]
    assert store["t9k_job"] == {**ident, "name": "j-t2", "uid": "u2"}
