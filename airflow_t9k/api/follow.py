"""Which job a sensor given labels follows: the one match, or the newest try's job of one task.

A task that retried has a job per try (``<name>``, ``<name>-t2``...), and a task in a Task Loop
(Airflow 3.4) a job per iteration, all carrying the task's labels; a sensor following that task
(``task=(dag_id, task_id)``, or a selector whose matches are all one task's jobs) follows the
newest iteration's newest try's job (the ``airflow-t9k.io/loop-iteration`` and ``try-number``
labels, then the newest creation) instead of failing on "matches 2 jobs". Matches of different tasks,
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


def _label_int(job: Obj, name: str, default: int) -> int:
    value = ((job.get("metadata") or {}).get("labels") or {}).get(f"{LABEL}/{name}")
    try:
        return int(str(value))
    except ValueError:
        return default


def try_of(job: Obj) -> int:
    return _label_int(job, "try-number", 0)


def iteration_of(job: Obj) -> int:
    """The Task Loop iteration that ran the job (Airflow 3.4); -1 for a job of no loop."""
    return _label_int(job, "loop-iteration", -1)


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
    return max(matches, key=_newest)


def _newest(job: Obj) -> tuple[int, int, str, str]:
    meta = job["metadata"]
    return iteration_of(job), try_of(job), str(meta.get("creationTimestamp") or ""), meta["name"]


def task_selector(labels: dict[str, str]) -> str:
    """A label selector from the task's label values (already in label syntax)."""
    return ",".join(f"{LABEL}/{k}={labels[k]}" for k in IDENTITY if k in labels)
