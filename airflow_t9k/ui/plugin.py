"""The Airflow plugin (entry point ``airflow.plugins``): the API app and two React views.

Every Airflow process that loads plugins imports this module, so the API app (0.7 s of
imports) is built only when ``fastapi_apps`` is read, which the api-server and ``airflow
plugins`` do. A process without the api-server's packages (a worker with only the task SDK)
gets no app rather than an import error.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.plugins_manager import AirflowPlugin

log = logging.getLogger(__name__)
PREFIX = "/t9k"
# Bundle URLs are relative: the UI resolves them against <base href>, so a non-root
# [api] base_url works too.
NAV = {"name": "T9k Jobs", "bundle_url": "t9k/static/jobs.js", "destination": "nav", "url_route": "t9k-jobs",
       "nav_top_level": True, "icon": "t9k/static/icon.svg"}  # fmt: skip
TAB = {"name": "T9k Job", "bundle_url": "t9k/static/task.js", "destination": "task_instance", "url_route": "t9k-job"}


def _apps() -> list[dict[str, Any]]:
    try:
        from airflow_t9k.ui.api import app
    except ImportError as exc:  # not an api-server (no FastAPI side of Airflow here)
        log.debug("T9k UI API not loaded: %s", exc)
        return []
    return [{"app": app, "url_prefix": PREFIX, "name": "T9k Jobs API"}]


class _OnRead:
    """A class attribute computed when read."""

    def __init__(self, make: Any) -> None:
        self.make = make

    def __get__(self, obj: Any, owner: Any) -> Any:
        return self.make()


class T9kUiPlugin(AirflowPlugin):
    name = "airflow_t9k_ui"
    fastapi_apps = _OnRead(_apps)
    # Airflow reads a plugin's parts from class attributes, as lists; Any: 3.4 types them as its
    # ReactAppDict, which NAV and TAB are (name, bundle_url, destination, url_route...), 3.3 as Any.
    react_apps: list[Any] = [NAV, TAB]  # noqa: RUF012
