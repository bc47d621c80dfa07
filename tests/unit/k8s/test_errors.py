"""The one error vocabulary: API answers (and no answer) to classes, and which ones waiting can fix."""

from __future__ import annotations

import json

import pytest

from airflow_t9k.k8s.errors import (
    AlreadyExists,
    ApiError,
    Forbidden,
    NotFound,
    NotServed,
    Unauthorized,
    Unreachable,
    from_response,
    is_permanent,
    is_transient,
)

MISSING_OBJECT = {"kind": "Status", "reason": "NotFound", "message": 'genericjobs.batch.tensorstack.dev "x" not found',
                  "details": {"name": "x", "group": "batch.tensorstack.dev", "kind": "genericjobs"}, "code": 404}  # fmt: skip
MISSING_TYPE = {"kind": "Status", "reason": "NotFound", "message": "the server could not find the requested resource",
                "details": {}, "code": 404}  # fmt: skip


@pytest.mark.parametrize(
    ("status", "body", "cls"),
    [
        (404, json.dumps(MISSING_OBJECT), NotFound),
        (404, json.dumps(MISSING_TYPE), NotServed),
        (404, "404 page not found", NotServed),
        (401, json.dumps({"reason": "Unauthorized", "message": "Unauthorized"}), Unauthorized),
        (403, json.dumps({"reason": "Forbidden", "message": "cannot list"}), Forbidden),
        (409, json.dumps({"reason": "AlreadyExists"}), AlreadyExists),
        (503, "", ApiError),
    ],
    ids=["missing-object", "missing-type", "missing-type-plain", "401", "403", "409", "503"],
)
def test_from_response_classifies(status, body, cls):
    err = from_response(status, body)
    assert type(err) is cls


def test_a_missing_type_is_still_a_not_found_for_callers_that_only_know_that():
    assert isinstance(from_response(404, json.dumps(MISSING_TYPE)), NotFound)


@pytest.mark.parametrize(
    ("exc", "permanent", "transient"),
    [
        (from_response(404, json.dumps(MISSING_TYPE)), True, False),
        (from_response(401, ""), True, False),
        (from_response(403, ""), True, False),
        (from_response(429, ""), False, True),
        (from_response(500, ""), False, True),
        (from_response(503, ""), False, True),
        (Unreachable("https://127.0.0.1:1", "connection refused"), False, True),
        (ConnectionRefusedError(), False, True),
        (from_response(404, json.dumps(MISSING_OBJECT)), False, False),
        (from_response(422, ""), False, False),
    ],
    ids=["not-served", "401", "403", "429", "500", "503", "unreachable", "oserror", "not-found", "invalid"],
)
def test_permanent_and_transient(exc, permanent, transient):
    assert (is_permanent(exc), is_transient(exc)) == (permanent, transient)


def test_unreachable_names_the_host_and_the_cause():
    err = Unreachable("https://10.0.0.1:6443", "connection refused", "; check it")
    assert err.status == 0
    assert str(err.message) == "cannot reach the Kubernetes API server at https://10.0.0.1:6443 (connection refused); check it"
