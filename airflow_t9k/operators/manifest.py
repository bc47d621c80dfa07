"""The job's manifest, before the operator submits it: names, labels, commands, loading.

Pure: no cluster, no Airflow context. The name is derived from dag, run, task and map index (and
the Task Loop iteration, inside a loop), so a retry, a restarted worker or a Clear finds the job
again; the exact identity is in the job's annotations (labels are sanitised and cut).
"""

from __future__ import annotations

import hashlib
import re
import shlex
from typing import Any

import yaml
from airflow.sdk.exceptions import AirflowException

from airflow_t9k.api.excerpt import is_excerpt, problems
from airflow_t9k.api.rerun import CONSUMED_BY as CONSUMED_BY  # re-exported: its home before
from airflow_t9k.api.rerun import DELIVERED_BY as DELIVERED_BY
from airflow_t9k.api.rerun import SUBMISSION as SUBMISSION

Obj = dict[str, Any]

STATE_KEY = "t9k_job"
LABEL = "airflow-t9k.io"
LOOP_ITERATION = f"{LABEL}/loop-iteration"  # label and annotation of a job a Task Loop's iteration runs
SUBMITTING_KEY = "t9k_submitting"  # the name and nonce of a job about to be created (api/rerun.py)
DELIVERED_KEY = "t9k_delivered"  # the final event of the success a try of this series delivered


def _slug(text: str, limit: int) -> str:
    s = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    s = re.sub(r"^[^a-z]+", "", s)  # a DNS-1035 label starts with a letter
    return s[:limit].rstrip("-") or "job"


def _label_value(text: str) -> str:
    v = re.sub(r"[^A-Za-z0-9._-]+", "_", str(text))[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", v)


def job_name(dag_id: str, run_id: str, task_id: str, map_index: int = -1, base: str | None = None,
             iteration: int | None = None) -> str:  # fmt: skip
    """Deterministic, short enough for ``<job>-<type>-<rank>`` Service names (<= 63): ``base``
    (a name the user gave, else the task id) cut to 24 characters, then a digest of the task.
    ``iteration``: the Task Loop iteration (Airflow 3.4, compat.loop_iteration), in the digest only
    when there is one, so a task outside a loop keeps the name it always had."""
    task = f"{dag_id}\x00{run_id}\x00{task_id}\x00{map_index}"
    if iteration is not None:
        task += f"\x00loop-iteration={iteration}"
    return f"{_slug(base or task_id, 24)}-{hashlib.sha256(task.encode()).hexdigest()[:10]}"


def split_command(value: Any, field: str = "command") -> list[str] | None:
    """A command given as a string is split as a shell would ("python train.py" is two words)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as exc:
            raise AirflowException(f"{field} {value!r} cannot be split like a shell command: {exc}") from None
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    raise AirflowException(f"{field} must be a list of strings or one string, got {type(value).__name__}")


def _plain(value: Any) -> Any:
    """Kubernetes client models (V1Volume, V1ResourceRequirements, ...), also inside lists and
    dicts, as the API's dicts (camelCase); plain values as they are."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    from kubernetes.client import ApiClient

    return ApiClient().sanitize_for_serialization(value)


def load_job(job: Obj | str) -> Obj:
    if isinstance(job, dict):
        return dict(job)
    if is_excerpt(job):  # the seeds' examples elide with "...": say what to complete, not a parse error
        raise AirflowException("the job is not whole: " + "; ".join(problems(job) or ["'...' stands for what it leaves out"]))
    loaded = yaml.safe_load(job)
    if not isinstance(loaded, dict):
        raise AirflowException(f"the job must be a mapping (a YAML document or a dict), got {type(loaded).__name__}")
    return loaded


def set_in_spec(job: Obj, path: tuple[str, ...], value: Any, option: str) -> None:
    """Put an operator option into the job at ``spec.<path>``, making the mappings on the way; a
    job that already sets it to something else is refused: one of the two would be ignored."""
    holder = job.setdefault("spec", {})
    for key in path[:-1]:
        if holder.get(key) is None:
            holder[key] = {}
        holder = holder[key]
        if not isinstance(holder, dict):
            raise AirflowException(f"the job's spec.{key} is not a mapping; {option} cannot be set in it")
    given = holder.get(path[-1])
    if given is not None and given != value:
        raise AirflowException(f"the job sets spec.{'.'.join(path)} to {given!r} and the task {option} to {value}: give one")
    holder[path[-1]] = value
