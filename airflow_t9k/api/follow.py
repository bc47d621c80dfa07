"""Which job a sensor given labels follows: the one match, or the newest try's job of one task.

A task that retried has a job per try (``<name>``, ``<name>-t2``...), all carrying the task's
labels; a sensor following that task (``task=(dag_id, task_id)``, or a selector whose matches
are all one task's jobs) follows the newest try's job (the ``airflow-t9k.io/try-number`` label,
then the newest creation) instead of failing on "matches 2 jobs". Matches of different tasks,
or of jobs no task submitted, are still an error: the sensor cannot tell which one is meant. Pure.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
LABEL = "airflow-t9k.io"
IDENTITY = ("dag-id", "run-id", "task-id", "map-index")


class Ambiguous(ValueError):
    """The matches are not one task's jobs."""


def task_identity(job: Obj) -> tuple[str, ...] | None:
    """(dag, run, task, map index) from the job's annotations; None for a job no task submitted."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    values = tuple(annotations.get(f"{LABEL}/{k}") for k in IDENTITY)
    return values if all(isinstance(v, str) and v for v in values) else None  # type: ignore[return-value]


def try_of(job: Obj) -> int:
    value = ((job.get("metadata") or {}).get("labels") or {}).get(f"{LABEL}/try-number")
    try:
        return int(str(value))
    except ValueError:
        return 0


def choose(matches: list[Obj], what: str) -> Obj | None:
    """The job to follow among ``matches`` (None: none yet); ``Ambiguous`` when they are not
    one task's jobs. ``what`` names the selector in the message."""
    if len(matches) <= 1:
        return matches[0] if matches else None
    identities = {task_identity(j) for j in matches}
    if None in identities or len(identities) > 1:
        names = ", ".join(sorted(str(j["metadata"]["name"]) for j in matches))
        tasks = "" if None in identities else f" of {len(identities)} tasks"
        raise Ambiguous(f"{what} matches {len(matches)} jobs{tasks} ({names}); it must match one, or the jobs of one task "
                        "(whose newest try's job is then followed)")  # fmt: skip
    return max(matches, key=lambda j: (try_of(j), str(j["metadata"].get("creationTimestamp") or ""), j["metadata"]["name"]))


def task_selector(labels: dict[str, str]) -> str:
    """A label selector from the task's label values (already in label syntax)."""
    return ",".join(f"{LABEL}/{k}={labels[k]}" for k in IDENTITY if k in labels)
