"""The one error vocabulary for API answers (parsed from the Kubernetes Status) and for no answer.

The controller and the Airflow layer both speak it; the Airflow hooks translate client
exceptions into it at their boundary, so a user reads one sentence naming cause and fix.
"""

from __future__ import annotations

import json
from typing import Any


class ApiError(Exception):
    """A non-2xx answer from the API server."""

    def __init__(self, status: int, reason: str, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}


class NotFound(ApiError):
    """404: the object is gone; deleting it again is a no-op."""


class NotServed(NotFound):
    """404 for the resource type itself (no object name in the answer): its CRD is not installed."""


class AlreadyExists(ApiError):
    """409 AlreadyExists: an earlier pass created it; names are deterministic."""


class Conflict(ApiError):
    """409 Conflict: our copy was stale; reconcile again from the cache."""


class Invalid(ApiError):
    """422 or 400: the object as written can never be accepted."""


class Forbidden(ApiError):
    """403: RBAC does not allow it."""


class Unauthorized(ApiError):
    """401: the API server does not accept the credentials."""


class Gone(ApiError):
    """410: a watch's resourceVersion is too old; list again."""


class Unreachable(ApiError):
    """No answer at all: connection refused, DNS, TLS or a timeout (status 0)."""

    def __init__(self, host: str, cause: str, hint: str = "") -> None:
        super().__init__(0, "Unreachable", f"cannot reach the Kubernetes API server at {host or '(no host)'} ({cause}){hint}")
        self.host = host
        self.cause = cause


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: no answer, 429 (throttled, or storage initializing) or a 5xx."""
    if isinstance(exc, Unreachable):
        return True
    if isinstance(exc, ApiError):
        return exc.status == 429 or exc.status >= 500
    return isinstance(exc, (OSError, TimeoutError))


def is_permanent(exc: BaseException) -> bool:
    """Waiting cannot fix it: the resource type is not served, or the identity may not do it."""
    return isinstance(exc, (NotServed, Unauthorized, Forbidden))


def from_response(status: int, text: str) -> ApiError:
    try:
        body = json.loads(text) if text else {}
    except ValueError:
        body = {"message": text}
    if not isinstance(body, dict):
        body = {"message": str(body)}
    reason = str(body.get("reason") or "")
    message = str(body.get("message") or text or "")
    details = body.get("details")
    if status == 404:
        # A missing object's Status names it; a missing resource type's does not.
        named = isinstance(details, dict) and bool(details.get("name"))
        cls: type[ApiError] = NotFound if named else NotServed
    elif status == 409:
        cls = AlreadyExists if reason == "AlreadyExists" else Conflict
    elif status in (400, 422):
        cls = Invalid
    elif status == 401:
        cls = Unauthorized
    elif status == 403:
        cls = Forbidden
    elif status == 410:
        cls = Gone
    else:
        cls = ApiError
    return cls(status, reason, message, body)
