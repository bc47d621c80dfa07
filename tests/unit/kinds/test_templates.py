"""The merge rules of job templates (kinds/templates.py): one row per rule, the job's value winning."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from airflow_t9k.kinds.templates import ANNOTATION, TemplateError, apply_template, merge_pod, merge_spec, unresolved, wanted

Obj = dict[str, Any]


def c(**fields: Any) -> Obj:
    return {"name": "pytorch", **fields}


def pod(*containers: Obj, **spec: Any) -> Obj:
    return {"spec": {"containers": list(containers), **spec}} if containers else {"spec": spec}


# (what, the template's pod template, the job's, the merged pod template)
POD_RULES = [
    (
        "the template gives the image",
        pod(c(image="torch:2.4")),
        pod(c(command=["python"])),
        pod(c(image="torch:2.4", command=["python"])),
    ),
    ("the job's image wins", pod(c(image="torch:2.4")), pod(c(image="torch:2.5")), pod(c(image="torch:2.5"))),
    (
        "command and args are the job's whole, not merged item by item",
        pod(c(image="i", args=["--a", "--b"])),
        pod(c(args=["--c"])),
        pod(c(image="i", args=["--c"])),
    ),
    (
        "env merges by name: the template's order, the job's entry replacing, the job's new ones after",
        pod(c(env=[{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])),
        pod(c(env=[{"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}, {"name": "C", "value": "3"}])),
        pod(
            c(
                env=[
                    {"name": "A", "value": "1"},
                    {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "C", "value": "3"},
                ]
            )
        ),
    ),
    (
        "volumes merge by name, the job's replacing whole (never two sources in one volume)",
        pod(
            volumes=[
                {"name": "shm", "emptyDir": {"medium": "Memory"}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "a"}},
            ]
        ),
        pod(volumes=[{"name": "data", "emptyDir": {}}, {"name": "out", "emptyDir": {}}]),
        pod(
            volumes=[
                {"name": "shm", "emptyDir": {"medium": "Memory"}},
                {"name": "data", "emptyDir": {}},
                {"name": "out", "emptyDir": {}},
            ]
        ),
    ),
    (
        "volumeMounts merge by mountPath",
        pod(c(volumeMounts=[{"name": "shm", "mountPath": "/dev/shm"}, {"name": "d", "mountPath": "/data"}])),
        pod(c(volumeMounts=[{"name": "mine", "mountPath": "/dev/shm"}])),
        pod(c(volumeMounts=[{"name": "mine", "mountPath": "/dev/shm"}, {"name": "d", "mountPath": "/data"}])),
    ),
    (
        "tolerations are appended, an identical one once",
        pod(tolerations=[{"key": "gpu", "operator": "Exists"}]),
        pod(tolerations=[{"key": "gpu", "operator": "Exists"}, {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]),
        pod(tolerations=[{"key": "gpu", "operator": "Exists"}, {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]),
    ),
    (
        "envFrom is appended",
        pod(c(envFrom=[{"secretRef": {"name": "s3"}}])),
        pod(c(envFrom=[{"configMapRef": {"name": "cfg"}}])),
        pod(c(envFrom=[{"secretRef": {"name": "s3"}}, {"configMapRef": {"name": "cfg"}}])),
    ),
    (
        "nodeSelector merges by key, the job's value winning",
        pod(nodeSelector={"gpu": "a100", "zone": "a"}),
        pod(nodeSelector={"zone": "b"}),
        pod(nodeSelector={"gpu": "a100", "zone": "b"}),
    ),
    (
        "resources merge per resource name",
        pod(c(resources={"limits": {"nvidia.com/gpu": 8, "cpu": "16"}, "requests": {"cpu": "8"}})),
        pod(c(resources={"limits": {"nvidia.com/gpu": 1}})),
        pod(c(resources={"limits": {"nvidia.com/gpu": 1, "cpu": "16"}, "requests": {"cpu": "8"}})),
    ),
    (
        "the service account comes from the template",
        pod(serviceAccountName="trainer"),
        pod(c(image="i")),
        pod(c(image="i"), serviceAccountName="trainer"),
    ),
    (
        "the job's service account wins",
        pod(serviceAccountName="trainer"),
        pod(serviceAccountName="mine"),
        pod(serviceAccountName="mine"),
    ),
    (
        "labels and annotations merge by key",
        {"metadata": {"labels": {"team": "a", "x": "1"}, "annotations": {"n": "1"}}},
        {"metadata": {"labels": {"x": "2"}}},
        {"metadata": {"labels": {"team": "a", "x": "2"}, "annotations": {"n": "1"}}},
    ),
    (
        "containers merge by name; one the template lacks is added",
        pod(c(image="i"), {"name": "sidecar", "image": "s"}),
        pod({"name": "logger", "image": "l"}),
        pod(c(image="i"), {"name": "sidecar", "image": "s"}, {"name": "logger", "image": "l"}),
    ),
    (
        "init containers merge by name",
        pod(initContainers=[{"name": "fetch", "image": "f", "args": ["a"]}]),
        pod(initContainers=[{"name": "fetch", "args": ["b"]}]),
        pod(initContainers=[{"name": "fetch", "image": "f", "args": ["b"]}]),
    ),
    (
        "ports merge by containerPort and protocol (TCP when left out)",
        pod(c(ports=[{"containerPort": 23456, "name": "a"}, {"containerPort": 53, "protocol": "UDP"}])),
        pod(c(ports=[{"containerPort": 23456, "protocol": "TCP", "name": "b"}])),
        pod(c(ports=[{"containerPort": 23456, "protocol": "TCP", "name": "b"}, {"containerPort": 53, "protocol": "UDP"}])),
    ),
    (
        "imagePullSecrets merge by name",
        pod(imagePullSecrets=[{"name": "reg"}]),
        pod(imagePullSecrets=[{"name": "reg"}, {"name": "mine"}]),
        pod(imagePullSecrets=[{"name": "reg"}, {"name": "mine"}]),
    ),
    (
        "affinity merges by key; its lists are the job's",
        {"spec": {"affinity": {"nodeAffinity": {"a": [1]}, "podAntiAffinity": {"b": [2]}}}},
        {"spec": {"affinity": {"nodeAffinity": {"a": [3]}}}},
        {"spec": {"affinity": {"nodeAffinity": {"a": [3]}, "podAntiAffinity": {"b": [2]}}}},
    ),
    (
        "a job that gives nothing gets the template",
        pod(c(image="i"), serviceAccountName="t"),
        None,
        pod(c(image="i"), serviceAccountName="t"),
    ),
    ("a template that gives nothing leaves the job", {}, pod(c(image="i")), pod(c(image="i"))),
]


@pytest.mark.parametrize(("what", "template", "job", "merged"), POD_RULES, ids=[r[0] for r in POD_RULES])
def test_pod_template_rules(what, template, job, merged):
    before = copy.deepcopy((template, job))
    assert merge_pod(template, job) == merged, what
    assert (template, job) == before  # pure: neither input changes


SPEC_RULES = [
    (
        "mappings merge by key, the job's winning",
        {"runPolicy": {"backoffLimit": 5, "cleanUpPolicy": "All"}},
        {"runPolicy": {"backoffLimit": 1}},
        {"runPolicy": {"backoffLimit": 1, "cleanUpPolicy": "All"}},
    ),
    (
        "lists are the job's whole (a spec's lists are not the Pod API's)",
        {"torchrunConfig": {"extraOptions": ["--a"]}},
        {"torchrunConfig": {"extraOptions": ["--b"]}},
        {"torchrunConfig": {"extraOptions": ["--b"]}},
    ),
    (
        "GenericJob service ports are not merged like container ports",
        {"service": {"ports": [{"name": "a", "port": 1}]}},
        {"service": {"ports": [{"name": "b", "port": 1}]}},
        {"service": {"ports": [{"name": "b", "port": 1}]}},
    ),
    (
        "what only the template gives is kept",
        {"scheduler": {"t9kScheduler": {"queue": "gpu"}}},
        {"replicaSpecs": []},
        {"scheduler": {"t9kScheduler": {"queue": "gpu"}}, "replicaSpecs": []},
    ),
]


@pytest.mark.parametrize(("what", "template", "job", "merged"), SPEC_RULES, ids=[r[0] for r in SPEC_RULES])
def test_job_spec_rules(what, template, job, merged):
    assert merge_spec(template, job) == merged, what


def tmpl(kind: str = "PyTorchTrainingJob", **spec: Any) -> Obj:
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "T9kJobTemplate",
            "metadata": {"name": "torch-a100", "namespace": "ns", "uid": "u1", "resourceVersion": "42"},
            "spec": {"jobKind": kind, **spec}}  # fmt: skip


def job(kind: str = "PyTorchTrainingJob", **spec: Any) -> Obj:
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": kind, "metadata": {"name": "j", "namespace": "ns"},
            "spec": {"templateRef": {"name": "torch-a100"}, **spec}}  # fmt: skip


def test_per_replica_type_templates_come_between_the_common_one_and_the_job():
    t = tmpl(
        template=pod(c(image="torch", resources={"limits": {"cpu": "4"}})),
        replicaTemplates={"worker": pod(c(resources={"limits": {"nvidia.com/gpu": 8}}))},
    )
    j = job(
        replicaSpecs=[{"type": "master", "replicas": 1}, {"type": "worker", "replicas": 4, "template": pod(c(command=["run"]))}]
    )
    merged = apply_template(j, t)
    master, worker = (r["template"]["spec"]["containers"][0] for r in merged["spec"]["replicaSpecs"])
    assert master == c(image="torch", resources={"limits": {"cpu": "4"}})
    assert worker == c(image="torch", resources={"limits": {"cpu": "4", "nvidia.com/gpu": 8}}, command=["run"])
    assert [r["replicas"] for r in merged["spec"]["replicaSpecs"]] == [1, 4]  # replica counts are the job's


def test_the_job_records_the_template_and_its_resource_version_and_is_no_longer_unresolved():
    j = job(replicaSpecs=[{"type": "worker", "replicas": 1}])
    assert unresolved(j)
    assert wanted(j) == ("T9kJobTemplate", "ns", "torch-a100")
    merged = apply_template(j, tmpl(template=pod(c(image="i")), deprecated=True, deprecationMessage="use torch-h100"))
    assert json.loads(merged["metadata"]["annotations"][ANNOTATION]) == {
        "kind": "T9kJobTemplate", "name": "torch-a100", "namespace": "ns", "uid": "u1", "resourceVersion": "42",
        "deprecated": "use torch-h100"}  # fmt: skip
    assert unresolved(merged)  # until the controller records the merge in status
    assert not unresolved({**merged, "status": {"template": json.loads(merged["metadata"]["annotations"][ANNOTATION])}})
    assert merged["spec"]["templateRef"] == {"name": "torch-a100"}  # kept: what the user wrote stays
    assert "annotations" not in j["metadata"]  # the job given is not changed


def test_a_cluster_template_is_looked_up_without_a_namespace():
    j = job(replicaSpecs=[])
    j["spec"]["templateRef"] = {"name": "torch", "kind": "ClusterT9kJobTemplate"}
    assert wanted(j) == ("ClusterT9kJobTemplate", "", "torch")


@pytest.mark.parametrize(
    ("kind", "spec", "where"),
    [
        ("MPIJob", {"worker": {"replicas": 2, "cmd": ["run"]}}, lambda s: s["worker"]["template"]),
        ("DeepSpeedJob", {"worker": {"replicas": 2}}, lambda s: s["worker"]["template"]),
        (
            "AscendJob",
            {"replicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 1}}},
            lambda s: s["replicaSpecs"]["Worker"]["template"],
        ),
        ("BeamJob", {}, lambda s: s["jobTemplate"]["spec"]["template"]),
    ],
)
def test_every_kind_gets_the_pod_template_where_it_holds_its_pods(kind, spec, where):
    merged = apply_template(job(kind, **spec), tmpl(kind, template=pod(c(image="i"), serviceAccountName="t")))
    assert where(merged["spec"]) == pod(c(image="i"), serviceAccountName="t")


@pytest.mark.parametrize(
    ("template", "replicas", "error"),
    [
        (
            tmpl("MPIJob", template=pod(c(image="i"))),
            [{"type": "worker", "replicas": 1}],
            "is for MPIJob, not PyTorchTrainingJob",
        ),
        (tmpl(jobSpec={"runPolicy": {}}), [{"type": "worker", "replicas": 1}], "replica type worker has no container"),
        (
            tmpl(template=pod(c(command=["x"]))),
            [{"type": "worker", "replicas": 1}],
            "container 'pytorch' of replica type worker has no image",
        ),
        (
            tmpl(template=pod(c(image="i"))),
            [{"type": "worker", "replicas": 1, "template": pod({"name": "main", "command": ["x"]})}],
            "container 'main' of replica type worker has no image",
        ),
    ],
)
def test_a_template_that_cannot_make_the_job_whole_is_an_error_naming_why(template, replicas, error):
    with pytest.raises(TemplateError, match=error):
        apply_template(job(replicaSpecs=replicas), template)


def test_the_example_template_and_job_merge_as_the_docs_say():
    from pathlib import Path

    import yaml

    here = Path(__file__).resolve().parents[3] / "examples" / "templates"
    t = yaml.safe_load((here / "torch-a100.yaml").read_text())
    t["metadata"].update(namespace="ns", uid="u", resourceVersion="1")
    j = yaml.safe_load((here / "pytorch-from-template.yaml").read_text())
    j["metadata"]["namespace"] = "ns"
    merged = apply_template(j, t)
    [worker] = merged["spec"]["replicaSpecs"]
    container = worker["template"]["spec"]["containers"][0]
    assert container["image"].startswith("pytorch/pytorch:")
    assert container["command"][:2] == ["python", "train.py"]
    assert container["env"] == [{"name": "NCCL_DEBUG", "value": "WARN"}, {"name": "OMP_NUM_THREADS", "value": "4"}]
    assert container["resources"]["limits"] == {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": 8}
    assert worker["restartPolicy"] == "ExitCode"
    assert merged["spec"]["runPolicy"]["backoffLimit"] == 2


def test_airflow_t9k_check_merges_a_template_given_beside_the_job():
    from pathlib import Path

    from airflow_t9k.cli import check_text

    here = Path(__file__).resolve().parents[3] / "examples" / "templates"
    template_text, job_text = (here / "torch-a100.yaml").read_text(), (here / "pytorch-from-template.yaml").read_text()
    assert check_text(job_text) == []  # its template is checked when the controller merges it
    assert check_text(template_text + "---\n" + job_text) == []
    no_image = template_text.replace("  image: pytorch", "  # image: pytorch")
    [problem] = check_text(no_image + "---\n" + job_text)
    assert "container 'pytorch' of replica type worker has no image: neither the job nor T9kJobTemplate torch-a100" in problem
