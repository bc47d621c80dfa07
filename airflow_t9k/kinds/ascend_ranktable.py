"""AscendJob's rank table ``hccl.json`` (seed 002's second way of configuring a job: a file).

As MindCluster's ascend-operator builds it (rank table version 1.0): each pod with NPUs is a
server; Ascend's device plugin writes the NPUs it gave the pod into the pod annotation
``ascend.kubectl.kubernetes.io/ascend-910-configuration`` (or ``...-npu-configuration``) as
JSON ``{server_id, host_ip, devices: [{device_id, device_ip}]}``; the operator's pod annotation
``hccl/rankIndex`` orders the servers, and device i of server r gets ``rank_id = r × devices + i``.
Until every such pod has its annotation and an IP the table says ``"status": "initializing"``;
then ``"completed"`` with ``server_list`` sorted by rank and ``server_count``. It is published
as key ``hccl.json`` of ConfigMap ``rings-config-<job>``, the name the operator writes; a pod
that mounts that ConfigMap reads the file, e.g. ``RANK_TABLE_FILE=<mount>/hccl.json``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_t9k.kinds.base import Obj

CONFIGMAP_PREFIX = "rings-config-"
KEY = "hccl.json"
VERSION = "1.0"
RANK_INDEX = "hccl/rankIndex"  # the operator's pod annotation: the server's place in the table
DEVICE_ANNOTATIONS = ("ascend.kubectl.kubernetes.io/ascend-910-configuration",
                      "ascend.kubectl.kubernetes.io/ascend-npu-configuration")  # fmt: skip


def configmap_name(job: Obj) -> str:
    return CONFIGMAP_PREFIX + job["metadata"]["name"]


def _server(pod: Obj, index: int) -> Obj | None:
    """The pod's entry in the table, or None while the device plugin or the kubelet has not said enough."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    raw = next((annotations[a] for a in DEVICE_ANNOTATIONS if a in annotations), None)
    ip = (pod.get("status") or {}).get("podIP")
    if raw is None or not ip:
        return None
    try:
        instance = json.loads(raw)
        devices = [{"device_id": str(d["device_id"]), "device_ip": str(d["device_ip"])} for d in instance.get("devices") or []]
    except (ValueError, TypeError, KeyError, AttributeError):
        return None  # not (yet) the plugin's JSON: wait, as the operator skips such a pod
    for i, device in enumerate(devices):
        device["rank_id"] = str(index * len(devices) + i)
    return {"device": devices, "server_id": str(instance.get("server_id", "")), "host_ip": str(instance.get("host_ip", "")),
            "container_ip": str(ip)}  # fmt: skip


def table(pods: Mapping[str, Obj], servers: Mapping[str, int]) -> str:
    """hccl.json for ``servers`` (pod name -> rank index), from what the pods say now."""
    entries = []
    for name, index in servers.items():
        pod = pods.get(name)
        entry = _server(pod, index) if pod is not None else None
        if entry is None:
            return json.dumps({"status": "initializing", "version": VERSION}, separators=(",", ":"))
        entries.append(entry)
    entries.sort(key=lambda e: int(e["device"][0]["rank_id"]) if e["device"] else 0)
    body = {"status": "completed", "server_list": entries, "server_count": str(len(entries)), "version": VERSION}
    return json.dumps(body, separators=(",", ":"))
