"""A real Airflow with real users and per-DAG access for the UI tests and benchmark.

SimpleAuthManager grants access per DAG only through teams: ``[core] multi_team`` on, one DAG
bundle per team, and users named ``name:role:team``. A user outside a DAG's team gets 403 on
it, and the DAG list an auth manager returns for them leaves it out.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

PASSWORD = "pw-{}"  # each user's password; written before the api-server generates any


def team_env(home: Path, bundles: dict[str, Path], users: dict[str, str]) -> dict[str, str]:
    """Airflow settings for ``bundles`` (team -> DAG folder) and ``users`` (name -> ``role`` or
    ``role:team``); writes the passwords file the SimpleAuthManager reads."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "simple_auth_manager_passwords.json.generated").write_text(json.dumps({u: PASSWORD.format(u) for u in users}))
    config = [{"name": f"bundle_{team}", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
               "kwargs": {"path": str(path)}, "team_name": team} for team, path in bundles.items()]  # fmt: skip
    return {
        "AIRFLOW__CORE__MULTI_TEAM": "True",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in users.items()),
        "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(config),
    }


class Api:
    """HTTP to one api-server as one of its users (or nobody)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self._tokens: dict[str, str] = {}

    def token(self, user: str) -> str:
        if user not in self._tokens:
            status, body = self.call("POST", "/auth/token", body={"username": user, "password": PASSWORD.format(user)})
            assert status in (200, 201), (status, body)
            self._tokens[user] = body["access_token"]
        return self._tokens[user]

    def call(self, method: str, path: str, user: str | None = None, body: Any = None) -> tuple[int, Any]:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if user:
            headers["Authorization"] = f"Bearer {self.token(user)}"
        req = urllib.request.Request(self.base + path, method=method, headers=headers,
                                     data=json.dumps(body).encode() if body is not None else None)  # fmt: skip
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                status, raw = r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read().decode()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw
