"""CustomResourceDefinitions for every T9k job kind and MindCluster's AscendJob.

Schemas are structural and validate what the seed documents define (enums, minimums,
required fields, duplicate replica types, immutable ``resumeSpecs``); pod templates,
``status`` and fields the documents leave open are kept unpruned. The CRDs carry our
``managed-by`` label, which is how the controller tells them from the T9k platform's own.
"""

from __future__ import annotations

from typing import Any

from airflow_t9k.api.resources import RESOURCES, JobResource
from airflow_t9k.kinds.base import (
    ELASTIC_KINDS,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    MAX_REPLICAS_PER_TYPE,
    MAX_REPLICAS_TOTAL,
    RESTART_POLICIES,
)

S = dict[str, Any]

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


def obj(properties: S | None = None, required: list[str] | None = None, open_: bool = False, **extra: Any) -> S:
    out: S = {"type": "object"}
    if properties:
        out["properties"] = properties
    if required:
        out["required"] = required
    if open_:
        out["x-kubernetes-preserve-unknown-fields"] = True
    out.update(extra)
    return out


def arr(items: S, **extra: Any) -> S:
    return {"type": "array", "items": items, **extra}


def string(**extra: Any) -> S:
    return {"type": "string", **extra}


def integer(minimum: int | None = None, **extra: Any) -> S:
    out: S = {"type": "integer", **extra}
    if minimum is not None:
        out["minimum"] = minimum
    return out


def boolean() -> S:
    return {"type": "boolean"}


def enum(*values: str) -> S:
    return {"type": "string", "enum": list(values)}


OPEN = obj(open_=True)
STRINGS = arr(string())

POD_TEMPLATE = obj(
    {
        "metadata": OPEN,
        "spec": obj(
            {"containers": arr(obj({"name": string()}, ["name"], open_=True), minItems=1)},
            ["containers"],
            open_=True,
        ),
    },
    ["spec"],
    open_=True,
)

REPLICA_TYPE = string(pattern=DNS_LABEL, maxLength=40)

SCHEDULER = obj({"t9kScheduler": obj({"queue": string(), "priority": integer(0)})})

MODE_ENTRY = {"type": REPLICA_TYPE, "skipInitContainer": boolean(), "command": STRINGS}
ELASTIC_ONLY = f"Elastic mode is supported only by {' and '.join(ELASTIC_KINDS)}"


def rule(expression: str, message: str) -> S:
    return {"x-kubernetes-validations": [{"rule": expression, "message": message}]}


# Seed 000's mode table: runMode.elastic is no field of any kind (Elastic is spec.elastic).
RUN_MODE = obj(
    {
        "debug": obj({"enabled": boolean(), "replicaSpecs": arr(obj(MODE_ENTRY, ["type"]))}),
        "pause": obj(
            {"enabled": boolean(), "resumeSpecs": arr(obj({**MODE_ENTRY, "args": STRINGS}, ["type"]))},
            **{
                "x-kubernetes-validations": [
                    {
                        "rule": "has(self.resumeSpecs) == has(oldSelf.resumeSpecs) && "
                        "(!has(self.resumeSpecs) || self.resumeSpecs == oldSelf.resumeSpecs)",
                        "message": "runMode.pause.resumeSpecs is immutable; set it before pausing",
                    }
                ]
            },
        ),
        "elastic": OPEN,  # declared only so the rule below can reject it
    },
    **rule("!has(self.elastic)", f"runMode.elastic is not a field: {ELASTIC_ONLY}, through spec.elastic"),
)
# A T9k kind outside the Elastic column of seed 000: spec.elastic is refused, not ignored.
NO_ELASTIC = rule("!has(self.elastic)", f"spec.elastic: {ELASTIC_ONLY}")
REPLICAS = integer(0, default=1, maximum=MAX_REPLICAS_PER_TYPE)
WORKERS = integer(1, default=1, maximum=MAX_REPLICAS_PER_TYPE)
TOTAL_RULE = f"at most {MAX_REPLICAS_TOTAL} replicas in all"

RULES = arr(obj(additionalProperties=arr(integer(0), minItems=1)))

CLEANUP = enum("All", "None", "Unfinished")
RUN_POLICY = obj(
    {"activeDeadlineSeconds": integer(1), "backoffLimit": integer(0), "cleanUpPolicy": CLEANUP},
    open_=True,
)


def replica_specs(type_schema: S, restart: S, extra: S | None = None) -> S:
    item = obj(
        {"type": type_schema, "replicas": REPLICAS, "restartPolicy": restart, "template": POD_TEMPLATE, **(extra or {})},
        ["type", "template"],
    )
    # maxItems bounds the cost the API server estimates for the sum rule.
    return arr(item, minItems=1, maxItems=64, **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
               **rule(f"self.map(r, has(r.replicas) ? r.replicas : 1).sum() <= {MAX_REPLICAS_TOTAL}", TOTAL_RULE))


