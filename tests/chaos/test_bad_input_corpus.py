"""A corpus of malformed, hostile and odd-but-valid jobs of every kind, applied next to healthy
jobs in one namespace with one controller (issue 9, sections 2 and 7).

Each case has a class:

- ``admission``: the API server refuses it (422) and its message names the problem;
- ``failed``: admitted, then the controller ends it Failed with a condition that says what is
  wrong (bounded to 2 KB, whatever the input), and no pod of it is left;
- ``runs``: legitimately runs (shell substitution, huge but bounded values, unicode, zero
  replicas where allowed, unknown annotations, deep nesting where the schema prunes or keeps it).

Every mismatch is reported at once, by case id. Two healthy jobs (one created before the corpus,
one right after it) must reach Running and finish on time while the controller works through
the corpus, and the controller must still be alive at the end.
"""

from __future__ import annotations

import copy
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from airflow_t9k.api.resources import resource_for
from airflow_t9k.controller.reconcile.status import MESSAGE_LIMIT
from airflow_t9k.kinds.base import MAX_REPLICAS_PER_TYPE, MAX_REPLICAS_TOTAL
from tests.kind_jobs import minimal, with_replicas

Obj = dict[str, Any]
KINDS = ["GenericJob", "PyTorchTrainingJob", "TensorFlowTrainingJob", "XGBoostTrainingJob", "MPIJob",
         "DeepSpeedJob", "ColossalAIJob", "BeamJob", "AscendJob"]  # fmt: skip
SHORT = {"GenericJob": "gj", "PyTorchTrainingJob": "pt", "TensorFlowTrainingJob": "tf", "XGBoostTrainingJob": "xgb",
         "MPIJob": "mpi", "DeepSpeedJob": "ds", "ColossalAIJob": "cai", "BeamJob": "beam", "AscendJob": "ac"}  # fmt: skip
ELASTIC_ONLY = "Elastic mode is supported only by PyTorchTrainingJob and DeepSpeedJob"
HEALTHY_RUNNING_WITHIN = 30.0  # seconds from creation, while the corpus is being processed
HEALTHY_DONE_WITHIN = 60.0
CORPUS_WITHIN = 120.0  # every admitted case settled (they take about 20 s on an idle local cluster)


@dataclass
class Case:
    id: str  # also the job's name
    body: Obj
    cls: str  # admission | failed | runs
    needle: str = ""  # in the refusal (admission) or the Failed condition's reason+message (failed)
    check: Callable[[Obj, list[Any]], str | None] | None = None  # runs: the stored job, its pods -> problem


# -- bodies -----------------------------------------------------------------------------------------


def job(kind: str, name: str) -> Obj:
    """A valid job of ``kind`` as a user writes it (the API server assigns uid and generation)."""
    body = minimal(kind, name)
    body["metadata"] = {k: v for k, v in body["metadata"].items() if k in ("name", "labels")}
    return body


def templates(body: Obj) -> list[Obj]:
    spec = body["spec"]
    if body["kind"] in ("MPIJob", "DeepSpeedJob", "ColossalAIJob"):
        return [spec["worker"]["template"]]
    if body["kind"] == "BeamJob":
        return [spec["jobTemplate"]["spec"]["template"]]
    if body["kind"] == "AscendJob":
        return [rs["template"] for rs in spec["replicaSpecs"].values()]
    return [rs["template"] for rs in spec["replicaSpecs"]]


def main(body: Obj) -> Obj:
    """The first container of the first template."""
    return templates(body)[0]["spec"]["containers"][0]


def edit(kind: str, name: str, change: Callable[[Obj], Any]) -> Obj:
    body = job(kind, name)
    change(body)
    return body


def on_main(kind: str, name: str, /, **fields: Any) -> Obj:
    return edit(kind, name, lambda b: main(b).update(fields))


def on_template_spec(kind: str, name: str, /, **fields: Any) -> Obj:
    return edit(kind, name, lambda b: templates(b)[0]["spec"].update(fields))


def deep(levels: int) -> Obj:
    value: Obj = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def generic_types(name: str, *types: tuple[str, int]) -> Obj:
    body = job("GenericJob", name)
    proto = body["spec"]["replicaSpecs"][0]
    body["spec"]["replicaSpecs"] = [{**copy.deepcopy(proto), "type": t, "replicas": n} for t, n in types]
    return body


