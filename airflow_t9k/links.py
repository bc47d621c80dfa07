"""Extra links on every operator: "T9k Job", shown as soon as the job is submitted, and
"TensorBoard" / "MLflow" when the task gives their URLs (``tensorboard_url=``, ``mlflow_url=``).

The job's identity is pushed to XCom before the task defers; Airflow 3 builds links on the
worker for every task state, deferred included, so the link is there while the job runs. The
tools' links are pushed under the links' own XCom keys at submission too, so they are there
while a task waits on the worker.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink
from airflow.sdk.configuration import conf

from airflow_t9k.api.identity import checked
from airflow_t9k.api.paths import job_path
from airflow_t9k.api.resources import resource_for

XCOM_IDENTITY = "t9k_job"
# {namespace}, {name}, {kind}, {uid} in a tool's URL are the submitted job's (after Jinja).
JOB_FIELDS = ("namespace", "name", "kind", "uid")


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

        return recorded_url(XCom.get_value(ti_key=ti_key, key=XCOM_IDENTITY))


def recorded_url(value: Any) -> str:
    """The link for what the task recorded under ``t9k_job``, '' unless it is a well-formed
    identity (api/identity.py): the task's own code can push anything there, and its fields go
    into the link's path. The API server's address is used only when it is an http(s) URL."""
    identity = checked(value)
    if identity is None:
        return ""
    server = value.get("server")
    if isinstance(server, str) and server.lower().startswith(("http://", "https://")) and not any(c in server for c in "?#\\ "):
        identity["server"] = server.rstrip("/")
    return job_url(identity)


def tool_url(template: str | None, identity: dict[str, Any] | None) -> str:
    """A tool's URL as the task gave it (Jinja already rendered) with ``{namespace}``, ``{name}``,
    ``{kind}`` and ``{uid}`` replaced by the job's; only http(s) URLs, '' otherwise."""
    if not template or not isinstance(template, str):
        return ""
    url = template.strip()
    known = checked(identity) or {}  # fields the task's own code could have pushed are checked first
    for key in JOB_FIELDS:
        url = url.replace("{" + key + "}", str(known.get(key) or ""))
    return url if url.lower().startswith(("http://", "https://")) else ""


class _ToolLink(BaseOperatorLink):
    attribute = ""

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        template = getattr(operator, self.attribute, None)
        if not template:
            return ""
        from airflow.sdk.execution_time.xcom import XCom

        return tool_url(template, XCom.get_value(ti_key=ti_key, key=XCOM_IDENTITY))


class TensorBoardLink(_ToolLink):
    """The operator's ``tensorboard_url``, templated."""

    name = "TensorBoard"
    attribute = "tensorboard_url"


class MLflowLink(_ToolLink):
    """The operator's ``mlflow_url``, templated."""

    name = "MLflow"
    attribute = "mlflow_url"


TOOL_LINKS = (TensorBoardLink(), MLflowLink())
