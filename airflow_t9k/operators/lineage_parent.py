"""Part of ``T9kJobOperator``: the task's OpenLineage run handed to every replica, as environment.

The OpenLineage provider's Spark integration passes the Airflow task's run to the Spark job it
submits (``spark.openlineage.parentJobNamespace`` ... ``rootParentRunId``,
``inject_parent_job_information_into_spark_properties``), and its dbt integration reads
``OPENLINEAGE_PARENT_ID`` / ``OPENLINEAGE_ROOT_PARENT_ID``. We do the same for a training job:
every container of every replica gets

- ``OPENLINEAGE_PARENT_ID``: ``<namespace>/<dag_id>.<task_id>/<run id>`` (the provider's
  ``lineage_parent_id`` macro), and its parts ``OPENLINEAGE_PARENT_JOB_NAMESPACE``,
  ``OPENLINEAGE_PARENT_JOB_NAME``, ``OPENLINEAGE_PARENT_RUN_ID``;
- ``OPENLINEAGE_ROOT_PARENT_ID``: the DAG run's (``lineage_root_parent_id``; a DAG run started
  with OpenLineage parent information in its conf has that root), and its parts
  ``OPENLINEAGE_ROOT_PARENT_JOB_NAMESPACE``, ``..._JOB_NAME``, ``..._RUN_ID``;

so a training script's own lineage events (``ParentRunFacet``) nest under the Airflow task. The
run id is the one the provider's listener reports for this try of the task.

Only where ``apache-airflow-providers-openlineage`` is installed and enabled (a transport is
configured, ``[openlineage] disabled`` is not set). The opt-out follows the provider's Spark one
(``[openlineage] spark_inject_parent_job_info``): ``openlineage_inject_parent_job_info=False`` on
the operator, or ``[t9k] openlineage_inject_parent_job_info = False`` for every task. A container
that sets any of these variables itself keeps its own (the provider skips properties already
given). Lineage never fails a task: anything that goes wrong is logged and the job is submitted
without the variables.
"""

from __future__ import annotations

from typing import Any

from airflow_t9k.api.podtemplates import pod_templates

Obj = dict[str, Any]

PARTS = ("JOB_NAMESPACE", "JOB_NAME", "RUN_ID")
PARENT_ID, ROOT_PARENT_ID = "OPENLINEAGE_PARENT_ID", "OPENLINEAGE_ROOT_PARENT_ID"
NAMES = (PARENT_ID, *(f"OPENLINEAGE_PARENT_{p}" for p in PARTS), ROOT_PARENT_ID, *(f"OPENLINEAGE_ROOT_PARENT_{p}" for p in PARTS))
CONFIG = ("t9k", "openlineage_inject_parent_job_info")


def parent_env(parent: tuple[str, str, str], root: tuple[str, str, str]) -> list[Obj]:
    """The variables for a parent run and a root run, each ``(namespace, job name, run id)``."""
    out = [{"name": PARENT_ID, "value": "/".join(parent)}]
    out += [{"name": f"OPENLINEAGE_PARENT_{p}", "value": v} for p, v in zip(PARTS, parent, strict=True)]
    out.append({"name": ROOT_PARENT_ID, "value": "/".join(root)})
    out += [{"name": f"OPENLINEAGE_ROOT_PARENT_{p}", "value": v} for p, v in zip(PARTS, root, strict=True)]
    return out


def _containers(spec: Obj) -> list[Obj]:
    groups = [spec.get(k) for k in ("initContainers", "containers")]
    return [c for group in groups if isinstance(group, list) for c in group if isinstance(c, dict)]


def inject(job: Obj, env: list[Obj]) -> int:
    """Add ``env`` to every container of every pod template of ``job`` (in place) that sets none of
    these variables itself (and to a ColossalAI launcher's ``env``); how many got them."""
    targets: list[Obj] = []
    for template in pod_templates(job):
        spec = template.get("spec")
        if isinstance(spec, dict):
            targets += _containers(spec)
    launcher = (job.get("spec") or {}).get("launcher")
    if job.get("kind") == "ColossalAIJob" and isinstance(launcher, dict):
        targets.append(launcher)
    done = 0
    for target in targets:
        given = target.get("env")
        if given is not None and not isinstance(given, list):
            continue  # malformed: left for the API server to refuse, naming the field
        if any(isinstance(e, dict) and e.get("name") in NAMES for e in given or []):
            continue
        target["env"] = [*(given or []), *(dict(e) for e in env)]
        done += 1
    return done


def lineage_ids(ti: Any) -> tuple[tuple[str, str, str], tuple[str, str, str]] | None:
    """The task's run and its root run, from the provider's macros; None where the provider is
    missing or disabled."""
    try:
        from airflow.providers.openlineage import conf as ol_conf
        from airflow.providers.openlineage.plugins import macros
    except ImportError:
        return None
    if ol_conf.is_disabled():
        return None
    parent = (macros.lineage_job_namespace(), macros.lineage_job_name(ti), macros.lineage_run_id(ti))
    root = (macros.lineage_root_job_namespace(ti), macros.lineage_root_job_name(ti), macros.lineage_root_run_id(ti))
    return tuple(str(v) for v in parent), tuple(str(v) for v in root)  # type: ignore[return-value]


class LineageParentMixin:
    """Adds the task's OpenLineage run to the job's replicas (module docstring)."""

    openlineage_inject_parent_job_info: bool | None
    log: Any

    def _init_lineage_parent(self, inject_parent: bool | None) -> None:
        if inject_parent is not None and not isinstance(inject_parent, bool):
            raise ValueError(f"openlineage_inject_parent_job_info must be True, False or None, got {inject_parent!r}")
        self.openlineage_inject_parent_job_info = inject_parent

    def _lineage_parent_wanted(self) -> bool:
        if self.openlineage_inject_parent_job_info is not None:
            return self.openlineage_inject_parent_job_info
        from airflow.sdk.configuration import conf

        return conf.getboolean(*CONFIG, fallback=True)

    def _apply_lineage_parent(self, job: Obj, context: Any) -> None:
        """Called while the job is rendered for a run (``render_job``)."""
        if not self._lineage_parent_wanted():
            return
        try:
            ids = lineage_ids(context["ti"])
        except Exception as exc:  # noqa: BLE001 - lineage must not fail the task (a dry run's placeholder ti, a provider change)
            self.log.warning("OpenLineage parent run not passed to the job's replicas: %s", exc)
            return
        if ids is not None:
            inject(job, parent_env(*ids))