TRAINING_RESTART = enum("Never", "OnFailure", "Always", "ExitCode")
ELASTIC = obj(
    {"enabled": boolean(), "minReplicas": integer(1, maximum=MAX_REPLICAS_PER_TYPE),
     "maxReplicas": integer(1, maximum=MAX_REPLICAS_PER_TYPE), "expectedReplicas": integer(0)},
    **{"x-kubernetes-validations": [
        {"rule": "!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
         "message": "elastic.minReplicas must not exceed elastic.maxReplicas"},
    ]},
)  # fmt: skip


def common(**fields: S) -> S:
    return {"scheduler": SCHEDULER, "runMode": RUN_MODE, **fields}


SPECS: dict[str, S] = {
    "GenericJob": obj(
        common(
            replicaSpecs=replica_specs(
                REPLICA_TYPE, obj({"policy": enum(*RESTART_POLICIES), "limit": integer(0)}, ["policy"])
            ),
            successRules=RULES,
            failureRules=RULES,
            service=obj({"ports": arr(obj(
                {"name": string(pattern=DNS_LABEL, maxLength=15), "port": integer(1, maximum=65535),
                 "targetPort": {"x-kubernetes-int-or-string": True}, "protocol": enum("TCP", "UDP", "SCTP")},
                ["name", "port"]), **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]})}),  # fmt: skip
            cleanUpPolicy=CLEANUP,
        ),
        ["replicaSpecs"],
    ),
    "PyTorchTrainingJob": obj(
        common(
            replicaSpecs=replica_specs(REPLICA_TYPE, TRAINING_RESTART, {"scalingWeight": integer(0)}),
            runPolicy=RUN_POLICY,
            torchrunConfig=obj(
                {"enabled": boolean(), "maxRestarts": integer(0), "procPerNode": string(),
                 "rdzvBackend": enum("c10d", "etcd", "etcd-v2"), "extraOptions": STRINGS}, open_=True),  # fmt: skip
            elastic=ELASTIC,
            tensorboardSpec=OPEN,
        ),
        ["replicaSpecs"],
        open_=True,
    ),
    "TensorFlowTrainingJob": obj(
        common(
            replicaSpecs=replica_specs(enum("chief", "worker", "ps", "evaluator"), TRAINING_RESTART),
            runPolicy=RUN_POLICY,
            tensorboardSpec=OPEN,
        ),
        ["replicaSpecs"],
        open_=True,
    ),
    "XGBoostTrainingJob": obj(
        common(replicaSpecs=replica_specs(enum("master", "worker"), TRAINING_RESTART), runPolicy=RUN_POLICY),
        ["replicaSpecs"],
        open_=True,
    ),
    "ColossalAIJob": obj(
        common(
            ssh=obj({"authMountPath": string(pattern="^/"), "sshdPath": string(pattern="^/")}),
            launcher=obj({"image": string(minLength=1), "workingDir": string(), "env": arr(OPEN), "resources": OPEN}, ["image"]),
            worker=obj(
                {"replicas": WORKERS, "procPerWorker": integer(1, default=1),
                 "command": arr(string(), minItems=1), "torchArgs": STRINGS, "template": POD_TEMPLATE},
                ["command", "template"],
            ),  # fmt: skip
            runPolicy=obj({"cleanUpWorkers": boolean()}),
        ),
        ["launcher", "worker"],
    ),
    "DeepSpeedJob": obj(
        common(
            config=OPEN,
            disableCustomEnv=boolean(),
            elastic=ELASTIC,
            runPolicy=RUN_POLICY,
            worker=obj({"replicas": WORKERS, "restartPolicy": TRAINING_RESTART, "template": POD_TEMPLATE}, ["template"]),
        ),
        ["worker"],
        open_=True,
    ),
    "MPIJob": obj(
        common(
            worker=obj(
                {"replicas": WORKERS, "extraMPIArgs": STRINGS, "cmd": STRINGS, "template": POD_TEMPLATE},
                ["template"],
            ),
            mca=obj(additionalProperties=string()),
            ssh=obj({"sshAuthMountPath": string(pattern="^/"), "sshdPath": string(pattern="^/")}),
            mpiHome=string(),
            runPolicy=obj({"cleanUpWorkers": boolean()}),
        ),
        ["worker"],
        open_=True,
    ),
    "BeamJob": obj(
        {"scheduler": SCHEDULER,
         "flinkClusterTemplate": obj({"spec": obj({
             "image": obj({"name": string(minLength=1), "pullPolicy": enum("Always", "IfNotPresent", "Never")}, ["name"], open_=True),
             "jobManager": obj({"accessScope": enum("Cluster", "VPC", "External", "NodePort", "Headless"),
                                "ports": obj(additionalProperties=integer(1, maximum=65535))}, open_=True),
             "taskManager": obj({"replicas": integer(1, maximum=MAX_REPLICAS_PER_TYPE), "ports": obj(additionalProperties=integer(1, maximum=65535))}, open_=True),
             "flinkProperties": obj(additionalProperties=string()),
         }, ["image"], open_=True)}, ["spec"], open_=True),
         "jobTemplate": obj({"spec": obj({"template": POD_TEMPLATE}, ["template"], open_=True)}, ["spec"], open_=True),
         "runPolicy": obj({"cleanUpCluster": boolean()}),
         "runMode": OPEN},  # declared only so the rule below can reject it
        ["flinkClusterTemplate", "jobTemplate"],
        open_=True,
        **{"x-kubernetes-validations": [
            {"rule": "!has(self.runMode)", "message": "BeamJob supports only Immediate mode: Debug and Pause (runMode) are not available"},
        ]},
    ),  # fmt: skip
    "AscendJob": obj(
        {
            "replicaSpecs": obj(
                additionalProperties=obj(
                    {"replicas": REPLICAS, "restartPolicy": TRAINING_RESTART, "template": POD_TEMPLATE},
                    ["template"],
                ),
                minProperties=1,
                maxProperties=4,
                **{"x-kubernetes-validations": [
                    {"rule": "self.all(t, t in ['Master', 'Scheduler', 'Chief', 'Worker'])",
                     "message": "replicaSpecs keys must be Master, Scheduler, Chief or Worker"},
                    {"rule": f"self.map(t, has(self[t].replicas) ? self[t].replicas : 1).sum() <= {MAX_REPLICAS_TOTAL}",
                     "message": TOTAL_RULE},
                ]},
            ),
            "runPolicy": obj(
                {"backoffLimit": integer(-1), "activeDeadlineSeconds": integer(1), "cleanPodPolicy": enum("All", "Running", "None"),
                 "ttlSecondsAfterFinished": integer(0),
                 "schedulingPolicy": obj({"minAvailable": integer(0), "queue": string(), "priorityClass": string()}, open_=True)},
                open_=True,
            ),
            "successPolicy": enum("", "AllWorkers"),
            "schedulerName": string(),
        },
        ["replicaSpecs"],
        open_=True,
    ),  # fmt: skip
}

