"""controller/slim.py: what the cache drops, and which request bodies skip the client's walk."""

from __future__ import annotations

import asyncio
import copy
import datetime
import json
import sys
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, V1DeleteOptions

from airflow_t9k.controller.slim import drop_managed_fields, plain_json_bodies, slim_for


def with_client(check: Callable[[ApiClient], Any]) -> Any:
    """Run ``check`` with a real client (its constructor needs a running event loop)."""

    async def go() -> Any:
        async with ApiClient() as api:
            return check(api)

    return asyncio.run(go())


MANAGED = [{"manager": "kwok", "operation": "Update", "fieldsV1": {"f:status": {}}}]


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"metadata": {"name": "p", "managedFields": MANAGED, "labels": {"a": "b"}}, "spec": {"x": 1}},
         {"metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"x": 1}}),
        ({"metadata": {"name": "p"}}, {"metadata": {"name": "p"}}),  # nothing to drop
        ({"kind": "Pod"}, {"kind": "Pod"}),  # no metadata at all
        ({"metadata": None}, {"metadata": None}),  # a hostile object: left as it is
        # managedFields elsewhere (e.g. inside a pod template's annotations or spec) is data: kept
        ({"metadata": {"name": "j"}, "spec": {"template": {"metadata": {"managedFields": MANAGED}}}},
         {"metadata": {"name": "j"}, "spec": {"template": {"metadata": {"managedFields": MANAGED}}}}),
    ],
)  # fmt: skip
def test_drop_managed_fields(obj, expected):
    assert drop_managed_fields(obj) is obj  # in place: the informer's cached object itself
    assert obj == expected


META = {"name": "x", "namespace": "ns", "uid": "u", "resourceVersion": "7", "labels": {"l": "v"},
        "annotations": {"a": "b"}, "ownerReferences": [{"kind": "GenericJob", "uid": "j", "controller": True}],
        "deletionTimestamp": "2026-11-26T08:00:00Z"}  # fmt: skip
SPEC = {
    "containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "2"}}}],
    "nodeName": "n",
    "clusterIP": "10.96.0.9",
    "ports": [{"port": 80}],
}
STATUS = {"phase": "Failed", "containerStatuses": [{"name": "c", "state": {"terminated": {"exitCode": 3, "message": "m"}}}]}


def whole(kind: str, **extra: Any) -> dict:
    return {"apiVersion": "v1", "kind": kind, "metadata": {**META, "managedFields": MANAGED}, "spec": dict(SPEC),
            "status": dict(STATUS), **extra}  # fmt: skip


BASE = {"apiVersion": "v1", "metadata": META}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        # of the spec only the containers' names and resources (usage counts their limits), and the node
        (whole("Pod"), {**BASE, "kind": "Pod", "status": STATUS,
                        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}],
                                 "nodeName": "n"}}),
        # a pod that restarts in place: its restart rules and its init containers' names (reconcile/inplace.py)
        (whole("Pod", spec={"containers": [{"name": "c", "image": "i", "restartPolicyRules": [{"action": "X"}]}],
                            "initContainers": [{"name": "g", "image": "i", "command": ["sh"]}],
                            "schedulingGroup": {"podGroupName": "pg"}}),
         {**BASE, "kind": "Pod", "status": STATUS,
          "spec": {"containers": [{"name": "c", "restartPolicyRules": [{"action": "X"}]}], "initContainers": [{"name": "g"}],
                   "schedulingGroup": {"podGroupName": "pg"}}}),
        (whole("Service"), {**BASE, "kind": "Service", "spec": {"clusterIP": "10.96.0.9"}}),  # Ascend's leader IP
        (whole("ConfigMap", data={"hostfile": "h"}, binaryData={"b": "AA=="}),
         {**BASE, "kind": "ConfigMap"}),  # "x" is no hostfile: its data stays out (issue 29, 3)
        (whole("Secret", data={"id_rsa": "key"}, type="Opaque"), {**BASE, "kind": "Secret"}),  # the key stays out
        (whole("Job"), {**BASE, "kind": "Job", "status": STATUS}),  # batch/v1: Beam's submit job
        (whole("LocalQueue"), {**BASE, "kind": "LocalQueue"}),
        # Sent back whole (status PUTs) or read whole: only managedFields go.
        *[(whole(k), {**BASE, "kind": k, "spec": SPEC, "status": STATUS})
          for k in ("GenericJob", "PyTorchTrainingJob", "AscendJob", "BeamJob", "Workload", "ResourceFlavor", "Unknown")],
        # What the API server leaves out stays out; no spec is invented.
        ({"kind": "Service", "metadata": {"name": "s"}}, {"kind": "Service", "metadata": {"name": "s"}}),
        ({"kind": "Service", "metadata": {"name": "s"}, "spec": {}}, {"kind": "Service", "metadata": {"name": "s"}, "spec": {}}),
        # Hostile shapes pass without an error (a watch must not stop on them).
        ({"kind": "Pod", "metadata": None, "spec": "x"}, {"kind": "Pod", "metadata": None}),
        ({"kind": "Service", "spec": ["x"]}, {"kind": "Service"}),
        ({}, {}),
    ],
    ids=lambda v: v.get("kind", "") if isinstance(v, dict) else "",
)  # fmt: skip
def test_slim_for_keeps_what_the_controller_reads(obj, expected):
    kind = obj.get("kind", "Pod")
    slim = slim_for(kind)(obj)
    assert slim == expected
    assert slim_for(kind)(copy.deepcopy(slim)) == slim  # idempotent: the executor stores cached objects again


