"""The controller's error vocabulary for API answers, parsed from the Kubernetes Status."""

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


class AlreadyExists(ApiError):
    """409 AlreadyExists: an earlier pass created it; names are deterministic."""


class Conflict(ApiError):
    """409 Conflict: our copy was stale; reconcile again from the cache."""


class Invalid(ApiError):
    """422 or 400: the object as written can never be accepted."""


class Forbidden(ApiError):
    """403: RBAC does not allow it."""


class Gone(ApiError):
    """410: a watch's resourceVersion is too old; list again."""


def from_response(status: int, text: str) -> ApiError:
    try:
        body = json.loads(text) if text else {}
    except ValueError:
        body = {"message": text}
    if not isinstance(body, dict):
        body = {"message": str(body)}
    reason = str(body.get("reason") or "")
    message = str(body.get("message") or text or "")
    if status == 404:
        cls: type[ApiError] = NotFound
    elif status == 409:
        cls = AlreadyExists if reason == "AlreadyExists" else Conflict
    elif status in (400, 422):
        cls = Invalid
    elif status == 403:
        cls = Forbidden
    elif status == 410:
        cls = Gone
    else:
        cls = ApiError
    return cls(status, reason, message, body)