def ascend(name: str, replicas: dict[str, int], framework: str | None = "pytorch") -> Obj:
    body = job("AscendJob", name)
    proto = body["spec"]["replicaSpecs"]["Master"]
    body["spec"]["replicaSpecs"] = {t: {**copy.deepcopy(proto), "replicas": n} for t, n in replicas.items()}
    if framework is None:
        body["metadata"].pop("labels", None)
    else:
        body["metadata"]["labels"] = {"framework": framework}
    return body


# -- checks for the cases that run ------------------------------------------------------------------


def env_of(pods: list[Any], var: str) -> list[str | None]:
    return [e.value for p in pods for c in p.spec.containers for e in (c.env or []) if e.name == var]


def env_is(var: str, value: str) -> Callable[[Obj, list[Any]], str | None]:
    def check(_: Obj, pods: list[Any]) -> str | None:
        got = env_of(pods, var)
        if not got or any(v != value for v in got):
            return f"{var} on the pods is not the value sent (got {len(got)} value(s), lengths {[len(v or '') for v in got]})"
        return None

    return check


def command_has(text: str) -> Callable[[Obj, list[Any]], str | None]:
    def check(_: Obj, pods: list[Any]) -> str | None:
        found = [p for p in pods for c in p.spec.containers if text in " ".join((c.command or []) + (c.args or []))]
        return None if found else f"no pod's command or args carries {text!r} as written"

    return check


def pod_count(n: int) -> Callable[[Obj, list[Any]], str | None]:
    def check(_: Obj, pods: list[Any]) -> str | None:
        return None if len(pods) == n else f"{len(pods)} pods, expected {n}: {sorted(p.metadata.name for p in pods)}"

    return check


def template_pruned(stored: Obj, _: list[Any]) -> str | None:
    template = templates(stored)[0]
    left = [where for where, obj in (("spec", template["spec"]), ("metadata", template.get("metadata") or {}),
                                     ("container", template["spec"]["containers"][0])) if "hostile" in obj]  # fmt: skip
    return f"the API server kept the deep value in the template's {left}" if left else None


def annotation_kept(stored: Obj, pods: list[Any]) -> str | None:
    if (stored["metadata"].get("annotations") or {}).get("example.com/unknown") != "kept":
        return "the job lost its unknown annotation"
    if not all((p.metadata.annotations or {}).get("example.com/pod-note") == "ünïcode ✓" for p in pods):
        return "a pod lacks the template's unknown annotation"
    return None


def kept(path: tuple[str, ...]) -> Callable[[Obj, list[Any]], str | None]:
    def check(stored: Obj, _: list[Any]) -> str | None:
        value: Any = stored
        for key in path:
            if not isinstance(value, dict) or key not in value:
                return f"the stored job lost {'.'.join(path)}"
            value = value[key]
        return None

    return check


# -- the corpus ----------------------------------------------------------------------------------------

HUGE = "x" * (600 * 1024)  # the API server echoes an invalid value in its message