PRINTER_COLUMNS = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Running", "type": "integer", "jsonPath": ".status.aggregate.running"},
    {"name": "Succeeded", "type": "integer", "jsonPath": ".status.aggregate.succeeded"},
    {"name": "Failed", "type": "integer", "jsonPath": ".status.aggregate.failed"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]
# Kubeflow-style status: the last condition is the latest change (as `kubectl get acjob` shows it).
CONDITION_COLUMNS = [
    {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


# kubectl scale and an HPA drive Elastic jobs through this.
ELASTIC_SCALE = {"specReplicasPath": ".spec.elastic.expectedReplicas", "statusReplicasPath": ".status.elastic.currentReplicas",
                 "labelSelectorPath": ".status.elastic.selector"}  # fmt: skip
SCALE = {"PyTorchTrainingJob": ELASTIC_SCALE, "DeepSpeedJob": ELASTIC_SCALE}


def _with_mode_table(kind: str, spec: S) -> S:
    """Kinds outside seed 000's Elastic column declare spec.elastic only to refuse it."""
    if kind in ELASTIC_KINDS:
        return spec
    rules = spec.get("x-kubernetes-validations", []) + NO_ELASTIC["x-kubernetes-validations"]
    return {**spec, "properties": {**spec["properties"], "elastic": OPEN}, "x-kubernetes-validations": rules}


def crd(resource: JobResource, spec_schema: S) -> S:
    schema = obj(
        {"apiVersion": string(), "kind": string(), "metadata": obj(), "spec": spec_schema, "status": OPEN},
        ["spec"],
        **{"x-kubernetes-validations": [
            {"rule": "self.metadata.name.size() <= 63",
             "message": "metadata.name must be at most 63 characters: it becomes a label value and part of pod and service names"},
        ]},
    )  # fmt: skip
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": resource.crd_name, "labels": {LABEL_MANAGED_BY: MANAGED_BY}},
        "spec": {
            "group": resource.group,
            "scope": "Namespaced",
            "names": {
                "kind": resource.kind,
                "listKind": f"{resource.kind}List",
                "plural": resource.plural,
                "singular": resource.kind.lower(),
                "shortNames": list(resource.short_names),
                "categories": ["t9k", "t9kjobs"],
            },
            "versions": [
                {
                    "name": resource.version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}, **({"scale": SCALE[resource.kind]} if resource.kind in SCALE else {})},
                    "additionalPrinterColumns": CONDITION_COLUMNS if resource.kind == "AscendJob" else PRINTER_COLUMNS,
                }
            ],
        },
    }


def all_crds() -> list[S]:
    return [crd(RESOURCES[kind], _with_mode_table(kind, spec)) for kind, spec in SPECS.items()]
