"""Pod-level options of the per-kind operators, applied to every pod template they build (every
replica type; for BeamJob the submit job's pod), as KubernetesPodOperator applies them to its pod.

Each option takes plain dicts in the API's form or ``kubernetes.client`` models (turned into the
API's dicts when the DAG is parsed). ``labels`` and ``annotations`` go on the job as well, so
``kubectl get -l`` finds it; ``container_security_context`` goes on each replica's main container
(KubernetesPodOperator's base container), ``security_context`` on the pod. Pure.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from airflow.sdk.exceptions import AirflowException

Obj = dict[str, Any]

POD_OPTIONS = ("labels", "annotations", "volumes", "volume_mounts", "tolerations", "node_selector", "affinity",
               "service_account_name", "image_pull_secrets", "env_from", "priority_class_name", "shm_size",
               "security_context", "container_security_context", "init_containers", "host_aliases",
               "runtime_class_name", "scheduler_name")  # fmt: skip
SHM_VOLUME = "airflow-t9k-shm"
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$")


def as_list(value: Any, name: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, dict):
        return [value]
    if not isinstance(value, list):
        raise AirflowException(f"{name} must be a list, got {type(value).__name__}")
    return value


def as_dict(value: Any, name: str) -> Obj | None:
    if value is None or value == {}:
        return None
    if not isinstance(value, dict):
        raise AirflowException(f"{name} must be a dict (or a kubernetes.client model), got {type(value).__name__}")
    return copy.deepcopy(value)


def shm(size: Any) -> str:
    text = str(size)
    if not _QUANTITY.match(text):
        raise AirflowException(f"shm_size must be a Kubernetes quantity such as '2Gi' or '512Mi', got {size!r}")
    return text


def pod_template(container: Obj, options: Obj, pod_annotations: Obj | None = None) -> Obj:
    """A replica's pod template around ``container`` (changed in place), with ``options`` (the
    values of ``POD_OPTIONS``) applied."""
    c = container
    o = options
    mounts = [copy.deepcopy(m) for m in as_list(o.get("volume_mounts"), "volume_mounts")]
    volumes = [copy.deepcopy(v) for v in as_list(o.get("volumes"), "volumes")]
    if o.get("shm_size"):
        volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": shm(o["shm_size"])}})
        mounts.append({"name": SHM_VOLUME, "mountPath": "/dev/shm"})
    if mounts:
        c["volumeMounts"] = [*c.get("volumeMounts", []), *mounts]
    if o.get("env_from"):
        c["envFrom"] = [*c.get("envFrom", []), *copy.deepcopy(as_list(o["env_from"], "env_from"))]
    if (sc := as_dict(o.get("container_security_context"), "container_security_context")) is not None:
        c["securityContext"] = sc
    spec: Obj = {"containers": [c]}
    if o.get("init_containers"):
        spec["initContainers"] = copy.deepcopy(as_list(o["init_containers"], "init_containers"))
    if volumes:
        spec["volumes"] = volumes
    if o.get("tolerations"):
        spec["tolerations"] = copy.deepcopy(as_list(o["tolerations"], "tolerations"))
    if o.get("node_selector"):
        spec["nodeSelector"] = dict(o["node_selector"])
    if o.get("affinity"):
        spec["affinity"] = copy.deepcopy(o["affinity"])
    if o.get("service_account_name"):
        spec["serviceAccountName"] = o["service_account_name"]
    if o.get("image_pull_secrets"):
        secrets = o["image_pull_secrets"]
        if isinstance(secrets, str):  # "a,b", as KubernetesPodOperator accepts
            secrets = [s.strip() for s in secrets.split(",") if s.strip()]
        spec["imagePullSecrets"] = [
            {"name": s} if isinstance(s, str) else dict(s) for s in as_list(secrets, "image_pull_secrets")
        ]
    if o.get("priority_class_name"):
        spec["priorityClassName"] = o["priority_class_name"]
    if (psc := as_dict(o.get("security_context"), "security_context")) is not None:
        spec["securityContext"] = psc
    if o.get("host_aliases"):
        spec["hostAliases"] = copy.deepcopy(as_list(o["host_aliases"], "host_aliases"))
    if o.get("runtime_class_name"):
        spec["runtimeClassName"] = str(o["runtime_class_name"])
    if o.get("scheduler_name"):
        spec["schedulerName"] = str(o["scheduler_name"])
    t: Obj = {"spec": spec}
    meta: Obj = {}
    if o.get("labels"):
        meta["labels"] = {k: str(v) for k, v in o["labels"].items()}
    annotations = {**(o.get("annotations") or {}), **(pod_annotations or {})}
    if annotations:
        meta["annotations"] = {k: str(v) for k, v in annotations.items()}
    if meta:
        t["metadata"] = meta
    return t