def admission_cases() -> list[Case]:
    cases: list[Case] = []
    for kind in KINDS:
        s = SHORT[kind]
        cases.append(Case(f"{s}-env-string", on_main(kind, f"{s}-env-string", env="A=1"), "admission", "must be of type array"))
        over = with_replicas(job(kind, f"{s}-over-ceiling"), MAX_REPLICAS_PER_TYPE + 1)
        cases.append(Case(f"{s}-over-ceiling", over, "admission", f"less than or equal to {MAX_REPLICAS_PER_TYPE}"))
        huge_over = with_replicas(job(kind, f"{s}-100k-replicas"), 100_000)
        cases.append(Case(f"{s}-100k-replicas", huge_over, "admission", f"less than or equal to {MAX_REPLICAS_PER_TYPE}"))
    for kind in ("GenericJob", "MPIJob", "DeepSpeedJob", "XGBoostTrainingJob"):
        s = SHORT[kind]
        body = edit(kind, f"{s}-labels-list", lambda b: templates(b)[0].setdefault("metadata", {}).update(labels=["a", "b"]))
        cases.append(Case(body["metadata"]["name"], body, "admission", "metadata.labels in body must be of type object"))
    for kind in ("PyTorchTrainingJob", "TensorFlowTrainingJob", "ColossalAIJob", "BeamJob"):
        s = SHORT[kind]
        cases.append(Case(f"{s}-command-string", on_main(kind, f"{s}-command-string", command="python train.py"),
                          "admission", "command in body must be of type array"))  # fmt: skip
    for kind in ("GenericJob", "AscendJob", "MPIJob"):
        s = SHORT[kind]
        cases.append(Case(f"{s}-init-string", on_template_spec(kind, f"{s}-init-string", initContainers="setup"),
                          "admission", "initContainers in body must be of type array"))  # fmt: skip
    for kind in ("GenericJob", "TensorFlowTrainingJob", "XGBoostTrainingJob", "MPIJob", "ColossalAIJob", "BeamJob", "AscendJob"):
        s = SHORT[kind]
        body = edit(
            kind, f"{s}-elastic", lambda b: b["spec"].update(elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 2})
        )
        cases.append(Case(f"{s}-elastic", body, "admission", ELASTIC_ONLY))
    total = generic_types("gj-over-total", ("a", MAX_REPLICAS_PER_TYPE), ("b", MAX_REPLICAS_PER_TYPE), ("c", 1))
    ac_total = ascend("ac-over-total", {"Master": 1, "Chief": MAX_REPLICAS_PER_TYPE, "Worker": MAX_REPLICAS_PER_TYPE})
    ds_range = edit(
        "DeepSpeedJob",
        "ds-elastic-range",
        lambda b: b["spec"].update(elastic={"enabled": True, "minReplicas": 4, "maxReplicas": 2}),
    )
    huge_policy = edit("PyTorchTrainingJob", "pt-600k-policy", lambda b: b["spec"]["replicaSpecs"][0].update(restartPolicy=HUGE))
    resources_list = on_main("PyTorchTrainingJob", "pt-resources-list", resources=["cpu", "1"])
    port_string = on_main("TensorFlowTrainingJob", "tf-port-string", ports=[{"containerPort": "http"}])
    deep_label = edit("GenericJob", "gj-deep-label", lambda b: templates(b)[0].update(metadata={"labels": {"a": deep(3000)}}))
    bad_label = edit("GenericJob", "gj-bad-job-label", lambda b: b["metadata"].update(labels={"team": "a b/c"}))
    cases += [
        Case("gj-over-total", total, "admission", f"at most {MAX_REPLICAS_TOTAL} replicas in all"),
        Case("ac-over-total", ac_total, "admission", f"at most {MAX_REPLICAS_TOTAL} replicas in all"),
        Case(
            "pt-runmode-elastic",
            edit("PyTorchTrainingJob", "pt-runmode-elastic", lambda b: b["spec"].update(runMode={"elastic": {"enabled": True}})),
            "admission",
            "runMode.elastic is not a field",
        ),
        Case(
            "beam-debug",
            edit("BeamJob", "beam-debug", lambda b: b["spec"].update(runMode={"debug": {"enabled": True}})),
            "admission",
            "BeamJob supports only Immediate mode",
        ),
        Case(
            "xgb-negative",
            edit("XGBoostTrainingJob", "xgb-negative", lambda b: b["spec"]["replicaSpecs"][1].update(replicas=-1)),
            "admission",
            "greater than or equal to 0",
        ),
        Case(
            "ac-replicas-word",
            edit("AscendJob", "ac-replicas-word", lambda b: b["spec"]["replicaSpecs"]["Worker"].update(replicas="two")),
            "admission",
            "must be of type integer",
        ),
        Case(
            "tf-type-master",
            edit("TensorFlowTrainingJob", "tf-type-master", lambda b: b["spec"]["replicaSpecs"][0].update(type="master")),
            "admission",
            "Unsupported value",
        ),
        Case(
            "xgb-type-chief",
            edit("XGBoostTrainingJob", "xgb-type-chief", lambda b: b["spec"]["replicaSpecs"][1].update(type="chief")),
            "admission",
            "Unsupported value",
        ),
        Case("ac-type-foo", ascend("ac-type-foo", {"Master": 1, "Foo": 1}), "admission", "replicaSpecs keys must be"),
        Case("ds-" + "n" * 61, job("DeepSpeedJob", "ds-" + "n" * 61), "admission", "at most 63 characters"),
        Case(
            "beam-no-containers",
            edit("BeamJob", "beam-no-containers", lambda b: templates(b)[0]["spec"].update(containers=[])),
            "admission",
            "containers",
        ),
        Case(
            "ac-no-template",
            edit("AscendJob", "ac-no-template", lambda b: b["spec"]["replicaSpecs"]["Worker"].pop("template")),
            "admission",
            "template: Required value",
        ),
        Case("ds-elastic-range", ds_range, "admission", "elastic.minReplicas must not exceed elastic.maxReplicas"),
        Case(
            "mpi-sshd-relative",
            edit("MPIJob", "mpi-sshd-relative", lambda b: b["spec"].update(ssh={"sshdPath": "usr/sbin/sshd"})),
            "admission",
            "sshdPath",
        ),
        Case(
            "cai-zero-workers",
            edit("ColossalAIJob", "cai-zero-workers", lambda b: b["spec"]["worker"].update(replicas=0)),
            "admission",
            "greater than or equal to 1",
        ),
        Case(
            "beam-no-image",
            edit("BeamJob", "beam-no-image", lambda b: b["spec"]["flinkClusterTemplate"]["spec"].pop("image")),
            "admission",
            "image: Required value",
        ),
        Case(
            "gj-cleanup-sometimes",
            edit("GenericJob", "gj-cleanup-sometimes", lambda b: b["spec"].update(cleanUpPolicy="Sometimes")),
            "admission",
            "cleanUpPolicy",
        ),
        Case(
            "ac-backoff-minus-2",
            edit("AscendJob", "ac-backoff-minus-2", lambda b: b["spec"].update(runPolicy={"backoffLimit": -2})),
            "admission",
            "backoffLimit",
        ),
        Case("pt-600k-policy", huge_policy, "admission", "Unsupported value"),
        Case("pt-resources-list", resources_list, "admission", "resources in body must be of type object"),
        Case("tf-port-string", port_string, "admission", "containerPort in body must be of type integer"),
        Case("gj-deep-label", deep_label, "admission", "metadata.labels.a in body must be of type string"),
        Case("gj-bad-job-label", bad_label, "admission", "metadata.labels"),
    ]
    return cases


