"""What every replica gets when the controller runs its progress endpoint (docs/progress.md, "The push path").

The training container of each replica pod (``reporters``) gets the endpoint's URL for its job,
the CA to trust and a token, by env, under Kubeflow Trainer's names (so the Kubeflow SDK's ``update_trainjob_status``
and the Transformers ``KubeflowTrainerCallback`` report here unchanged) and under ours:

- ``T9K_PROGRESS_URL`` / ``KUBEFLOW_TRAINER_SERVER_URL``:
  ``<endpoint>/apis/<group>/<version>/namespaces/<ns>/<plural>/<job>/progress``;
- ``T9K_PROGRESS_CA_CERT`` / ``KUBEFLOW_TRAINER_SERVER_CA_CERT``: the path of the CA bundle;
- ``T9K_PROGRESS_TOKEN`` / ``KUBEFLOW_TRAINER_SERVER_TOKEN``: the path of the token.

Both files come from one projected volume: a service-account token with its own audience (it
is worth nothing to the API server, and the kubelet renews it), and the CA, which the pod's own
annotation carries and the downward API writes to a file; the URL is written there too
(``url``), for processes that do not inherit the container's environment (ranks an MPI, pdsh
or ColossalAI launcher starts over SSH). So the push path adds no object per job, no API request
and no RBAC beyond TokenReview. Pure: ``desired.build_pod`` calls ``inject``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_t9k.api.paths import job_path
from airflow_t9k.api.resources import resource_for
from airflow_t9k.kinds.base import LABEL_PREFIX, JobKind

Obj = dict[str, Any]

AUDIENCE = "airflow-t9k-progress"
TOKEN_SECONDS = 3600  # the projected token's lifetime; the kubelet renews it at 80%
MOUNT = "/var/run/secrets/airflow-t9k/progress"
VOLUME = "t9k-progress"
CA_ANNOTATION = f"{LABEL_PREFIX}/progress-ca"
URL_ANNOTATION = f"{LABEL_PREFIX}/progress-url"
TOKEN_FILE, CA_FILE, URL_FILE = "token", "ca.crt", "url"
# The job's own choices (its annotations): which containers report, and a token despite a
# template's automountServiceAccountToken: false.
CONTAINERS = f"{LABEL_PREFIX}/progress-containers"
TOKEN_OPT_IN = f"{LABEL_PREFIX}/progress-token"
# Our names, then Kubeflow Trainer v2.2's (pkg/runtime/framework/plugins/trainjobstatus).
ENV_NAMES = (("T9K_PROGRESS_URL", "T9K_PROGRESS_CA_CERT", "T9K_PROGRESS_TOKEN"),
             ("KUBEFLOW_TRAINER_SERVER_URL", "KUBEFLOW_TRAINER_SERVER_CA_CERT", "KUBEFLOW_TRAINER_SERVER_TOKEN"))  # fmt: skip


@dataclass(frozen=True)
class PushTarget:
    """The controller's progress endpoint as replicas reach it."""

    endpoint: str  # https://host:port (a path prefix is kept)
    ca_pem: str  # the CA bundle that verifies its certificate
    audience: str = AUDIENCE
    token_seconds: int = TOKEN_SECONDS


def url_path(kind: str, namespace: str, name: str) -> str:
    return job_path(resource_for(kind), namespace, name, "progress")


def push_url(target: PushTarget, job: Obj) -> str:
    meta = job["metadata"]
    return target.endpoint.rstrip("/") + url_path(str(job["kind"]), str(meta["namespace"]), str(meta["name"]))


def push_env(target: PushTarget, job: Obj) -> dict[str, str]:
    values = (push_url(target, job), f"{MOUNT}/{CA_FILE}", f"{MOUNT}/{TOKEN_FILE}")
    return {name: value for names in ENV_NAMES for name, value in zip(names, values, strict=True)}


def volume(target: PushTarget) -> Obj:
    ca, url = (f"metadata.annotations['{a}']" for a in (CA_ANNOTATION, URL_ANNOTATION))
    return {"name": VOLUME, "projected": {"sources": [
        {"serviceAccountToken": {"audience": target.audience, "expirationSeconds": target.token_seconds, "path": TOKEN_FILE}},
        {"downwardAPI": {"items": [{"path": CA_FILE, "fieldRef": {"fieldPath": ca}},
                                   {"path": URL_FILE, "fieldRef": {"fieldPath": url}}]}},
    ]}}  # fmt: skip


def reporters(kind: JobKind, job: Obj, pod_spec: Obj) -> list[str] | None:
    """The containers of a replica that get the token: the kind's training container, or those
    the job names in ``batch.tensorstack.dev/progress-containers`` (a sidecar has no business
    holding a credential of the job). None: no container at all, because the template set
    ``automountServiceAccountToken: false`` and the job did not opt in with
    ``batch.tensorstack.dev/progress-token: "mount"`` (the author asked for no token in the pod)."""
    notes = (job.get("metadata") or {}).get("annotations") or {}
    if pod_spec.get("automountServiceAccountToken") is False and notes.get(TOKEN_OPT_IN) != "mount":
        return None
    names = [n.strip() for n in str(notes.get(CONTAINERS) or "").split(",") if n.strip()]
    if names:
        return names
    main = kind.main_container(pod_spec)
    return [str(main.get("name"))] if main else []


def inject(kind: JobKind, job: Obj, pod: Obj, target: PushTarget | None) -> None:
    """The endpoint, CA and token in the reporting containers of ``pod`` (in place, ``reporters``);
    the controller's names and volume win over a template's. Nothing for a kind without progress
    (BeamJob)."""
    if target is None or kind.decisive_replica(job) is None:
        return
    spec = pod.setdefault("spec", {})
    chosen = reporters(kind, job, spec)
    if chosen is None:
        return
    annotations = pod["metadata"].setdefault("annotations", {})
    annotations[CA_ANNOTATION], annotations[URL_ANNOTATION] = target.ca_pem, push_url(target, job)
    spec["volumes"] = [v for v in spec.get("volumes") or [] if not (isinstance(v, dict) and v.get("name") == VOLUME)]
    spec["volumes"].append(volume(target))
    env = push_env(target, job)
    for c in spec.get("containers") or []:
        if c.get("name") not in chosen:
            continue
        c["env"] = [e for e in c.get("env") or [] if not (isinstance(e, dict) and e.get("name") in env)]
        c["env"] += [{"name": k, "value": v} for k, v in env.items()]
        mounts = [m for m in c.get("volumeMounts") or [] if not (isinstance(m, dict) and m.get("name") == VOLUME)]
        c["volumeMounts"] = [*mounts, {"name": VOLUME, "mountPath": MOUNT, "readOnly": True}]
