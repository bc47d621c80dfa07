"""The children every running job has besides its pods: its SSH Secret, extra objects, Services."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_t9k.controller.reconcile.actions import Action, Create, CreateSSHSecret, Delete, Patch
from airflow_t9k.controller.reconcile.desired import build_extra, build_service, build_ssh_secret
from airflow_t9k.controller.reconcile.observe import is_deleting
from airflow_t9k.controller.reconcile.passstate import PassState, uid_of

if TYPE_CHECKING:
    from airflow_t9k.kinds.base import Obj

SSH_SECRET_STATUS = "sshSecret"  # status key: {name, uid} of the SSH Secret the controller made


def ssh_secret_recorded(job: Obj, name: str) -> bool:
    """Whether the job's status records that the controller created its SSH Secret ``name``.

    The controller does not watch or read Secrets (it may only create them: deploy/rbac-*.yaml),
    so this record, written right after the create, is how a pass knows the Secret is there.
    """
    record = (job.get("status") or {}).get(SSH_SECRET_STATUS)
    return isinstance(record, dict) and record.get("name") == name and bool(record.get("uid"))


def children(p: PassState) -> PassState:
    """Missing children are created (what pods mount before any pod); Services no replica wants go."""
    kind, job, observed = p.kind, p.job, p.observed
    actions: list[Action] = []
    secret = kind.ssh_secret_name(job)
    if secret and not ssh_secret_recorded(job, secret):
        actions.append(CreateSSHSecret(build_ssh_secret(job, secret)))
    for extra in kind.extra_children(job, observed):
        existing = observed.of_kind(extra["kind"]).get(extra["metadata"]["name"])
        if existing is None:
            actions.append(Create(build_extra(job, extra)))
        elif extra["kind"] == "ConfigMap" and existing.get("data") != extra.get("data") and not is_deleting(existing):
            # e.g. a hostfile after the workers were rescaled
            actions.append(Patch("ConfigMap", extra["metadata"]["name"], {"data": extra.get("data")}))
    wanted = set()
    for slot in p.slots:
        if kind.wants_services(job, slot.type):
            svc = build_service(kind, job, slot)
            wanted.add(svc["metadata"]["name"])
            if svc["metadata"]["name"] not in observed.services:
                actions.append(Create(svc))
    actions += [Delete("Service", n, uid_of(s)) for n, s in observed.services.items() if n not in wanted]
    p.children = actions
    p.actions += actions
    return p