def failed_cases() -> list[Case]:
    def gj_cmd(name: str, *command: str) -> Obj:
        return on_main("GenericJob", name, command=list(command))

    # Env names may hold any printable ASCII but '=' (RelaxedEnvironmentVariableValidation).
    huge_env = [{"name": "BAD=" + HUGE, "value": "1"}]
    return [
        Case("gj-rule-unknown-type",
             edit("GenericJob", "gj-rule-unknown-type", lambda b: b["spec"].update(successRules=[{"chief": [0]}])),
             "failed", "names replica type 'chief'"),
        Case("gj-var-unknown-type", gj_cmd("gj-var-unknown-type", "echo", "$(replicas[ps])"), "failed",
             "names replica type 'ps'"),
        # One undeclared port name takes seed 001's implied 2222; two cannot both be it.
        Case("gj-var-no-port", gj_cmd("gj-var-no-port", "echo", "$(service.port[http])", "$(service.port[grpc])"), "failed",
             "neither spec.service.ports nor a"),
        Case("gj-var-rank", gj_cmd("gj-var-rank", "echo", "$(service.worker[9].host)"), "failed", "names rank 9"),
        Case("gj-no-image", edit("GenericJob", "gj-no-image", lambda b: main(b).pop("image")), "failed", "rejected Pod"),
        Case("gj-600k-env-name", on_main("GenericJob", "gj-600k-env-name", env=huge_env), "failed", "rejected Pod"),
        Case("gj-all-zero", generic_types("gj-all-zero", ("a", 0), ("b", 0)), "failed", "nothing to run"),
        Case("gj-debug-unknown", edit("GenericJob", "gj-debug-unknown",
                                      lambda b: b["spec"].update(runMode={"debug": {"enabled": True,
                                                                                    "replicaSpecs": [{"type": "chief"}]}})),
             "failed", "runMode.debug"),
        Case("pt-elastic-no-torchrun", edit("PyTorchTrainingJob", "pt-elastic-no-torchrun",
                                            lambda b: b["spec"].update(elastic={"enabled": True, "minReplicas": 1,
                                                                                "maxReplicas": 2})),
             "failed", "elastic mode needs torchrun"),
        Case("pt-bad-container-name", on_main("PyTorchTrainingJob", "pt-bad-container-name", name="PyTorch_Main"), "failed",
             "rejected Pod"),
        Case("pt-600k-image", on_main("PyTorchTrainingJob", "pt-600k-image", image=" " + HUGE), "failed", "rejected Pod"),
        Case("tf-no-tf-container", on_main("TensorFlowTrainingJob", "tf-no-tf-container", name="trainer"), "failed",
             "container named 'tensorflow'"),
        Case("tf-only-ps", edit("TensorFlowTrainingJob", "tf-only-ps", lambda b: b["spec"]["replicaSpecs"][0].update(type="ps")),
             "failed", "needs a chief or at least one worker"),
        Case("xgb-no-master", edit("XGBoostTrainingJob", "xgb-no-master", lambda b: b["spec"]["replicaSpecs"].pop(0)),
             "failed", "needs a master replica"),
        Case("xgb-bad-volume", edit("XGBoostTrainingJob", "xgb-bad-volume",
                                   lambda b: main(b).update(volumeMounts=[{"name": "missing", "mountPath": "/data"}])),
             "failed", "rejected Pod"),
        Case("mpi-no-cmd", edit("MPIJob", "mpi-no-cmd", lambda b: b["spec"]["worker"].pop("cmd")), "failed",
             "spec.worker.cmd is required"),
        Case("mpi-no-worker-container", on_main("MPIJob", "mpi-no-worker-container", name="other"), "failed",
             "container named 'mpi-worker'"),
        Case("cai-no-worker-container", on_main("ColossalAIJob", "cai-no-worker-container", name="other"), "failed",
             "container named 'worker'"),
        Case("cai-comma-arg", edit("ColossalAIJob", "cai-comma-arg", lambda b: b["spec"]["worker"].update(torchArgs=["--a=1,2"])),
             "failed", "contains a comma"),
        Case("ds-no-run", edit("DeepSpeedJob", "ds-no-run", lambda b: b["spec"].update(config={"run": {}})),
             "failed", "spec.config.run needs exactly one"),
        Case("ds-autotune-maybe",
             edit("DeepSpeedJob", "ds-autotune-maybe", lambda b: b["spec"]["config"].update(autotune="maybe")),
             "failed", "autotune must be none, run or tune"),
        Case("ds-zero-slots", edit("DeepSpeedJob", "ds-zero-slots", lambda b: b["spec"]["config"].update(slotsPerWorker=0)),
             "failed", "slotsPerWorker must be an integer >= 1"),
        Case("ds-bad-mount", edit("DeepSpeedJob", "ds-bad-mount",
                                     lambda b: main(b).update(volumeMounts=[{"name": "nope", "mountPath": "relative"}])),
             "failed", "rejected Pod"),
        Case("beam-no-image-submit", edit("BeamJob", "beam-no-image-submit", lambda b: main(b).pop("image")), "failed", "image"),
        Case("ac-no-framework", ascend("ac-no-framework", {"Master": 1, "Worker": 1}, framework=None), "failed",
             "metadata.labels.framework must be one of"),
        Case("ac-no-leader", ascend("ac-no-leader", {"Worker": 2}), "failed", "needs a Master replica"),
        Case("ac-two-masters", ascend("ac-two-masters", {"Master": 2, "Worker": 1}), "failed", "must be 1"),
        Case("ac-no-ascend-container", edit("AscendJob", "ac-no-ascend-container", lambda b: main(b).update(name="other")),
             "failed", "needs a container named 'ascend'"),
        Case("ac-milli-npu", edit("AscendJob", "ac-milli-npu",
                                  lambda b: main(b).update(resources={"limits": {"huawei.com/Ascend910": "1500m"}})),
             "failed", "whole number of NPUs"),
        Case("ac-600k-env-name", edit("AscendJob", "ac-600k-env-name", lambda b: main(b).update(env=huge_env)), "failed",
             "rejected Pod"),
    ]  # fmt: skip


