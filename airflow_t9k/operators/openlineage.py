"""The OpenLineage side of ``LineageMixin``: imported only when the provider calls the operator's
``get_openlineage_facets_on_*``, which it does only where it is installed."""

from __future__ import annotations

import contextlib
from typing import Any, ClassVar
from urllib.parse import urlsplit

from airflow.providers.common.compat.openlineage.facet import Dataset, RunFacet
from airflow.providers.openlineage.extractors import OperatorLineage
from airflow.sdk import Asset, AssetAlias
from attrs import define, field

from airflow_t9k.operators.lineage import job_shape

Obj = dict[str, Any]
FACET = "t9k_job"


@define
class T9kJobRunFacet(RunFacet):
    """The T9k job a task ran: what was submitted (images, replicas per replica type), which
    object (kind, namespace, name, uid), how it ended (phase) and what it used (``status.usage``)."""

    kind: str | None = field(default=None)
    namespace: str | None = field(default=None)
    name: str | None = field(default=None)
    uid: str | None = field(default=None)
    phase: str | None = field(default=None)
    images: list[str] = field(factory=list)
    replicas: dict[str, int] = field(factory=dict)
    usage: dict[str, Any] | None = field(default=None)

    _additional_skip_redact: ClassVar[list[str]] = ["kind", "namespace", "name", "uid", "phase", "images", "replicas"]

    @staticmethod
    def _get_schema() -> str:
        # No schema of its own is published: the generic RunFacet's (its fields are in docs/airflow.md).
        return "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet"


def dataset(asset: Asset) -> Dataset:
    """An Asset as an OpenLineage dataset, named as the OpenLineage provider names it
    (``translate_airflow_asset``, through the converter a provider registered for its scheme), so
    that an Asset is one lineage node whichever task reports it; for a scheme no provider converts,
    namespace ``scheme://authority`` and name the path (OpenLineage's naming for object stores)."""
    try:
        from airflow.providers.common.compat.openlineage.utils.utils import translate_airflow_asset

        translated = translate_airflow_asset(asset, None)
    except Exception:  # noqa: BLE001 - an older provider, or a converter that failed: our own naming
        translated = None
    if translated is not None:
        return Dataset(namespace=translated.namespace, name=translated.name, facets=dict(translated.facets or {}))
    parts = urlsplit(asset.uri)
    if not parts.scheme:
        return Dataset(namespace="airflow", name=asset.uri)
    return Dataset(namespace=f"{parts.scheme}://{parts.netloc}", name=parts.path.lstrip("/") or "/")


def lineage_facets(op: Any, task_instance: Any) -> OperatorLineage[Dataset, RunFacet]:
    recorded: Obj = getattr(op, "_lineage", None) or {}
    inputs = [dataset(a) for a in op.inlets or () if isinstance(a, Asset)]
    outputs = [dataset(a) for a in op.outlets or () if isinstance(a, Asset)]
    key = getattr(op, "asset_from_result", None)
    result = recorded.get("result")
    if (
        key
        and recorded.get("phase") == "Succeeded"
        and isinstance(result, dict)
        and isinstance(result.get(key), str)
        and any(isinstance(o, AssetAlias) for o in op.outlets or ())
    ):
        with contextlib.suppress(ValueError, TypeError):  # the task failed on it already; nothing to report
            outputs.append(dataset(Asset(uri=result[key])))
    images, replicas = job_shape(getattr(op, "rendered_job", None))
    job = recorded.get("job") or {}
    facet = T9kJobRunFacet(kind=job.get("kind"), namespace=job.get("namespace"), name=job.get("name"), uid=job.get("uid"),
                           phase=recorded.get("phase"), images=images, replicas=replicas, usage=op._usage())  # fmt: skip
    return OperatorLineage(inputs=inputs, outputs=outputs, run_facets={FACET: facet})
