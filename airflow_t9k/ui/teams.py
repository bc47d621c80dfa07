"""Which namespaces each Airflow team's jobs may be in, for the UI (``[t9k] team_namespaces``). Pure.

The UI reads and changes jobs with one identity for every user. Where namespaces are handed to
teams, a task of team A has no business naming a job in team B's namespace, whatever it
recorded; with the setting, the UI shows and acts on a job only in a namespace of the DAG's own
team. The value is a JSON object, team name -> namespaces; the key ``"*"`` holds the namespaces
of DAGs of no team (or of a team the object does not name)::

    [t9k]
    team_namespaces = {"team_a": ["ml-team-a"], "team_b": ["ml-team-b", "ml-shared"], "*": []}

Empty (the default) keeps today's behaviour: every namespace the UI's identity may read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

ANY_TEAM = "*"
Teams = Mapping[str, frozenset[str]]


class TeamNamespacesError(ValueError):
    """The setting is not a JSON object of lists of namespace names."""


def parse(text: str | None) -> Teams | None:
    """The mapping, or None when the setting is empty (no restriction)."""
    if text is None or not text.strip():
        return None
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise TeamNamespacesError(f"[t9k] team_namespaces is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise TeamNamespacesError("[t9k] team_namespaces must be a JSON object: team name -> list of namespaces")
    out: dict[str, frozenset[str]] = {}
    for team, namespaces in raw.items():
        if not isinstance(namespaces, list) or not all(isinstance(n, str) and n for n in namespaces):
            raise TeamNamespacesError(f"[t9k] team_namespaces: the namespaces of {team!r} must be a list of names")
        out[str(team)] = frozenset(namespaces)
    return out


def allows(teams: Teams | None, team: str | None, namespace: str) -> bool:
    """Whether a DAG of ``team`` (None: of no team) may show and act on a job in ``namespace``."""
    if teams is None:
        return True
    key = team if team is not None and team in teams else ANY_TEAM
    return namespace in teams.get(key, frozenset())