SUBST = "$(type -P python3)"
BIG = "v" * (100 * 1024)
UNTERMINATED = "$(" + "y" * (112 * 1024)
UNICODE = "训练-ünïcode-🚀-ﬁ-\u200b-عربى"


def runs_cases() -> list[Case]:
    deep_template = edit("GenericJob", "gj-deep-template", lambda b: (
        templates(b)[0]["spec"].update(hostile=deep(3000)),
        templates(b)[0].setdefault("metadata", {}).update(hostile=deep(3000)),
        main(b).update(hostile=deep(3000))))  # fmt: skip
    annotated = edit("XGBoostTrainingJob", "xgb-annotations", lambda b: (
        b["metadata"].update(annotations={"example.com/unknown": "kept", "x" * 60 + ".example.com/long": "y" * 1000}),
        [t.setdefault("metadata", {}).update(annotations={"example.com/pod-note": "ünïcode ✓"})
         for t in templates(b)]))  # fmt: skip
    return [
        Case("gj-shell-subst", on_main("GenericJob", "gj-shell-subst", command=["sh", "-c", f"exec {SUBST} train.py"]), "runs",
             check=command_has(SUBST)),
        Case("pt-shell-subst", on_main("PyTorchTrainingJob", "pt-shell-subst", command=["bash", "-c", f"{SUBST} -m train"]),
             "runs",
             check=command_has(SUBST)),
        Case("mpi-shell-subst",
             edit("MPIJob", "mpi-shell-subst", lambda b: b["spec"]["worker"].update(cmd=["sh", "-c", f"{SUBST} x.py"])),
             "runs"),
        Case("gj-arith-subst",
             on_main("GenericJob", "gj-arith-subst", command=["sh", "-c", "echo $(($(rank)+1)) $$HOME $(HOME)"]),
             "runs", check=command_has("echo $((0+1)) $$HOME $(HOME)")),
        Case("gj-100k-env", on_main("GenericJob", "gj-100k-env", env=[{"name": "BIG", "value": BIG}]), "runs",
             check=env_is("BIG", BIG)),
        Case("gj-112k-unterminated", on_main("GenericJob", "gj-112k-unterminated", env=[{"name": "OPEN", "value": UNTERMINATED}]),
             "runs", check=env_is("OPEN", UNTERMINATED)),
        Case("ds-100k-env", on_main("DeepSpeedJob", "ds-100k-env", env=[{"name": "BIG", "value": BIG}]), "runs",
             check=env_is("BIG", BIG)),
        Case("tf-unicode-env", on_main("TensorFlowTrainingJob", "tf-unicode-env", env=[{"name": "NOTE", "value": UNICODE}]),
             "runs",
             check=env_is("NOTE", UNICODE)),
        Case("ac-unicode-100k", edit("AscendJob", "ac-unicode-100k",
                                     lambda b: main(b).update(env=[{"name": "NOTE", "value": UNICODE * 3000}])),
             "runs", check=env_is("NOTE", UNICODE * 3000)),
        Case("cai-unicode-launcher", edit("ColossalAIJob", "cai-unicode-launcher",
                                          lambda b: b["spec"]["launcher"].update(env=[{"name": "NOTE", "value": UNICODE}])),
             "runs", check=env_is("NOTE", UNICODE)),
        Case("xgb-annotations", annotated, "runs", check=annotation_kept),
        Case("gj-zero-type", generic_types("gj-zero-type", ("idle", 0), ("worker", 1)), "runs", check=pod_count(1)),
        Case("ac-zero-workers", ascend("ac-zero-workers", {"Master": 1, "Worker": 0}), "runs", check=pod_count(1)),
        Case("tf-zero-ps", edit("TensorFlowTrainingJob", "tf-zero-ps", lambda b: b["spec"]["replicaSpecs"].append(
            {**copy.deepcopy(b["spec"]["replicaSpecs"][0]), "type": "ps", "replicas": 0})), "runs", check=pod_count(2)),
        Case("gj-deep-template", deep_template, "runs", check=template_pruned),
        Case("pt-deep-tensorboard",
             edit("PyTorchTrainingJob", "pt-deep-tensorboard", lambda b: b["spec"].update(tensorboardSpec=deep(3000))),
             "runs"),
        Case("ds-deep-config", edit("DeepSpeedJob", "ds-deep-config", lambda b: b["spec"]["config"].update(hostile=deep(3000))),
             "runs"),
        Case("ac-deep-runpolicy",
             edit("AscendJob", "ac-deep-runpolicy", lambda b: b["spec"].update(runPolicy={"extra": deep(3000)})),
             "runs", check=kept(("spec", "runPolicy", "extra"))),
        Case("beam-unknown-field",
             edit("BeamJob", "beam-unknown-field", lambda b: b["spec"].update(futureField={"x": [1, "two", None]})),
             "runs", check=kept(("spec", "futureField"))),
        Case("mpi-odd-mca", edit("MPIJob", "mpi-odd-mca", lambda b: b["spec"].update(mca={"btl": "^openib", "x": "ü $(y) ;|&"})),
             "runs"),
        Case("pt-unknown-runpolicy", edit("PyTorchTrainingJob", "pt-unknown-runpolicy",
                                          lambda b: b["spec"].update(runPolicy={"schedulingPolicy": {"x": 1}, "future": True})),
             "runs"),
    ]  # fmt: skip


CORPUS = admission_cases() + failed_cases() + runs_cases()


# -- observing the namespace --------------------------------------------------------------------------


def healthy(name: str) -> Obj:
    body = job("GenericJob", name)
    body["spec"]["replicaSpecs"][0]["replicas"] = 1
    templates(body)[0]["metadata"] = {"annotations": {"sim.t9k.test/duration": "5s"}}
    return body


def snapshot(jobs: Any) -> tuple[dict[str, Obj], dict[str, list[Any]]]:
    """Every job of every kind and every live pod in the namespace, by job name (one list each)."""
    found: dict[str, Obj] = {}
    for kind in KINDS:
        r = resource_for(kind)
        for item in jobs.api.list_namespaced_custom_object(r.group, r.version, jobs.ns, r.plural)["items"]:
            found[item["metadata"]["name"]] = item
    pods: dict[str, list[Any]] = {}
    for p in jobs.core.list_namespaced_pod(jobs.ns).items:
        owner = (p.metadata.labels or {}).get("batch.tensorstack.dev/job-name") or (p.metadata.labels or {}).get("job-name")
        if owner and not p.metadata.deletion_timestamp:
            pods.setdefault(owner.removesuffix("-batchjob"), []).append(p)
    return found, pods


def state(obj: Obj) -> tuple[str | None, Obj | None]:
    """(Running | Succeeded | Failed | None, the Failed condition) for either status style."""
    status = obj.get("status") or {}
    conds = status.get("conditions") or []
    if obj["kind"] == "AscendJob":
        true = [c["type"] for c in conds if c.get("status") == "True"]
        phase = next((p for p in ("Failed", "Succeeded", "Running") if p in true), None)
    else:
        phase = status.get("phase")
    failed = next((c for c in conds if c["type"] == "Failed" and c.get("status") == "True"), None)
    return phase, failed