def test_slim_for_shares_what_it_keeps_instead_of_copying():
    pod = whole("Pod")
    assert slim_for("Pod")(pod)["status"] is pod["status"]


@pytest.mark.parametrize(
    "body",
    [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
         "spec": {"containers": [{"name": "c", "args": ["x", 1, 2.5, True, None]}]}},
        [{"op": "replace", "path": "/spec/replicas", "value": 3}],
        {"nested": json.loads("[" * 200 + "]" * 200)},
    ],
)  # fmt: skip
def test_plain_json_bodies_pass_as_they_are_and_serialize_the_same(body):
    def check(api: ApiClient) -> None:
        walked = api.sanitize_for_serialization(body)
        plain_json_bodies(api)
        assert api.sanitize_for_serialization(body) is body
        assert json.dumps(api.sanitize_for_serialization(body)) == json.dumps(walked)

    with_client(check)


def test_plain_json_bodies_do_not_recurse():
    """The client's walk recursed once per level; a body nested deeper than the interpreter's
    recursion limit passes now (the controller raises the limit for the decoder, not for this)."""
    deep: list = []
    for _ in range(5000):
        deep = [deep]

    def check(api: ApiClient) -> None:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(1000)  # other tests (the controller's CLI) raise it for the process
        try:
            with pytest.raises(RecursionError):
                api.sanitize_for_serialization({"x": deep})
            plain_json_bodies(api)
            assert api.sanitize_for_serialization({"x": deep})["x"] is deep
        finally:
            sys.setrecursionlimit(limit)

    with_client(check)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (V1DeleteOptions(propagation_policy="Background"), {"propagationPolicy": "Background"}),  # a model: still walked
        (datetime.date(2026, 11, 26), "2026-11-26"),  # not plain JSON: still walked
        (("a", 1), ("a", 1)),
        ("text", "text"),
        (None, None),
    ],
)  # fmt: skip
def test_plain_json_bodies_leave_everything_else_to_the_client(value, expected):
    def check(api: ApiClient) -> None:
        plain_json_bodies(api)
        assert api.sanitize_for_serialization(value) == expected

    with_client(check)


@pytest.mark.parametrize(
    ("name", "kept"),
    [("mpi-hostfile", True), ("ds-deepspeed", True), ("rings-config-asc", True),
     ("train-evidence", False),  # up to 1 MiB, never read back by the controller (issue 29, 3)
     ("anything-else", False)],
)  # fmt: skip
def test_configmap_data_is_kept_only_where_the_core_reads_it(name, kept):
    from airflow_t9k.kinds.ascend_ranktable import CONFIGMAP_PREFIX

    assert CONFIGMAP_PREFIX == "rings-config-"  # the names slim.py keeps data for are the kinds' own
    cm = {"kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}, "data": {"k": "v" * 1000}}
    slim = slim_for("ConfigMap")(copy.deepcopy(cm))
    assert ("data" in slim) is kept
    assert slim["metadata"] == cm["metadata"]
