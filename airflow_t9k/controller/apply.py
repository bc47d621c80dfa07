"""Carry out a Plan: write status if it changed, then create and delete children, record Events.

Every write is idempotent: AlreadyExists on create and NotFound on delete mean an earlier
pass already did it. What the API returns goes straight into the informer cache (unless the
watch has passed it already), so the next pass does not act on a cache that has not caught up
with our own writes.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from airflow_t9k.api import ownership
from airflow_t9k.api.outcome import condition, interpret, true_condition
from airflow_t9k.api.paths import child_kind, child_path, job_path
from airflow_t9k.api.resources import resource_for
from airflow_t9k.controller import evidence
from airflow_t9k.controller.reconcile import Create, CreateSSHSecret, Delete, Emit, Patch, Plan, ReplaceStatus
from airflow_t9k.controller.reconcile.actions import Action, DeleteJob, KeepEvidence, WriteSpec
from airflow_t9k.controller.reconcile.plan import SSH_SECRET_STATUS, rejected
from airflow_t9k.controller.reconcile.status import StatusBuilder, bounded
from airflow_t9k.controller.scope import NOT_MANAGED
from airflow_t9k.controller.ssh import ssh_secret_data
from airflow_t9k.k8s.errors import AlreadyExists, Conflict, Forbidden, Invalid, NotFound
from airflow_t9k.kinds.templates import STATUS_KEY as TEMPLATE_STATUS

if TYPE_CHECKING:
    from airflow_t9k.k8s.client import Kube
    from airflow_t9k.k8s.informer import Informer

Obj = dict[str, Any]
COMPONENT = "airflow-t9k-controller"
PARALLEL_WRITES = 8
RECONCILE_ERROR = "ReconcileError"
MOUNTED = ("Secret", "ConfigMap")  # children the job's pods mount: only ever the job's own
# What pods mount is created (and found to be the job's own) before any pod of the pass. Services
# (their peers' addresses: MASTER_ADDR, a c10d store) go out with the pods, one round trip for the
# whole wave as Kubeflow does; a pod made beside a Service found to be someone else's is deleted
# at once, with no grace, long before a container could start and dial it (issue 49).


def refused_by_policy(exc: Forbidden) -> bool:
    """A 403 from admission (Pod Security, a ValidatingAdmissionPolicy or webhook), not from RBAC:
    RBAC's says "cannot create resource"; admission's names the policy."""
    text = exc.message or ""
    return "cannot create resource" not in text and ("violates PodSecurity" in text or "denied request" in text
                                                     or "ValidatingAdmissionPolicy" in text)  # fmt: skip


def _mounted(action: Action) -> bool:
    return isinstance(action, CreateSSHSecret) or (isinstance(action, Create) and action.kind in MOUNTED)


log = logging.getLogger(__name__)


REFUSED = "refused:"  # a ``children`` value: the uid of an object of the name that is not the job's


def _entry(value: str) -> Obj:
    """The merge patch of one record entry: the uid made (or found decided), or one refused."""
    if value.startswith(REFUSED):
        return {"refused": value[len(REFUSED) :], "uid": None, "at": None}
    return {"uid": value, "at": None, "refused": None}


def _stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ended(old: Obj | None, new: Obj) -> bool:
    """Whether ``new`` is the status that ends the job (either status shape)."""
    return not interpret({"status": old or {}}).terminal and interpret({"status": new}).terminal


class Executor:
    def __init__(self, kube: Kube, informer_for: Callable[[str, str], Informer], metrics: Counter[str],
                 on_created: Callable[[Obj], object] | None = None,
                 on_finished: Callable[[Obj], object] | None = None) -> None:  # fmt: skip
        self.kube = kube
        self.informer_for = informer_for  # (kind, namespace) -> the informer caching that kind there
        self.metrics = metrics
        self.on_created = on_created  # told of every child we create, as it is cached
        self.on_finished = on_finished  # told of a job whose end a status write just recorded
        self.instance = os.environ.get("HOSTNAME", "local")

    async def apply(self, job: Obj, plan: Plan, adopted: dict[str, dict[str, str]] | None = None) -> None:
        """Record the plan's decisions, then act on them.

        Status goes first: a restart counted or a job finished is durable before any pod is
        deleted or created because of it, and a status write refused for a stale
        resourceVersion (Conflict) stops the pass before it acts. A pass repeated after a
        crash in between finds the decision in status and does not take it again. The same
        write records which children the pass decides to create (api/ownership.py); their uids
        follow once they exist, with ``adopted`` (kind -> name -> uid: children the runner
        found decided on record, or of a job from before the record).
        """
        current = job
        # Evidence merged into the job's own ConfigMap creates nothing (reconcile/evidence.py).
        creates = [(a.kind, a.name) for a in plan.actions
                   if isinstance(a, Create) or (isinstance(a, KeepEvidence) and not a.merge)]  # fmt: skip
        # Every status this version writes carries the record (so no job it planned looks like
        # one from before it: api/ownership.py legacy); a pass that writes nothing adds none.
        writes = creates or adopted or plan.status != (job.get("status") or {})
        status = ownership.deciding(plan.status, creates, _stamp()) if writes else plan.status
        if status != (job.get("status") or {}):
            current = await self._write_status(job, status)
            if self.on_finished is not None and _ended(job.get("status"), status):
                self.on_finished(current)  # once: later passes start from the finished status
        events = list(plan.events)
        if any(isinstance(a, KeepEvidence) for a in plan.actions):
            # The evidence reads the job's Events: this pass's (the job's end) belong in it.
            await self._send(job, events)
            events = []
        made: dict[str, str] = {}
        children: dict[str, dict[str, str]] = {k: dict(v) for k, v in (adopted or {}).items()}
        problems = await self._act(job, plan.actions, made, children)
        if not problems:
            # The record and the Events are independent writes: one round trip for both (at 100
            # jobs created at once each took ~200 ms of a ~1.2 s pass, and a worker waits for both).
            await asyncio.gather(self._records(current, children, made), self._send(job, events))
            return
        if any(children.values()):
            current = await self._record_children(current, children)
        kept = (current.get("status") or {}).get(ownership.CREATED)  # what the pass put on record stays
        base = {**status, ownership.CREATED: kept} if kept is not None else status
        status, extra = rejected(current, base, problems, datetime.now(timezone.utc))
        events += extra
        if status != (current.get("status") or {}):
            await self._write_status(current, status)
        await self._send(job, events)

    async def _records(self, current: Obj, children: dict[str, dict[str, str]], made: dict[str, str]) -> None:
        """The uids of the children just made, then the SSH Secret made, on record (in that order:
        each patch answers with the job the next starts from)."""
        if any(children.values()):
            current = await self._record_children(current, children)
        if made:
            await self._record_secret(current, made)

    async def _send(self, job: Obj, events: list[Emit]) -> None:
        """Events are independent and best effort: send them together, a few at a time."""
        limit = asyncio.Semaphore(PARALLEL_WRITES)

        async def bounded_event(event: Emit) -> None:
            async with limit:
                await self.event(job, event)

        await asyncio.gather(*(bounded_event(e) for e in events))

    async def _act(self, job: Obj, actions: tuple[Action, ...], made: dict[str, str],
                   children: dict[str, dict[str, str]] | None = None) -> list[str]:  # fmt: skip
        """Carry out the actions, a few at a time; stop starting new ones once the job is gone.
        ``children`` gets the uid of each child created (kind -> name -> uid)."""
        ns = job["metadata"]["namespace"]
        children = {} if children is None else children
        # Children of one job are independent of each other: send them together, bounded.
        limit = asyncio.Semaphore(PARALLEL_WRITES)

        async def one(action: Action) -> str | None:
            async with limit:
                if not isinstance(action, Delete) and self._job_gone(job):
                    self.metrics["skipped_job_gone"] += 1
                    return None
                if isinstance(action, Delete):
                    await self._delete(ns, action)
                    return None
                if isinstance(action, DeleteJob):
                    await self._delete_job(job, action)
                    return None
                if isinstance(action, Patch):
                    await self._patch(ns, action)
                    return None
                if isinstance(action, ReplaceStatus):
                    await self._replace_status(ns, action)
                    return None
                if isinstance(action, WriteSpec):
                    return await self._write_spec(job, action.job, action.record)
                if isinstance(action, KeepEvidence):  # read what the pods said, then keep it
                    manifest = await evidence.fill(self.kube, ns, job, action)
                    if action.merge:  # the job's own record (the pass saw it): its new keys added
                        await self._patch(ns, Patch("ConfigMap", action.name, {"data": manifest["data"], "metadata": {
                            "annotations": manifest["metadata"].get("annotations") or {}}}))  # fmt: skip
                        return None
                    problem = await self._create(ns, manifest, job, children)
                    if problem:  # not the job's fault: clean-up goes on after the grace (reconcile/evidence.py)
                        log.warning("evidence of %s/%s not kept: %s", ns, job["metadata"]["name"], problem)
                    return None
                manifest = dict(action.manifest)
                if isinstance(action, CreateSSHSecret):
                    manifest["data"] = ssh_secret_data()
                    return await self._create_secret(ns, manifest, made)
                return await self._create(ns, manifest, job, children)

        # What pods mount (the SSH Secret, hostfiles) first, and nothing more should one of them
        # turn out to be someone else's: a pod created alongside would mount it.
        mounted = [a for a in actions if _mounted(a)]
        problems = [p for p in await asyncio.gather(*(one(a) for a in mounted)) if p]
        if problems:
            return problems
        before = set((children.get("Pod") or {}).items())
        rest = [a for a in actions if not _mounted(a)]
        results = await asyncio.gather(*(one(a) for a in rest))
        problems = [p for p in results if p]
        foreign_service = any(p and isinstance(a, Create) and a.kind == "Service" for a, p in zip(rest, results, strict=True))
        if foreign_service:
            await self._unmake_pods(ns, children, before)
        return problems

    async def _unmake_pods(self, ns: str, children: dict[str, dict[str, str]], before: set[tuple[str, str]]) -> None:
        """Delete, without grace, the pods this pass made beside a Service that is someone else's:
        their rendezvous would go to it. Off the record too: the job fails on the refusal."""
        made = {name: uid for name, uid in (children.get("Pod") or {}).items()
                if (name, uid) not in before and not uid.startswith(REFUSED)}  # fmt: skip
        for name in made:
            children["Pod"].pop(name, None)

        async def gone(name: str, uid: str) -> None:
            try:
                await self.kube.delete(child_path("Pod", ns, name), uid=uid, grace_seconds=0)
                self.metrics["delete_beside_foreign.Pod"] += 1
            except (NotFound, Conflict):
                pass

        await asyncio.gather(*(gone(n, u) for n, u in made.items()))

    def _job_gone(self, job: Obj) -> bool:
        """Deleted, or being deleted, since the plan was made (the informer sees it first)."""
        meta = job["metadata"]
        cached = self.informer_for(job["kind"], meta["namespace"]).get((meta["namespace"], meta["name"]))
        if cached is None:
            return True
        cmeta = cached.get("metadata") or {}
        return cmeta.get("uid") != meta.get("uid") or bool(cmeta.get("deletionTimestamp"))

    async def _create(self, ns: str, manifest: Obj, job: Obj | None = None,
                      children: dict[str, dict[str, str]] | None = None) -> str | None:  # fmt: skip
        """Create a child of ``job``; its uid goes into ``children``. One of the name that this
        controller did not create for the job is refused (``_foreign``): never adopted."""
        kind = child_kind(manifest)
        manifest["metadata"]["namespace"] = ns
        try:
            created = await self.kube.create(child_path(kind, ns), body=manifest)
            self.metrics[f"create.{kind}"] += 1
        except AlreadyExists:
            self.metrics[f"create_exists.{kind}"] += 1
            return await self._foreign(ns, manifest, job, children)
        except Invalid as exc:
            self.metrics[f"create_invalid.{kind}"] += 1
            return f"the API server rejected {kind} {manifest['metadata']['name']}: {bounded(exc.message, 1000)}"
        except Forbidden as exc:
            if not refused_by_policy(exc):
                raise  # our own RBAC: retried with back-off and reported on the job
            # The namespace's Pod Security level (or an admission policy) refuses the template:
            # it will refuse it every time, so the job fails saying so instead of retrying.
            self.metrics[f"create_refused.{kind}"] += 1
            return f"the namespace's policy refused {kind} {manifest['metadata']['name']}: {bounded(exc.message, 1000)}"
        if children is not None:
            children.setdefault(kind, {})[manifest["metadata"]["name"]] = str(created["metadata"]["uid"])
        # Indexed only when cached: had the watch passed it, its events did both already.
        if self.informer_for(kind, ns).remember(created) and self.on_created is not None:
            self.on_created(created)
        return None

    async def _create_secret(self, ns: str, manifest: Obj, made: dict[str, str]) -> str | None:
        """Create the job's SSH Secret; ``made`` gets its name and uid for the job's status.

        Without read access to Secrets, one that already exists cannot be shown to be the
        job's: the job has no record of it (a record is written right after a create), so
        someone else made it, or this controller died between its create and the record.
        Either way it is refused, never mounted.
        """
        name = manifest["metadata"]["name"]
        manifest["metadata"]["namespace"] = ns
        try:
            created = await self.kube.create(child_path("Secret", ns), body=manifest)
        except AlreadyExists:
            self.metrics["create_foreign.Secret"] += 1
            return (f"Secret {name} already exists and this job does not own it (it has no record of creating it; "
                    "someone else created it, or the controller stopped between creating it and recording it); the "
                    "controller will not let the job's pods mount it. Delete it, or give the job another name")  # fmt: skip
        except Invalid as exc:
            return f"the API server rejected Secret {name}: {bounded(exc.message, 1000)}"
        self.metrics["create.Secret"] += 1
        made.update(name=name, uid=str((created.get("metadata") or {}).get("uid") or ""))
        return None

    async def _record_children(self, job: Obj, children: dict[str, dict[str, str]]) -> Obj:
        """Put the uids of the children just made (or found decided) on record in the job's status
        (api/ownership.py), by a merge patch as for the SSH Secret: a job changed meanwhile must
        not cost the record."""
        meta = job["metadata"]
        record = {kind: {name: _entry(uid) for name, uid in names.items()} for kind, names in children.items() if names}
        body = {"metadata": {"uid": meta.get("uid")}, "status": {ownership.CREATED: record}}
        updated = await self.kube.patch(job_path(resource_for(job["kind"]), meta["namespace"], meta["name"], "status"), body=body)
        self.metrics["status_write"] += 1
        self.informer_for(job["kind"], meta["namespace"]).remember(updated)
        return updated

    async def _record_secret(self, job: Obj, made: dict[str, str]) -> Obj:
        """Record the SSH Secret just made in the job's status.

        The controller cannot read Secrets (deploy/rbac-*.yaml): this record is how later passes
        know the Secret exists and is its own. A merge patch (the uid as precondition) rather
        than a PUT: a job changed meanwhile must not cost the record (a Conflict would leave a
        Secret the next pass could only refuse).
        """
        meta = job["metadata"]
        body = {"metadata": {"uid": meta.get("uid")}, "status": {SSH_SECRET_STATUS: made}}
        updated = await self.kube.patch(job_path(resource_for(job["kind"]), meta["namespace"], meta["name"], "status"), body=body)
        self.metrics["status_write"] += 1
        self.informer_for(job["kind"], meta["namespace"]).remember(updated)
        return updated

    async def _foreign(self, ns: str, manifest: Obj, job: Obj | None = None,
                       children: dict[str, dict[str, str]] | None = None) -> str | None:  # fmt: skip
        """Why an existing object of the name we wanted must not be used, if it is not the job's.

        It is the job's only when the job's status (as the pass found it, before this pass's
        own decisions) has its uid on record, or a decision to create it from before it existed
        (api/ownership.py). A co-tenant may create ``<job>-hostfile`` or ``<job>-worker-0``
        before the job's first pass, with a controller ownerReference naming the job: its pods
        would mount someone else's hostfile, or the pod would decide the job's outcome. A job of
        another kind with the same name makes children of the same names: refused the same way,
        naming that job.
        """
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        try:
            existing = await self.kube.get(child_path(kind, ns, name))
        except NotFound:  # gone meanwhile: the next pass creates ours
            return None
        if job is not None and ownership.verdict(job.get("status"), kind, name, existing) is not None:
            if children is not None:  # ours from an earlier pass: its uid goes on record
                children.setdefault(kind, {})[name] = str(existing["metadata"]["uid"])
            return None
        self.metrics[f"create_foreign.{kind}"] += 1
        if children is not None:  # on record as refused: no later pass takes it for a decided create
            children.setdefault(kind, {})[name] = REFUSED + str(existing["metadata"].get("uid"))
        mounted = "the controller will not let the job's pods mount it" if kind in MOUNTED else "the controller never adopts it"
        owner = ownership.owner_of(existing)
        return (f"{kind} {name} already exists and was not created by the controller for this job ({owner}); "
                f"{mounted}. Delete it, or give the job another name")  # fmt: skip

    async def _patch(self, ns: str, action: Patch) -> None:
        try:
            patched = await self.kube.patch(child_path(action.kind, ns, action.name), body=action.body)
        except NotFound:  # deleted under us: the watch brings that, and the next pass recreates it
            return
        self.metrics[f"patch.{action.kind}"] += 1
        self.informer_for(action.kind, ns).remember(patched)

    async def _replace_status(self, ns: str, action: ReplaceStatus) -> None:
        """PUT with the cached resourceVersion: a Conflict re-plans from the newer object."""
        try:
            updated = await self.kube.replace(child_path(action.kind, ns, action.name, "status"), body=action.body)
        except NotFound:
            return
        self.metrics[f"status_write.{action.kind}"] += 1
        self.informer_for(action.kind, ns).remember(updated)

    async def _delete(self, ns: str, action: Delete) -> None:
        informer = self.informer_for(action.kind, ns)
        try:
            await self.kube.delete(child_path(action.kind, ns, action.name), uid=action.uid)
            self.metrics[f"delete.{action.kind}"] += 1
        except NotFound:
            cached = informer.get((ns, action.name))
            if cached is not None:
                informer.forget(cached)
            return
        except Conflict:  # uid precondition: a newer object of the same name; leave it alone
            return
        cached = informer.get((ns, action.name))
        if cached is not None:
            marked = {**cached, "metadata": {**cached["metadata"], "deletionTimestamp": _now()}}
            informer.store(marked)

    async def _delete_job(self, job: Obj, action: DeleteJob) -> None:
        """The job itself goes (its ``ttlSecondsAfterFinished`` passed: reconcile/steps/expire.py), its
        children by their owner references. NotFound: gone already; Conflict: the uid precondition
        failed, the name is another job's now, left alone. The cached job is marked as being
        deleted, so a pass before the watch brings the deletion plans nothing."""
        meta = job["metadata"]
        ns, name = meta["namespace"], meta["name"]
        try:
            await self.kube.delete(job_path(resource_for(job["kind"]), ns, name), uid=action.uid)
        except (NotFound, Conflict):
            return
        self.metrics["delete_expired"] += 1
        log.info("deleted %s %s/%s: its ttlSecondsAfterFinished has passed", job["kind"], ns, name)
        informer = self.informer_for(job["kind"], ns)
        cached = informer.get((ns, name))
        if cached is not None and (cached.get("metadata") or {}).get("uid") == action.uid:
            informer.store({**cached, "metadata": {**cached["metadata"], "deletionTimestamp": _now()}})

    async def _write_spec(self, job: Obj, merged: Obj, record: Obj | None = None) -> str | None:
        """Write a job's spec with its template merged in (reconcile/template.py): a PUT with the
        cached resourceVersion, so a job changed meanwhile is planned again (Conflict) rather than
        overwritten. A merged job the API server refuses fails the job with its message. Then the
        merge's ``record`` goes into the job's status (kinds/templates.py STATUS_KEY): until it
        is there the job counts as not merged, and a pass after a crash in between merges again
        (the merge is idempotent: the job's values win, and they include the template's)."""
        meta = job["metadata"]
        body = {**merged, "metadata": {**merged["metadata"], "resourceVersion": meta.get("resourceVersion")}}
        body.pop("status", None)
        try:
            updated = await self.kube.replace(job_path(resource_for(job["kind"]), meta["namespace"], meta["name"]), body=body)
        except Invalid as exc:
            return f"the API server rejected the job merged with its template: {bounded(exc.message, 1000)}"
        except Forbidden as exc:
            if not refused_by_policy(exc):
                raise  # our own RBAC (update on the job kinds): retried with back-off and reported on the job
            # An admission policy on jobs (deploy/optional/admission-policy.yaml checks updates too)
            # refuses what the template brings: it would refuse it every time.
            return f"the namespace's policy refused the job merged with its template: {bounded(exc.message, 1000)}"
        self.metrics["spec_write"] += 1
        self.informer_for(job["kind"], meta["namespace"]).remember(updated)
        if record is not None:
            await self._write_status(updated, {**(updated.get("status") or {}), TEMPLATE_STATUS: record})
        return None

    async def _write_status(self, job: Obj, status: Obj) -> Obj:
        resource = resource_for(job["kind"])
        meta = job["metadata"]
        body = {**job, "status": status}
        # PUT with the cached resourceVersion: a stale cache gets a Conflict and a requeue
        # instead of overwriting a newer status.
        updated = await self.kube.replace(job_path(resource, meta["namespace"], meta["name"], "status"), body=body)
        self.metrics["status_write"] += 1
        self.informer_for(job["kind"], meta["namespace"]).remember(updated)
        return updated

    async def report_error(self, job: Obj, exc: BaseException | None, passes: int) -> None:
        """Set (or, with ``exc`` None, clear) the condition saying the job's passes keep failing."""
        sb = StatusBuilder(job.get("status"), datetime.now(timezone.utc))
        if exc is None:
            if sb.is_true(RECONCILE_ERROR):
                sb.set_condition(RECONCILE_ERROR, False, "Reconciled", "The controller reconciles the job again.")
                await self._write_status(job, sb.new)
            return
        message = (f"{passes} reconcile passes in a row failed; the controller keeps retrying with back-off. "
                   f"Last error: {type(exc).__name__}: {bounded(str(exc), 1000)}")  # fmt: skip
        if sb.set_condition(RECONCILE_ERROR, True, "ReconcileFailing", message):
            await self._write_status(job, sb.new)
            await self.event(job, Emit("Warning", "ReconcileFailing", message))

    async def not_managed(self, job: Obj, why: str) -> None:
        """Say on a job in a namespace the controller does not manage that it gets no pods:
        a condition, and one Warning Event when the condition turns true (not every pass).

        Not over a false one: that is what ``managed`` writes, so a controller that does manage
        the namespace (a namespaced one beside a cluster-wide one whose selector leaves the
        namespace out) has the job. Turning it true again would have each controller undo the
        other's write on every watch event, without end. The cost: a namespace relabelled out
        of this controller's scope says so on its new jobs, not on those it reconciled before."""
        if condition(job.get("status") or {}, NOT_MANAGED):
            return
        sb = StatusBuilder(job.get("status"), datetime.now(timezone.utc))
        message = f"The controller does not reconcile this job and creates no pods for it: {why}."
        if sb.set_condition(NOT_MANAGED, True, NOT_MANAGED, message):
            await self._write_status(job, sb.new)
            await self.event(job, Emit("Warning", NOT_MANAGED, message))

    async def managed(self, job: Obj) -> Obj:
        """The job with a NamespaceNotManaged condition turned false, should its namespace
        have become managed (relabelled); the job as it is otherwise."""
        if not true_condition(job.get("status") or {}, NOT_MANAGED):  # every pass asks: no copy of the status
            return job
        sb = StatusBuilder(job.get("status"), datetime.now(timezone.utc))
        sb.set_condition(NOT_MANAGED, False, "NamespaceManaged", "The controller reconciles jobs in this namespace.")
        return await self._write_status(job, sb.new)

    async def event(self, job: Obj, event: Emit) -> None:
        meta = job["metadata"]
        now = _now()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": job["apiVersion"],
                "kind": job["kind"],
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
            },
            "reason": event.reason,
            "message": event.message[:1024],
            "type": event.type,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.kube.create(child_path("Event", meta["namespace"]), body=body)
            self.metrics["event"] += 1
        except Exception as exc:  # noqa: BLE001 - an Event is best effort; never fail a reconcile for it
            log.warning("could not record event %s on %s/%s: %s", event.reason, meta["namespace"], meta["name"], exc)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
