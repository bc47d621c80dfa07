"""The job kinds this package knows, with their API coordinates.

An explicit table, because pluralising a kind by appending "s" (as Airflow's provider
does) is wrong for kinds like ``MPIJob`` -> ``mpijobs`` only by luck.
"""

from __future__ import annotations

from dataclasses import dataclass

T9K_GROUP = "batch.tensorstack.dev"
T9K_VERSION = "v1beta1"


@dataclass(frozen=True)
class JobResource:
    group: str
    version: str
    kind: str
    plural: str
    short_names: tuple[str, ...]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"


def _t9k(kind: str, *short: str) -> JobResource:
    return JobResource(T9K_GROUP, T9K_VERSION, kind, kind.lower() + "s", short)


RESOURCES: dict[str, JobResource] = {
    r.kind: r
    for r in (
        _t9k("GenericJob", "gj"),
        _t9k("PyTorchTrainingJob", "pj", "ptj"),
        _t9k("TensorFlowTrainingJob", "tj", "tfj"),
        _t9k("XGBoostTrainingJob", "xj", "xgbj"),
        _t9k("ColossalAIJob", "cj", "caj"),
        _t9k("DeepSpeedJob", "dj", "dsj"),
        _t9k("MPIJob", "mj", "mpij"),
        _t9k("BeamJob", "bj"),
        # MindCluster's AscendJob (seed 002): its own group, reconciled by the same core.
        JobResource("mindxdl.gitee.com", "v1", "AscendJob", "ascendjobs", ("acjob",)),
    )
}


# Job templates (docs/templates.md): a namespaced and a cluster-scoped kind, not jobs themselves.
TEMPLATE_RESOURCES: dict[str, JobResource] = {
    "T9kJobTemplate": JobResource(T9K_GROUP, T9K_VERSION, "T9kJobTemplate", "t9kjobtemplates", ("t9kjt",)),
    "ClusterT9kJobTemplate": JobResource(T9K_GROUP, T9K_VERSION, "ClusterT9kJobTemplate", "clustert9kjobtemplates", ("ct9kjt",)),
}


def resource_for(kind: str) -> JobResource:
    try:
        return RESOURCES[kind]
    except KeyError:
        known = ", ".join(sorted(RESOURCES))
        raise KeyError(f"unknown job kind {kind!r}; known kinds: {known}") from None
