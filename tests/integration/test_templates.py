"""Job templates against the real API server and controller (docs/templates.md): admission of bad
templates, the merged pods, a template edited or deleted under a running job, a missing template,
a deprecated one, and an operator submitting with ``template=``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime

import pytest
from airflow.sdk import DAG
from kubernetes.client.exceptions import ApiException

from airflow_t9k.kinds.templates import ANNOTATION
from airflow_t9k.operators.kinds import GenericJobOperator, PyTorchTrainingJobOperator
from tests.integration.test_operator_trigger import conn  # noqa: F401 - fixtures
from tests.support.cluster import wait_until
from tests.support.kubelet import set_pod_terminated
from tests.support.task import context
from tests.support.templates import Templates, template, unique

SIM = "sim.t9k.test/duration"


@pytest.fixture
def templates(api_client, namespace, crds) -> Iterator[Templates]:
    t = Templates(api_client, namespace)
    yield t
    t.cleanup()


def a100(name: str = "torch-a100", **spec) -> dict:
    """What a platform team writes once: image, env, shared memory, tolerations, node selector,
    service account, and resources per replica type."""
    pod = {"metadata": {"labels": {"team": "ml"}, "annotations": {SIM: "600s"}},
           "spec": {"serviceAccountName": "default", "nodeSelector": {"type": "kwok"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "volumes": [{"name": "airflow-t9k-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}],
                    "containers": [{"name": "main", "image": "torch:2.4",
                                    "env": [{"name": "NCCL_DEBUG", "value": "WARN"}, {"name": "LR", "value": "0.1"}],
                                    "resources": {"limits": {"cpu": "4", "memory": "8Gi"}},
                                    "volumeMounts": [{"name": "airflow-t9k-shm", "mountPath": "/dev/shm"}]}]}}  # fmt: skip
    per_type = {"worker": {"spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}
    return template(name, "GenericJob", pod, replicaTemplates=per_type, jobSpec={"cleanUpPolicy": "All"}, **spec)


def templated_job(name: str, ref: dict, **replica: object) -> dict:
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": name},
            "spec": {"templateRef": ref, "replicaSpecs": [
                {"type": "master", "replicas": 1},
                {"type": "worker", "replicas": 2, "template": {"spec": {"containers": [
                    {"name": "main", "command": ["python", "train.py"], "env": [{"name": "LR", "value": "0.5"}]}]}},
                 **replica}]}}  # fmt: skip


# -- admission ---------------------------------------------------------------------------------

POD = {"spec": {"containers": [{"name": "main", "image": "i"}]}}
BAD = [
    (
        "no job kind",
        {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "T9kJobTemplate",
            "metadata": {"name": "x"},
            "spec": {"template": POD},
        },
        "jobKind: Required value",
    ),
    ("an unknown job kind", template("x", "FooJob", POD), "Unsupported value"),
    ("nothing to give", template("x", "GenericJob"), "gives at least one of"),
    (
        "a malformed pod template",
        template("x", "GenericJob", {"spec": {"containers": [{"name": "main", "env": "A=1"}]}}),
        "must be of type array",
    ),
    (
        "a container without a name",
        template("x", "GenericJob", {"spec": {"containers": [{"image": "i"}]}}),
        "name: Required value",
    ),
    (
        "a replica type TensorFlow lacks",
        template("x", "TensorFlowTrainingJob", POD, replicaTemplates={"master": POD}),
        "keyed by its replica types: chief, worker, ps, evaluator",
    ),
    (
        "a replica type that is no DNS label",
        template("x", "PyTorchTrainingJob", POD, replicaTemplates={"Worker": POD}),
        "lower-case DNS labels",
    ),
    ("per-type pods for a one-pod kind", template("x", "MPIJob", POD, replicaTemplates={"worker": POD}), "have one pod template"),
    (
        "replica counts in jobSpec",
        template("x", "GenericJob", POD, jobSpec={"replicaSpecs": [{"type": "w", "replicas": 4}]}),
        "holds no pods and no replica counts",
    ),
    ("a worker pod in jobSpec", template("x", "MPIJob", jobSpec={"worker": {"template": POD}}), "holds no pods"),
    (
        "a deprecation message on a template in good standing",
        template("x", "GenericJob", POD, deprecationMessage="use y"),
        "needs spec.deprecated: true",
    ),
    ("a cluster template like a namespaced one", template(unique("x"), "FooJob", POD, cluster=True), "Unsupported value"),
]


@pytest.mark.parametrize(("what", "body", "error"), BAD, ids=[b[0] for b in BAD])
def test_admission_refuses_a_bad_template(templates, what, body, error):
    assert error in templates.rejected(body), what


def test_a_job_may_leave_its_pods_to_a_template_only_when_it_names_one(jobs, templates):
    bare = templated_job("bare", {"name": "t"})
    del bare["spec"]["templateRef"]
    assert "replicaSpecs[].template: Required value" in jobs.rejected(bare)  # as before job templates
    jobs.create(templated_job("named", {"name": "t"}))  # no controller here: nothing resolves it
    assert "Unsupported value" in jobs.rejected(templated_job("bad-kind", {"name": "t", "kind": "PodTemplate"}))
    with pytest.raises(ApiException) as exc:
        jobs.patch("GenericJob", "named", {"spec": {"templateRef": {"name": "other"}}})
    assert exc.value.status == 422
    assert "spec.templateRef is immutable" in exc.value.body


# -- merged once, before any pod ----------------------------------------------------------------


def test_a_job_naming_a_template_gets_the_merged_pods(jobs, templates, controller):
    tmpl = templates.create(a100())
    jobs.create(templated_job("merged", {"name": "torch-a100"}))
    job = jobs.wait_phase("GenericJob", "merged", "Running")
    record = json.loads(job["metadata"]["annotations"][ANNOTATION])
    assert record == {"kind": "T9kJobTemplate", "name": "torch-a100", "namespace": jobs.ns, "uid": tmpl["metadata"]["uid"],
                      "resourceVersion": tmpl["metadata"]["resourceVersion"]}  # fmt: skip
    assert job["spec"]["cleanUpPolicy"] == "All"
    assert job["spec"]["templateRef"] == {"name": "torch-a100"}
    pods = jobs.pods("merged")
    assert sorted(pods) == ["merged-master-0", "merged-worker-0", "merged-worker-1"]
    for name, pod in pods.items():
        c = pod.spec.containers[0]
        assert c.image == "torch:2.4"
        assert pod.spec.service_account_name == "default"
        assert pod.spec.node_selector == {"type": "kwok"}
        assert any(t.key == "nvidia.com/gpu" for t in pod.spec.tolerations)
        assert pod.metadata.labels["team"] == "ml"
        assert {v.name: v.empty_dir.medium for v in pod.spec.volumes if v.empty_dir} == {"airflow-t9k-shm": "Memory"}
        assert {m.mount_path for m in c.volume_mounts} >= {"/dev/shm"}
        env = {e.name: e.value for e in c.env or []}
        if "worker" in name:  # the job's own command and LR, the template's NCCL_DEBUG; a GPU for workers only
            assert c.command == ["python", "train.py"]
            assert env["LR"] == "0.5"
            assert env["NCCL_DEBUG"] == "WARN"
            assert c.resources.limits == {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"}
        else:
            assert c.command is None
            assert env["LR"] == "0.1"
            assert c.resources.limits == {"cpu": "4", "memory": "8Gi"}
    resolved = jobs.condition("GenericJob", "merged", "TemplateResolved")
    assert resolved["status"] == "True"
    assert f"T9kJobTemplate {jobs.ns}/torch-a100" in resolved["message"]
    assert "TemplateResolved" in jobs.reasons("merged", "TemplateResolved")


def test_a_cluster_template_serves_every_namespace(jobs, templates, controller):
    name = unique("torch")
    pod = {"metadata": {"annotations": {SIM: "1s"}}, "spec": {"containers": [{"name": "pytorch", "image": "torch:cluster"}]}}
    templates.create(template(name, "PyTorchTrainingJob", pod, cluster=True))
    job = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "PyTorchTrainingJob", "metadata": {"name": "pt"},
           "spec": {"templateRef": {"name": name, "kind": "ClusterT9kJobTemplate"},
                    "replicaSpecs": [{"type": "worker", "replicas": 2}]}}  # fmt: skip
    jobs.create(job)
    done = jobs.wait_phase("PyTorchTrainingJob", "pt", "Succeeded")
    assert json.loads(done["metadata"]["annotations"][ANNOTATION])["kind"] == "ClusterT9kJobTemplate"
    assert done["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["image"] == "torch:cluster"


def test_a_template_edit_after_submission_touches_neither_the_running_job_nor_its_pods(jobs, templates, core, controller):
    templates.create(a100())
    jobs.create(templated_job("kept", {"name": "torch-a100"}, restartPolicy={"policy": "OnFailure", "limit": 2}))
    before = jobs.wait_phase("GenericJob", "kept", "Running")
    pods = jobs.pods("kept")
    templates.patch("torch-a100", {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "torch:2.5",
                                                                                   "env": [{"name": "NCCL_DEBUG",
                                                                                            "value": "INFO"}]}]}}}})  # fmt: skip
    # A job created after the edit gets it: the controller has seen the new template.
    jobs.create(templated_job("after", {"name": "torch-a100"}))
    jobs.wait_phase("GenericJob", "after", "Running")
    assert {p.spec.containers[0].image for p in jobs.pods("after").values()} == {"torch:2.5"}

    after = jobs.get("GenericJob", "kept")
    assert after["spec"] == before["spec"]
    assert after["metadata"]["annotations"] == before["metadata"]["annotations"]
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    now = jobs.pods("kept")
    assert {n: p.metadata.uid for n, p in now.items()} == {n: p.metadata.uid for n, p in pods.items()}
    assert {p.spec.containers[0].image for p in now.values()} == {"torch:2.4"}

    # A replica restarted after the edit, and after the template is gone, runs as submitted.
    templates.delete("torch-a100")
    set_pod_terminated(core, jobs.ns, "kept-worker-1", phase="Failed", exit_code=1)
    wait_until(lambda: (p := jobs.live_pods("kept").get("kept-worker-1")) is not None
               and p.metadata.uid != pods["kept-worker-1"].metadata.uid,
               timeout=30, what="kept-worker-1 restarted")  # fmt: skip
    again = jobs.pods("kept")["kept-worker-1"].spec.containers[0]
    assert again.image == "torch:2.4"
    assert {e.name: e.value for e in again.env}["NCCL_DEBUG"] == "WARN"
    assert jobs.get("GenericJob", "kept")["spec"] == before["spec"]


# -- a template that is not there, or deprecated -------------------------------------------------


def test_a_missing_template_is_waited_for_then_fails_the_job(jobs, templates, controller_factory):
    controller_factory("--template-wait", "6")
    jobs.create(templated_job("never", {"name": "nowhere"}))
    jobs.create(templated_job("late", {"name": "late-template"}))
    wait_until(lambda: (jobs.condition("GenericJob", "never", "TemplateResolved") or {}).get("reason") == "TemplateNotFound",
               timeout=10, what="the waiting condition")  # fmt: skip
    waiting = jobs.condition("GenericJob", "never", "TemplateResolved")
    assert waiting["status"] == "False"
    assert f"T9kJobTemplate {jobs.ns}/nowhere does not exist" in waiting["message"]
    assert jobs.phase("GenericJob", "never") == "Pending"
    # Applied after the job (kubectl apply -f dir/ in any order): the job waits for it.
    templates.create(a100("late-template"))
    jobs.wait_phase("GenericJob", "late", "Running", timeout=20)

    failed = jobs.wait_phase("GenericJob", "never", "Failed", timeout=20)
    cond = next(c for c in failed["status"]["conditions"] if c["type"] == "Failed")
    assert cond["reason"] == "TemplateNotFound"
    assert "nowhere does not exist (waited 6s" in cond["message"]
    assert jobs.pods("never") == {}
    assert ANNOTATION not in (failed["metadata"].get("annotations") or {})
    assert "TemplateNotFound" in jobs.reasons("never", "TemplateNotFound")


def test_a_deprecated_template_is_used_with_a_warning(jobs, templates, controller):
    templates.create(a100("old", deprecated=True, deprecationMessage="use torch-h100 (retired in March)"))
    jobs.create(templated_job("dep", {"name": "old"}))
    job = jobs.wait_phase("GenericJob", "dep", "Running")
    assert json.loads(job["metadata"]["annotations"][ANNOTATION])["deprecated"] == "use torch-h100 (retired in March)"
    assert jobs.condition("GenericJob", "dep", "TemplateResolved")["reason"] == "Deprecated"
    jobs.reasons("dep", "TemplateDeprecated")
    [event] = [e for e in jobs.events("dep") if e.reason == "TemplateDeprecated"]
    assert event.type == "Warning"
    assert event.message == f"T9kJobTemplate {jobs.ns}/old is deprecated: use torch-h100 (retired in March)"


def test_a_template_the_merged_job_cannot_pass_admission_with_fails_it(jobs, templates, controller):
    # The template's jobSpec is checked when it is used: the job's CRD refuses the merged spec.
    templates.create(template("bad-spec", "GenericJob", POD, jobSpec={"cleanUpPolicy": "Sometimes"}))
    jobs.create(templated_job("refused", {"name": "bad-spec"}))
    failed = jobs.wait_phase("GenericJob", "refused", "Failed")
    cond = next(c for c in failed["status"]["conditions"] if c["type"] == "Failed")
    assert cond["reason"] == "InvalidSpec"
    assert "merged with its template" in cond["message"]
    assert "cleanUpPolicy" in cond["message"]
    assert jobs.pods("refused") == {}


# -- the operator --------------------------------------------------------------------------------


def test_an_operator_submits_with_template_and_overrides_what_it_must(conn, jobs, templates, controller):
    pod = {"metadata": {"annotations": {SIM: "1s"}},
           "spec": {"containers": [{"name": "pytorch", "image": "torch:2.4",
                                    "env": [{"name": "NCCL_DEBUG", "value": "WARN"}]}]}}  # fmt: skip
    templates.create(template("torch-a100", "PyTorchTrainingJob", pod))
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        op = PyTorchTrainingJobOperator(task_id="train", template="torch-a100", replicas=2, command=["python", "train.py"],
                                        env={"NCCL_DEBUG": "INFO"}, deferrable=False)  # fmt: skip
    out = op.execute(context())
    assert out["phase"] == "Succeeded"
    job = jobs.get("PyTorchTrainingJob", out["name"])
    assert job["spec"]["templateRef"] == {"name": "torch-a100", "kind": "T9kJobTemplate"}
    [worker] = job["spec"]["replicaSpecs"]
    container = worker["template"]["spec"]["containers"][0]
    assert worker["replicas"] == 2
    assert container["image"] == "torch:2.4"
    assert container["command"] == ["python", "train.py"]
    assert {"name": "NCCL_DEBUG", "value": "INFO"} in container["env"]


def test_an_operator_naming_a_missing_template_fails_the_task_with_the_reason(conn, jobs, templates, controller_factory):
    from airflow.sdk.exceptions import AirflowException

    controller_factory("--template-wait", "1")
    with DAG("dag", start_date=datetime(2026, 1, 1), schedule=None):
        op = GenericJobOperator(task_id="train", template="nowhere", deferrable=False)
    with pytest.raises(AirflowException, match="nowhere does not exist"):
        op.execute(context())


def test_the_example_template_and_job_apply_as_shipped(jobs, templates, controller):
    import yaml

    from tests.support.manifests import MANIFESTS

    here = MANIFESTS.parent / "templates"
    shipped = yaml.safe_load((here / "torch-a100.yaml").read_text())
    stored = templates.create(shipped)
    assert stored["spec"] == shipped["spec"]  # nothing pruned, every quantity as written
    jobs.create(yaml.safe_load((here / "pytorch-from-template.yaml").read_text()))
    wait_until(lambda: len(jobs.pods("resnet-from-template")) == 2, timeout=30, what="the example's two workers")
    pod = jobs.pods("resnet-from-template")["resnet-from-template-worker-0"]
    assert pod.spec.containers[0].image.startswith("pytorch/pytorch:")
    assert pod.spec.containers[0].resources.limits["nvidia.com/gpu"] == "8"