def judge(case: Case, obj: Obj, pods: list[Any]) -> tuple[bool, str | None]:
    """(settled, problem): settled once the case reached its class's end (or a wrong end)."""
    phase, failed = state(obj)
    if case.cls == "failed":
        if phase != "Failed":
            return (phase == "Succeeded", f"ended {phase}, expected Failed" if phase == "Succeeded" else None)
        text = f"{failed.get('reason', '')}: {failed.get('message', '')}" if failed else ""
        if case.needle not in text:
            return True, f"Failed, but the condition does not say {case.needle!r}: {text[:300]!r}"
        if len(failed.get("message", "")) > MESSAGE_LIMIT:
            return True, f"condition message is {len(failed['message'])} chars, over {MESSAGE_LIMIT}"
        if pods:
            return False, f"Failed, but its pods are left: {sorted(p.metadata.name for p in pods)}"
        return True, None
    if phase == "Failed":
        return True, f"Failed, expected to run: {text_of(failed)}"
    if phase not in ("Running", "Succeeded"):
        return (
            False,
            (
                f"never Running (phase {phase}, conditions "
                f"{[c.get('type') for c in (obj.get('status') or {}).get('conditions') or []]})"
            ),
        )
    problem = case.check(obj, pods) if case.check else None
    return problem is None, problem


def text_of(cond: Obj | None) -> str:
    return f"{cond.get('reason')}: {str(cond.get('message'))[:300]}" if cond else "no Failed condition"


# -- the test -----------------------------------------------------------------------------------------


def test_bad_input_corpus_next_to_a_healthy_job(jobs, controller, figures):
    ids = [c.id for c in CORPUS]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    assert {c.body["kind"] for c in CORPUS} == set(KINDS)
    for cls in ("admission", "failed", "runs"):
        assert {c.body["kind"] for c in CORPUS if c.cls == cls} >= (
            {"GenericJob", "AscendJob"} if cls != "admission" else set(KINDS)
        )
    assert len(CORPUS) >= 80
    assert all(c.id == c.body["metadata"]["name"] for c in CORPUS)

    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)  # the client copies, encodes and decodes the 3,000-deep bodies recursively
    try:
        run_corpus(jobs, controller, figures)
    finally:
        sys.setrecursionlimit(saved)


