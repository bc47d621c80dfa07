"""What a task raises when its job fails or cannot start: typed, so that Airflow 3.3's
``retry_policy`` can route them (``ExceptionRetryPolicy(rules=[RetryRule(exception=T9kJobOOMKilled,
action=RetryAction.FAIL)])``) and a callback can read why without parsing the message.

Each carries the job (``kind``, ``namespace``, ``name``), the root-cause replica, its exit code and
the reason Kubernetes gave (``OOMKilled``, ``Evicted``, ``ErrImagePull``...). A failure retrying
cannot help (``permanent_exit_codes``, an invalid image name) is the same class and also an
``AirflowFailException``, which Airflow never retries (nor asks a retry policy about)."""

from __future__ import annotations

import re
from typing import Any

from airflow.sdk.exceptions import AirflowException, AirflowFailException

# The reason a replica's container status gave, as the failure detail names it:
# "container main exit code 137 (OOMKilled)", "pod Evicted: ...".
_REASON = re.compile(r"\((\w+)\)|\bpod (\w+)\b")
EVICTIONS = frozenset({"Evicted", "Preempted", "DeadlineExceeded", "NodeLost", "Terminated", "DisruptionTarget"})
IMAGE_PULL = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})


class T9kJobError(AirflowException):
    """A T9k job did not do what the task waited for."""

    def __init__(self, message: str, *, kind: str = "", namespace: str = "", name: str = "", replica: str = "",
                 exit_code: int | None = None, reason: str = "") -> None:  # fmt: skip
        super().__init__(message)
        self.kind, self.namespace, self.name = kind, namespace, name
        self.replica, self.exit_code, self.reason = replica, exit_code, reason


class T9kJobFailed(T9kJobError):
    """The job ended Failed (its root-cause replica, exit code and reason on the exception)."""


class T9kJobOOMKilled(T9kJobFailed):
    """The root-cause replica was killed for memory (``OOMKilled``)."""


class T9kJobEvicted(T9kJobFailed):
    """The root-cause replica was evicted, preempted or lost with its node."""


class T9kJobStartupError(T9kJobError):
    """The job could not start (a replica stuck waiting: ``reason`` names why)."""


class T9kJobImagePullError(T9kJobStartupError):
    """A replica's image could not be pulled (``ErrImagePull``, ``ImagePullBackOff``, ``InvalidImageName``)."""


# The same, where retrying cannot help: also an ``AirflowFailException`` (named classes, so that
# they pickle and a retry policy's dotted path can name them).
class T9kJobFailedPermanently(T9kJobFailed, AirflowFailException):
    """``T9kJobFailed`` that is not retried."""


class T9kJobOOMKilledPermanently(T9kJobOOMKilled, AirflowFailException):
    """``T9kJobOOMKilled`` that is not retried."""


class T9kJobEvictedPermanently(T9kJobEvicted, AirflowFailException):
    """``T9kJobEvicted`` that is not retried."""


class T9kJobStartupErrorPermanently(T9kJobStartupError, AirflowFailException):
    """``T9kJobStartupError`` that is not retried."""


class T9kJobImagePullErrorPermanently(T9kJobImagePullError, AirflowFailException):
    """``T9kJobImagePullError`` that is not retried (an invalid image name)."""


PERMANENTLY: dict[type[T9kJobError], type[T9kJobError]] = {
    T9kJobFailed: T9kJobFailedPermanently,
    T9kJobOOMKilled: T9kJobOOMKilledPermanently,
    T9kJobEvicted: T9kJobEvictedPermanently,
    T9kJobStartupError: T9kJobStartupErrorPermanently,
    T9kJobImagePullError: T9kJobImagePullErrorPermanently,
}


def reason_of(detail: str) -> str:
    """The Kubernetes reason in a failure detail (``container main exit code 137 (OOMKilled)``)."""
    for m in _REASON.finditer(detail or ""):
        found = m.group(1) or m.group(2)
        if found and found[0].isupper():
            return found
    return ""


def failure(message: str, event: dict[str, Any], root_cause: dict[str, Any], *, permanent: bool) -> T9kJobError:
    """The exception for a job that ended Failed."""
    order = event.get("failed_first") or []
    detail = str(root_cause.get("detail") or (order[0].get("detail") if order else "") or "")
    reason = reason_of(detail)
    cls: type[T9kJobError] = T9kJobFailed
    if reason == "OOMKilled":
        cls = T9kJobOOMKilled
    elif reason in EVICTIONS:
        cls = T9kJobEvicted
    code = root_cause.get("exitCode")
    return (PERMANENTLY[cls] if permanent else cls)(
        message, kind=str(event.get("kind") or ""), namespace=str(event.get("namespace") or ""),
        name=str(event.get("name") or ""), replica=str(root_cause.get("replica") or (order[0].get("pod") if order else "") or ""),
        exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None, reason=reason,
    )  # fmt: skip


def startup_failure(message: str, event: dict[str, Any], *, permanent: bool) -> T9kJobError:
    """The exception for a job that could not start (``waiting``: replica -> its waiting reason)."""
    waiting = event.get("waiting") or {}
    reasons = sorted(set(waiting.values())) if isinstance(waiting, dict) else []
    pulls = [r for r in reasons if r in IMAGE_PULL]
    cls: type[T9kJobError] = T9kJobImagePullError if pulls else T9kJobStartupError
    replica = next((p for p, r in sorted(waiting.items()) if r in (pulls or reasons)), "") if isinstance(waiting, dict) else ""
    return (PERMANENTLY[cls] if permanent else cls)(
        message, kind=str(event.get("kind") or ""), namespace=str(event.get("namespace") or ""),
        name=str(event.get("name") or ""), replica=replica, reason=(pulls or reasons or [""])[0],
    )  # fmt: skip
