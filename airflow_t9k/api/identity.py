"""A job's identity as a task records it (XCom ``t9k_job``, the state store's ``t9k_jobs``): checked
before any field reaches a URL path. Pure.

A task's own code can push any value under those keys, and REST editors can write them, so the
values are untrusted input: a namespace of ``../../api/v1/secrets`` or a name with ``?`` would
turn the job's path (the UI's GETs and actions, the "T9k Job" link) into another request. Only
an identity whose kind is one this package knows, whose namespace is a DNS label and whose
name a DNS subdomain (what the API server itself accepts) is used; anything else is treated as
no record at all.
"""

from __future__ import annotations

import re
from typing import Any

from airflow_t9k.api.resources import RESOURCES

Obj = dict[str, Any]
FIELDS = ("kind", "namespace", "name", "uid")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_UID = re.compile(r"^[A-Za-z0-9-]{1,128}$")  # the API server's uids are UUIDs


def problem(value: Any) -> str | None:
    """Why ``value`` is not a usable identity (None when it is)."""
    if not isinstance(value, dict):
        return f"not a mapping: {type(value).__name__}"
    for key in FIELDS:
        if not isinstance(value.get(key), str) or not value[key]:
            return f"{key} missing or not a string"
    if value["kind"] not in RESOURCES:
        return f"unknown kind {value['kind'][:64]!r}"
    if len(value["namespace"]) > 63 or not _LABEL.match(value["namespace"]):
        return f"namespace {value['namespace'][:64]!r} is not a DNS label"
    if len(value["name"]) > 253 or not _SUBDOMAIN.match(value["name"]):
        return f"name {value['name'][:64]!r} is not a DNS subdomain"
    if not _UID.match(value["uid"]):
        return f"uid {value['uid'][:64]!r} is not a uid"
    return None


def checked(value: Any) -> Obj | None:
    """The four fields of a well-formed identity, None for anything else."""
    return {k: value[k] for k in FIELDS} if problem(value) is None else None