class Healthy(threading.Thread):
    """Creates a short healthy GenericJob and times it to Running and to Succeeded, polling on its own."""

    def __init__(self, jobs: Any, name: str) -> None:
        super().__init__(daemon=True)
        self.jobs, self.job_name = jobs, name
        self.created_after: float | None = None  # the controller's share: until its pod exists
        self.scheduled_after: float | None = None  # then the scheduler's: until the pod has a node
        self.running_after: float | None = None
        self.done_after: float | None = None
        self.end: str | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        self.jobs.create(healthy(self.job_name))
        started = time.monotonic()
        while not self.stop.is_set() and self.end is None:
            phase = self.jobs.phase("GenericJob", self.job_name)
            if self.scheduled_after is None:
                pods = self.jobs.pods(self.job_name).values()
                if pods and self.created_after is None:
                    self.created_after = time.monotonic() - started
                if any(p.spec.node_name for p in pods):
                    self.scheduled_after = time.monotonic() - started
            if self.running_after is None and phase in ("Running", "Succeeded"):
                self.running_after = time.monotonic() - started
            if phase in ("Succeeded", "Failed"):
                self.done_after, self.end = time.monotonic() - started, phase
            self.stop.wait(0.2)

    def problem(self) -> str | None:
        if self.running_after is None or self.running_after > HEALTHY_RUNNING_WITHIN:
            return f"Running after {self.running_after}s, allowed {HEALTHY_RUNNING_WITHIN:.0f}s"
        if self.end != "Succeeded" or self.done_after is None or self.done_after > HEALTHY_DONE_WITHIN:
            return f"ended {self.end} after {self.done_after}s, expected Succeeded within {HEALTHY_DONE_WITHIN:.0f}s"
        return None

    def figure(self) -> str:
        return (f"{self.job_name}: pod created after {_s(self.created_after)}, scheduled after {_s(self.scheduled_after)}, "
                f"Running after {_s(self.running_after)}, {self.end} after {_s(self.done_after)}")  # fmt: skip


def _s(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds:.1f}s"


def run_corpus(jobs: Any, controller: Any, figures: Callable[[str], None]) -> None:
    problems: dict[str, str] = {}
    # One healthy job goes in before the corpus, one right after it, while the controller's queue is full.
    first, busy = Healthy(jobs, "healthy-first"), Healthy(jobs, "healthy-busy")
    first.start()
    started = time.monotonic()
    admitted: list[Case] = []
    for case in CORPUS:
        if case.cls == "admission":
            try:
                refusal = jobs.rejected(case.body)
            except AssertionError as exc:
                problems[case.id] = f"not refused at admission: {str(exc)[:300]}"
                continue
            if case.needle not in refusal:
                problems[case.id] = f"refused without {case.needle!r}: {refusal[:400]}"
            continue
        try:
            jobs.create(case.body)
            admitted.append(case)
        except ApiException as exc:
            problems[case.id] = f"refused at admission ({exc.status}), expected {case.cls}: {str(exc.body)[:400]}"
    applied = time.monotonic() - started
    busy.start()

    pending = {c.id: c for c in admitted}
    last: dict[str, str | None] = {}
    settled_at: dict[str, float] = {}
    deadline = time.monotonic() + CORPUS_WITHIN
    try:
        while time.monotonic() < deadline and (pending or first.end is None or busy.end is None):
            found, pods = snapshot(jobs)
            for cid, case in list(pending.items()):
                settled, problem = judge(case, found[cid], pods.get(cid, []))
                last[cid] = problem
                if settled:
                    del pending[cid]
                    settled_at[cid] = time.monotonic() - started
                    if problem:
                        problems[cid] = problem
            time.sleep(0.5)
    finally:
        first.stop.set()
        busy.stop.set()
    for cid in pending:
        problems[cid] = f"not settled within {CORPUS_WITHIN:.0f}s: {last.get(cid)}"
    for h in (first, busy):
        if (problem := h.problem()) is not None:
            problems[h.job_name] = problem

    counts = {cls: sum(c.cls == cls for c in CORPUS) for cls in ("admission", "failed", "runs")}
    figures(f"corpus: {len(CORPUS)} cases ({', '.join(f'{k} {v}' for k, v in counts.items())}) over {len(KINDS)} kinds; "
            f"applied in {applied:.1f}s, {len(settled_at)}/{len(admitted)} admitted settled, the last after "
            f"{max(settled_at.values(), default=0):.1f}s ({max(settled_at, key=settled_at.get, default='-')}); {len(problems)} "
            "mismatched"
            + (f" ({', '.join(sorted(problems))})" if problems else ""))  # fmt: skip
    figures(f"healthy jobs: {first.figure()}; {busy.figure()}")
    alive = controller.proc.poll() is None
    classes = {c.id: c.cls for c in CORPUS} | {"healthy-first": "healthy", "healthy-busy": "healthy"}
    assert not problems, f"controller alive: {alive}\n" + "\n".join(
        f"{cid} [{classes[cid]}]: {p}" for cid, p in sorted(problems.items())
    )
    assert alive, f"controller alive: {alive}\n" + "\n".join(
        f"{cid} [{classes[cid]}]: {p}" for cid, p in sorted(problems.items())
    )
