"""The "T9k Job" extra link on every operator, shown as soon as the job is submitted.

The job's identity is pushed to XCom before the task defers; Airflow 3 builds links on the
worker for every task state, deferred included, so the link is there while the job runs.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink
from airflow.sdk.configuration import conf

from airflow_t9k.api.paths import job_path
from airflow_t9k.api.resources import resource_for

XCOM_IDENTITY = "t9k_job"


def job_url(identity: dict[str, Any], template: str | None = None) -> str:
    """``[t9k] dashboard_url_template`` (``{namespace}``, ``{name}``, ``{kind}``, ``{plural}``,
    ``{uid}``), else the job's path on the Kubernetes API server."""
    resource = resource_for(identity["kind"])
    template = template if template is not None else conf.get("t9k", "dashboard_url_template", fallback="")
    if template:
        return template.format(plural=resource.plural, **{k: identity.get(k, "") for k in ("namespace", "name", "kind", "uid")})
    return f"{identity.get('server') or ''}{job_path(resource, identity['namespace'], identity['name'])}"


class T9kJobLink(BaseOperatorLink):
    name = "T9k Job"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        from airflow.sdk.execution_time.xcom import XCom

        identity = XCom.get_value(ti_key=ti_key, key=XCOM_IDENTITY)
        return job_url(identity) if identity else ""
