"""OpenLineage facets of a T9k job task, for ``apache-airflow-providers-openlineage``.

The provider's listener calls ``get_openlineage_facets_on_complete`` / ``_on_failure`` after the
task ends; this module imports OpenLineage only inside them (through ``lineage_facets``), so the
operators import and run where it is not installed. What they report (docs/airflow.md, "OpenLineage"):

- inputs: the operator's ``inlets`` that are Assets;
- outputs: its ``outlets`` that are Assets, and the asset named by the result (``asset_from_result``)
  of a job that succeeded;
- the run facet ``t9k_job``: kind, namespace, name, uid, phase, the images and replicas per
  replica type of the job as submitted, and what the job used when its status says (the totals
  of ``status.usage`` that XCom ``usage`` holds, docs/usage.md).
"""

from __future__ import annotations

from typing import Any

from airflow_t9k.kinds.registry import KINDS

Obj = dict[str, Any]


def job_shape(job: Obj | None) -> tuple[list[str], dict[str, int]]:
    """The images (sorted, each once) and replicas per replica type of a job manifest."""
    if not isinstance(job, dict) or job.get("kind") not in KINDS:
        return [], {}
    try:
        specs = KINDS[job["kind"]].replica_specs(job)
    except Exception:  # noqa: BLE001 - an invalid manifest has no shape to report; lineage must not fail the task
        return [], {}
    images: set[str] = set()
    for spec in specs:
        pod = (spec.template or {}).get("spec") or {}
        for container in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
            if isinstance(container, dict) and container.get("image"):
                images.add(str(container["image"]))
    return sorted(images), {spec.type: spec.replicas for spec in specs}


class LineageMixin:
    """Part of ``T9kJobOperator``: what the job did, for OpenLineage."""

    inlets: list[Any]
    outlets: list[Any]
    rendered_job: Obj | None
    _lineage: Obj | None

    def _record_lineage(self, job: Obj, phase: Any, result: Any, usage: Obj | None = None) -> None:
        """Called at the end of the task, success or failure: what the facets report. ``usage`` is
        what XCom ``usage`` holds (the totals of the job's ``status.usage``, docs/usage.md)."""
        self._lineage = {"job": {k: job.get(k) for k in ("kind", "namespace", "name", "uid")}, "phase": phase, "result": result,
                         "usage": dict(usage) if isinstance(usage, dict) and usage else None}  # fmt: skip

    def _usage(self) -> Obj | None:
        return (getattr(self, "_lineage", None) or {}).get("usage")

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        from airflow_t9k.operators.openlineage import lineage_facets

        return lineage_facets(self, task_instance)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        from airflow_t9k.operators.openlineage import lineage_facets

        return lineage_facets(self, task_instance)
