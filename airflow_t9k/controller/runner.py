"""The controller process: informers feed a work queue; workers plan and apply one job at a time."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, cast

from airflow_t9k.api import ownership
from airflow_t9k.api.outcome import interpret
from airflow_t9k.api.paths import GANG_GROUP, child_kind, child_path, job_path
from airflow_t9k.api.resources import RESOURCES, TEMPLATE_RESOURCES, resource_for
from airflow_t9k.controller import logs
from airflow_t9k.controller.apply import Executor
from airflow_t9k.controller.features import claim_templates_path
from airflow_t9k.controller.metrics import Metrics, TimedQueue
from airflow_t9k.controller.nodewatch import NodeHealth, jobs_with_pods_on
from airflow_t9k.controller.pushed import PushedReports, newest
from airflow_t9k.controller.reconcile import Emit, Observed, Plan, plan
from airflow_t9k.controller.reconcile.status import bounded
from airflow_t9k.controller.reports import ProgressStreams
from airflow_t9k.controller.scope import Scope
from airflow_t9k.controller.slim import body_for, slim_for
from airflow_t9k.controller.watches import NamespaceWatches
from airflow_t9k.k8s.client import UNDECODABLE, Kube
from airflow_t9k.k8s.errors import Conflict
from airflow_t9k.k8s.informer import Informer
from airflow_t9k.kinds.base import LABEL_MANAGED_BY, MANAGED_BY
from airflow_t9k.kinds.templates import CLUSTER, NAMESPACED, unresolved, wanted

if TYPE_CHECKING:
    from airflow_t9k.controller.leader import LeaderElector
    from airflow_t9k.controller.queue import WorkQueue
    from airflow_t9k.controller.reconcile.nodes import NodeRule
    from airflow_t9k.controller.reconcile.priority import PriorityBand
    from airflow_t9k.controller.reconcile.push import PushTarget
    from airflow_t9k.k8s.multiplexed import LineSource

Obj = dict[str, Any]
JobKey = tuple[str, str, str]  # (kind, namespace, name)
# Secrets are not watched: the controller may only create them (deploy/rbac-*.yaml); a job's
# status records the SSH Secret made for it (reconcile/steps/children.py ssh_secret_recorded).
CHILD_KINDS = ("Pod", "Service", "ConfigMap", "Job")
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
# Kueue's cluster-scoped objects that admission reads: kind -> path
KUEUE_CLUSTER = {"ResourceFlavor": f"{KUEUE}/resourceflavors", "WorkloadPriorityClass": f"{KUEUE}/workloadpriorityclasses",
                 "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses"}  # fmt: skip
REPORT_AFTER_FAILURES = 3  # failed passes in a row before the job gets a condition and an Event
# CPU seconds (the planning thread's own, so waiting for the GIL does not count) under which a
# job's next plan runs on the event loop instead of in a thread.
INLINE_PLAN_SECONDS = 0.005
# Items per answer when listing children: anyone may put our label on a 1 MiB ConfigMap, and a
# page of 500 of them would be 500 MB in one response (k8s/informer.py).
CHILD_PAGE = {"ConfigMap": 10}  # items per list answer by kind; 100 for the others

log = logging.getLogger(__name__)


@dataclass
class Settings:
    namespaces: list[str] = field(default_factory=list)  # empty: every namespace
    workers: int = 16
    kinds: list[str] = field(default_factory=lambda: sorted(RESOURCES))
    watch_timeout: int = 300
    # How Kueue is used, as cli.detect_queueing resolved --queueing: kueue | auto | absent | off.
    queueing: str = "off"
    # Seconds a status change that keeps the phase and has nothing to do (detail_only) may wait
    # so that several land in one write; 0 writes each at once.
    coalesce_status: float = 1.0
    # Whether the cluster serves Volcano's PodGroup API (cli.detect_volcano): AscendJobs get a
    # PodGroup there, and their pods are not sent to a "volcano" scheduler anywhere else.
    volcano: bool = False
    # In-place restarts and gang scheduling without add-ons (controller/features.py): None where the
    # cluster offers them, else why not; the in-place gate and agent's image (None: each replica's).
    in_place_problem: str | None = "not detected"
    restart_agent_image: str | None = None
    gang_problem: str | None = "not detected"
    # Which namespaces' jobs get pods (scope.py): never the cluster's own or the controller's.
    scope: Scope = field(default_factory=Scope)
    # Seconds from its creation that a job waits for a job template it names and that does not
    # exist, before it fails (reconcile/template.py).
    template_wait: float = 30.0
    # Live progress (docs/progress.md): seconds between two writes of a job's new status.progress
    # (0: no log is followed, no progress kept), and how many replica logs are followed at once.
    progress_interval: float = 10.0
    progress_streams: int = 200
    # The progress endpoint (--progress-endpoint; docs/progress.md, "The push path"): what every
    # replica is given to reach it (None: off), and the requests a second and at once a job's
    # replicas may push.
    progress_push: PushTarget | None = None
    push_rate: float = 1.0
    push_burst: float = 10.0
    # Whether a BeamJob may ask for a NodePort or LoadBalancer Service (kinds/beam.py EXTERNAL_SCOPES).
    beam_external_service: bool = False
    # --priority-class-map (reconcile/priority.py): t9kScheduler priorities -> PriorityClasses; empty: off.
    priority_map: tuple[PriorityBand, ...] = ()
    # --avoid-bad-nodes (reconcile/nodes.py): whether nodes are watched and bad ones avoided, and
    # --unhealthy-node-condition: what else makes a node unhealthy.
    avoid_bad_nodes: bool = False
    node_rules: tuple[NodeRule, ...] = ()
    # DRA (reconcile/dra.py): None where the API server serves ResourceClaimTemplates (they are
    # then watched, to count the devices a pod's claims ask for), else why not.
    dra_problem: str | None = "not detected (the controller looks when it starts)"


def detail_only(old: Obj, result: Plan) -> bool:
    """A status change that may wait: the job's phase (as operators, triggers and sensors read
    it) stays, only detail moved (a pod started or ended, counts, a condition such as
    Initializing), and the pass has nothing else to do.

    A new phase and a pass that acts are written at once, status first. The pods of a job
    change within moments of each other, so one write a little later carries them all, and a
    phase change meanwhile writes them along with it.
    """
    if result.actions or result.events or not old or result.status == old:
        return False
    try:
        return interpret({"status": result.status}).phase == interpret({"status": old}).phase
    except Exception:  # noqa: BLE001 - a status someone else wrote malformed: write ours at once
        return False


def _timed_plan(job: Obj, observed: Observed, now: datetime) -> tuple[Plan, float]:
    # Wall time, not the thread's CPU time: reading CLOCK_THREAD_CPUTIME_ID is a system call,
    # and under py-spy it held 15% of the controller's samples at 200 jobs. A plan in a thread
    # that waited for the GIL only looks slower, and stays in a thread: the safe side.
    started = time.perf_counter()
    result = plan(job, observed, now)
    return result, time.perf_counter() - started


def _namespace_labels(obj: Obj) -> Obj:
    """A Namespace as the cache keeps it: its name, labels and resourceVersion only."""
    meta = obj.get("metadata") or {}
    keep = {k: meta[k] for k in ("name", "labels", "resourceVersion", "uid") if k in meta}
    return {"kind": "Namespace", "metadata": keep}


class Controller:
    def __init__(self, kube: Kube, settings: Settings, instruments: Metrics | None = None, log_kube: Kube | None = None,
                 log_lines: LineSource | None = None) -> None:  # fmt: skip
        """``log_kube``: the client (its own connection pool) that follows replica logs for
        progress; ``kube`` when not given. ``log_lines``: what follows them instead (over HTTP/2,
        k8s/multiplexed.py) when given."""
        self.kube = kube
        self.settings = settings
        self.instruments = instruments or Metrics()  # Prometheus; `metrics` stays our own counters
        self.queue: WorkQueue = self.instruments.queue()
        self.metrics: Counter[str] = Counter()
        self.scopes = settings.namespaces or [""]
        self.informers: dict[tuple[str, str], Informer] = {}
        self.children: dict[str, set[tuple[str, str, str]]] = {}  # owner uid -> {(kind, ns, name)}
        # Workloads are watched only where Kueue's API is served (and --queueing allows it).
        self.kueue = settings.queueing in ("kueue", "auto")
        self.child_kinds = (CHILD_KINDS + (("Workload",) if self.kueue else ()) + (("PodGroup",) if settings.volcano else ())
                            + ((GANG_GROUP,) if settings.gang_problem is None else ()))  # fmt: skip
        # With a namespace selector, children are watched in managed namespaces only (watches.py).
        self.per_namespace = (
            NamespaceWatches(self._child_informer, self.child_kinds, self._requeue_namespace)
            if settings.scope.selector is not None else None
        )  # fmt: skip
        self._placeholders: dict[str, Informer] = {}
        for ns in self.scopes:
            for kind in settings.kinds:
                path = job_path(resource_for(kind), ns or None)
                self.informers[(kind, ns)] = Informer(
                    kube, path, kind=kind, handler=self._on_job, watch_timeout=settings.watch_timeout,
                    on_recovered=self._requeue_all, transform=slim_for(kind),
                )  # fmt: skip
            for kind in self.child_kinds if self.per_namespace is None else ():
                self.informers[(kind, ns)] = self._child_informer(kind, ns)
            # Job templates: where a job's template comes from, once (reconcile/template.py).
            self.informers[(NAMESPACED, ns)] = Informer(
                kube, job_path(TEMPLATE_RESOURCES[NAMESPACED], ns or None), kind=NAMESPACED, handler=self._on_template,
                watch_timeout=settings.watch_timeout,
            )  # fmt: skip
            if settings.dra_problem is None:  # read when a replica's run opens (reconcile/usage.py)
                self.informers[("ResourceClaimTemplate", ns)] = Informer(
                    kube, claim_templates_path(ns or None), kind="ResourceClaimTemplate",
                    watch_timeout=settings.watch_timeout, transform=slim_for("ResourceClaimTemplate"),
                )  # fmt: skip
            if self.kueue:
                path = f"{KUEUE}/namespaces/{ns}/localqueues" if ns else f"{KUEUE}/localqueues"
                self.informers[("LocalQueue", ns)] = Informer(kube, path, kind="LocalQueue", watch_timeout=settings.watch_timeout,
                                                              transform=slim_for("LocalQueue"))  # fmt: skip
        self.informers[(CLUSTER, "")] = Informer(kube, job_path(TEMPLATE_RESOURCES[CLUSTER]), kind=CLUSTER,
                                                  handler=self._on_template, watch_timeout=settings.watch_timeout)  # fmt: skip
        if settings.scope.selector is not None:
            # Namespace labels decide which namespaces are managed; a relabelled namespace's jobs
            # are planned again (they may now get pods, or stop getting new ones).
            self.informers[("Namespace", "")] = Informer(
                kube, "/api/v1/namespaces", kind="Namespace", handler=self._on_namespace,
                watch_timeout=settings.watch_timeout, transform=_namespace_labels,
            )  # fmt: skip
        if self.kueue:
            for kind, path in KUEUE_CLUSTER.items():
                self.informers[(kind, "")] = Informer(kube, path, kind=kind, watch_timeout=settings.watch_timeout,
                                                      transform=slim_for(kind))  # fmt: skip
        if settings.priority_map:
            # A class created or changed is what a job's status.scheduling names: plan them again.
            self.informers[("PriorityClass", "")] = Informer(
                kube, KUEUE_CLUSTER["PriorityClass"], kind="PriorityClass", watch_timeout=settings.watch_timeout,
                transform=slim_for("PriorityClass"), handler=self._on_priority_class,
            )  # fmt: skip
        self.node_health = (
            NodeHealth(kube, settings.node_rules, settings.watch_timeout, self._jobs_on_node,
                       lambda key: self.queue.add(key, urgent=True))
            if settings.avoid_bad_nodes else None
        )  # fmt: skip
        if self.node_health is not None:
            self.informers[("Node", "")] = self.node_health.informer
        self.executor = Executor(
            kube, self.informer_for, self.metrics, on_created=self._index, on_finished=self.instruments.job_finished
        )
        self.instruments.bind(self)
        self.reported: set[str] = set()  # uids of undecodable objects already reported
        self.listening_since: datetime | None = None  # when the workers last started (``_start_workers``)
        self._held: dict[JobKey, float] = {}  # job -> when its held status write is due (loop time)
        self._quick_plans: set[JobKey] = set()  # jobs whose last plan took at most INLINE_PLAN_SECONDS
        self._background: set[asyncio.Task[None]] = set()
        # --progress-streams 0 follows no log (with the push path: progress by push only).
        follow = settings.progress_interval > 0 and settings.progress_streams > 0
        self.reports = (ProgressStreams(log_lines or log_kube or kube, self.queue.add, self.metrics, settings.progress_interval,
                                        settings.progress_streams) if follow else None)  # fmt: skip
        self.pushed = (PushedReports(self.queue.add, settings.progress_interval, settings.push_rate, settings.push_burst)
                       if settings.progress_push is not None else None)  # fmt: skip
        self._elector: LeaderElector | None = None

    def _child_informer(self, kind: str, ns: str) -> Informer:
        return Informer(
            self.kube, child_path(kind, ns or None), kind=kind, label_selector=f"{LABEL_MANAGED_BY}={MANAGED_BY}",
            handler=self._on_child, watch_timeout=self.settings.watch_timeout, on_recovered=self._requeue_all,
            transform=slim_for(kind),  # the cache keeps what the controller reads (slim.py)
            keep=self._owned,  # and only what one of its jobs owns: anyone can copy our label
            page=CHILD_PAGE.get(kind, 100),
            body=body_for(kind),  # and only what it reads of them (slim.py)
        )  # fmt: skip

    def informer_for(self, kind: str, namespace: str) -> Informer:
        if self.per_namespace is not None and kind in self.child_kinds:
            found = self.per_namespace.get(kind, namespace)
            if found is None:  # a namespace not watched: an empty cache that is never run
                found = self._placeholders.setdefault(kind, Informer(self.kube, child_path(kind), kind=kind))
            return found
        return self.informers[(kind, namespace if namespace in self.scopes else "")]

    # -- what the progress endpoint asks (push_server.Host) ------------------------------------
    def leading(self) -> bool:
        """Whether this replica's passes write statuses now: caches synced, and the lease held."""
        return self.synced() and (self._elector is None or self._elector.valid())

    def cached_job(self, kind: str, namespace: str, name: str) -> Obj | None:
        informer = self.informers.get((kind, namespace if namespace in self.scopes else ""))
        return None if informer is None else informer.get((namespace, name))

    def cached_pod(self, namespace: str, name: str) -> Obj | None:
        # Through informer_for: with a namespace selector (the chart's default scope) pods are
        # cached per managed namespace, not under self.informers, which then has none.
        return self.informer_for("Pod", namespace).get((namespace, name))

    # -- events -> keys ---------------------------------------------------------------------
    def _on_job(self, event: str, obj: Obj) -> None:
        meta = obj["metadata"]
        if event == UNDECODABLE:
            self._undecodable(obj)
            return
        # A job with no children yet is new work, which waits behind the jobs already running.
        started = event != "ADDED" or meta.get("uid") in self.children
        self.queue.add((obj["kind"], meta["namespace"], meta["name"]), urgent=started)

    def _on_priority_class(self, event: str, obj: Obj) -> None:
        # Not during the first list: every job is planned once the caches have synced anyway.
        informer = self.informers.get(("PriorityClass", ""))
        if informer is not None and informer.synced.is_set():
            self._requeue_all()

    def _jobs_on_node(self, node: str) -> list[JobKey]:
        """The jobs with a pod on ``node``, from the pod caches (a node's health changed)."""
        caches = [i.cache for kind, _, i in self._all_informers() if kind == "Pod"]
        return jobs_with_pods_on(node, caches, self.settings.kinds)

    def _undecodable(self, obj: Obj) -> None:
        """An object the watch could not decode stays out of the cache; say so on it, once."""
        meta = obj["metadata"]
        self.metrics["undecodable"] += 1
        if not meta.get("name") or not meta.get("namespace") or meta.get("uid", meta["name"]) in self.reported:
            return
        self.reported.add(meta.get("uid", meta["name"]))
        kind = obj.get("kind") if obj.get("kind") in RESOURCES else None
        if kind is None:
            return
        job = {"apiVersion": resource_for(kind).api_version, "kind": kind, "metadata": meta}
        message = ("The controller cannot decode this object (it is nested too deeply for its JSON decoder) "
                   "and leaves it alone; fix or delete it.")  # fmt: skip
        task = asyncio.get_running_loop().create_task(self.executor.event(job, Emit("Warning", "Undecodable", message)))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _owned(self, obj: Obj) -> bool:
        """Whether a job kind this controller reconciles is the object's controller (owner)."""
        refs = (obj.get("metadata") or {}).get("ownerReferences") or []
        return any(isinstance(r, dict) and r.get("controller") is True and r.get("kind") in self.settings.kinds
                   and r.get("apiVersion") == resource_for(str(r.get("kind"))).api_version for r in refs)  # fmt: skip

    def _on_child(self, event: str, obj: Obj) -> None:
        owner = self._index(obj, deleted=event == "DELETED")
        if owner is not None:
            self.queue.add(owner)

    def _index(self, obj: Obj, deleted: bool = False) -> JobKey | None:
        """Note a child under its owning job (from a watch event, or from our own create, so the
        next pass sees it before the watch brings it); the owner's key, if it is one of ours."""
        meta = obj["metadata"]
        ref = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
        if ref is None or ref.get("kind") not in self.settings.kinds:
            return None
        entry = (child_kind(obj), meta["namespace"], meta["name"])
        owned = self.children.setdefault(ref["uid"], set())
        if deleted:
            owned.discard(entry)
            if not owned:
                self.children.pop(ref["uid"], None)
        else:
            owned.add(entry)
        return ref["kind"], meta["namespace"], ref["name"]

    def _on_namespace(self, event: str, obj: Obj) -> None:
        ns = obj["metadata"].get("name")
        if self.per_namespace is not None and ns:
            listed = not self.settings.namespaces or ns in self.settings.namespaces  # -n narrows it further
            if event != "DELETED" and listed and self.why_not_managed(ns) is None:
                self.per_namespace.start(ns)
            elif self.per_namespace.watching(ns):
                self.per_namespace.stop(ns)
                for owned in self.children.values():  # what its caches held is gone with them
                    owned.difference_update({e for e in owned if e[1] == ns})
        self._requeue_namespace(ns)

    def _requeue_namespace(self, ns: str) -> None:
        """Plan again every job of ``ns`` (its labels changed, or its children are now listed)."""
        for (kind, _), informer in list(self.informers.items()):
            if kind in RESOURCES:
                for job_ns, name in list(informer.cache):
                    if job_ns == ns:
                        self.queue.add((kind, job_ns, name))

    def _on_template(self, event: str, obj: Obj) -> None:
        """A job template came, changed or went: plan again the jobs still waiting for it (a job
        it was merged into no longer reads it)."""
        meta = obj.get("metadata") or {}
        key = (obj.get("kind"), meta.get("namespace") or "", meta.get("name"))
        for (kind, _), informer in list(self.informers.items()):
            if kind in RESOURCES:
                for (ns, name), job in list(informer.cache.items()):
                    if unresolved(job) and wanted(job) == key:
                        self.queue.add((kind, ns, name))

    def template_of(self, job: Obj) -> Obj | None:
        """The job template a job names and has not merged yet, as cached (None: not found)."""
        ref = wanted(job) if unresolved(job) else None
        if ref is None:
            return None
        kind, ns, name = ref
        informer = self.informers.get((kind, ns if ns in self.scopes else ""))
        return None if informer is None else informer.get((ns, name))

    def why_not_managed(self, namespace: str) -> str | None:
        """None when jobs in ``namespace`` get pods, else why not (Scope.why_not)."""
        labels = None
        informer = self.informers.get(("Namespace", ""))
        if informer is not None:
            cached = informer.get(("", namespace))
            labels = None if cached is None else dict(cached["metadata"].get("labels") or {})
        return self.settings.scope.why_not(namespace, labels)

    def owned_children(self, job: Obj) -> tuple[dict[str, dict[str, Obj]], dict[str, dict[str, str]]]:
        """The job's children, by kind and name, and those of them whose uid is not on record
        yet (to record: api/ownership.py). A child counts only in the job's own namespace, with
        the job's kind and name in its controller reference as well as its uid, and when the
        job's status says the controller created it: a pod with a forged reference, made in
        another namespace (racing the garbage collector) or in this one, is none of the job's."""
        meta = job["metadata"]
        status = job.get("status")
        found: dict[str, dict[str, Obj]] = {k: {} for k in self.child_kinds}
        adopt: dict[str, dict[str, str]] = {}
        for kind, ns, name in self.children.get(meta["uid"], ()):
            if kind not in found or ns != meta["namespace"]:
                continue
            obj = self.informer_for(kind, ns).get((ns, name))
            if obj is None:
                continue
            ref = next(
                (r for r in obj["metadata"].get("ownerReferences") or [] if isinstance(r, dict) and r.get("controller")), {}
            )
            if (ref.get("kind"), ref.get("name"), ref.get("uid")) != (job["kind"], meta["name"], meta["uid"]):
                continue
            why = ownership.verdict(status, kind, name, obj)
            if why is None:
                self.metrics["child_not_owned"] += 1
                continue
            if why != "recorded":
                adopt.setdefault(kind, {})[name] = str(obj["metadata"].get("uid"))
            found[kind][name] = obj
        return found, adopt

    def observed(self, job: Obj, found: dict[str, dict[str, Obj]] | None = None) -> Observed:
        if found is None:
            found = self.owned_children(job)[0]
        no_secrets: dict[str, Obj] = {}
        children = (found["Pod"], found["Service"], found["ConfigMap"], no_secrets, found["Job"])
        key = (job["kind"], job["metadata"]["namespace"], job["metadata"]["name"])
        uid = job["metadata"].get("uid")
        pushed = self.pushed.report(key, uid) if self.pushed is not None else None
        report = newest(self.reports.report(key, uid) if self.reports is not None else None, pushed)
        more: dict[str, Any] = {"volcano": self.settings.volcano, "podgroups": found.get("PodGroup", {}),
                "template": self.template_of(job), "template_wait": self.settings.template_wait,
                "report": report, "progress_interval": self.settings.progress_interval,
                "progress_heard": self.hears(key, pushed), "progress_since": self.listening_since,
                "beam_external_service": self.settings.beam_external_service,
                "progress_push": self.settings.progress_push, "in_place_problem": self.settings.in_place_problem,
                "restart_agent_image": self.settings.restart_agent_image, "gang_problem": self.settings.gang_problem,
                "gangs": found.get(GANG_GROUP, {}), "priority_map": self.settings.priority_map}  # fmt: skip
        if self.node_health is not None:
            more["nodes"], more["node_rules"] = self.node_health.view, self.settings.node_rules
        if self.settings.dra_problem is None and any(
            (p.get("spec") or {}).get("resourceClaims") for p in found["Pod"].values()
        ):  # only a job whose pods claim devices: the others need none of them
            ns = job["metadata"]["namespace"]
            templates = self.informers[("ResourceClaimTemplate", ns if ns in self.scopes else "")].cache
            more["claim_templates"] = {n: o for (t_ns, n), o in templates.items() if t_ns == ns}
        if self.settings.priority_map:
            more["pod_priority_classes"] = {n: o for (_, n), o in self.informers[("PriorityClass", "")].cache.items()}
        if not self.kueue:
            return Observed(*children, queueing=self.settings.queueing, **more)
        ns = job["metadata"]["namespace"]
        cluster = {k: {name: o for (_, name), o in self.informers[(k, "")].cache.items()} for k in KUEUE_CLUSTER}
        return Observed(
            *children, workloads=found["Workload"], queueing=self.settings.queueing,
            local_queues=[n for (q_ns, n) in self.informer_for("LocalQueue", ns).cache if q_ns == ns],
            flavors=cluster["ResourceFlavor"],
            priority_classes={**cluster["PriorityClass"], **cluster["WorkloadPriorityClass"]},  # Kueue's own class wins
            **more,
        )  # fmt: skip

    def hears(self, key: JobKey, pushed: Obj | None) -> bool:
        """Whether a report of the job would reach this controller now, so its silence means
        something (hang detection, reconcile/stall.py): its reporting replica's log is followed (or
        will be, once its pod starts), or the push path is the only one, or the job has pushed."""
        followed = self.reports is not None and not self.reports.refused(key)
        return followed or (self.pushed is not None and (self.reports is None or pushed is not None))

    # -- work -------------------------------------------------------------------------------
    async def reconcile(self, key: JobKey) -> None:
        kind, ns, name = key
        job = self.informer_for(kind, ns).get((ns, name))
        if job is None:
            self._held.pop(key, None)
            self._quick_plans.discard(key)
            if self.reports is not None:
                self.reports.forget(key)
            if self.pushed is not None:
                self.pushed.forget(key)
            return
        logs.bind(uid=str(job["metadata"].get("uid") or ""))
        self.metrics["reconcile"] += 1
        why = self.why_not_managed(ns)
        if why is not None:
            # No plan at all: nothing of the job's template reaches a pod in this namespace.
            self.metrics["namespace_not_managed"] += 1
            if self.reports is not None:
                self.reports.sync(key, job, {}, managed=False)
            await self.executor.not_managed(job, why)
            return
        if self.per_namespace is not None and not self.per_namespace.synced(ns):
            # Its children are not listed yet: planning now would create what exists. The
            # namespace's informers queue its jobs again once they have listed.
            self.per_namespace.start(ns)
            self.metrics["waiting_for_namespace_watch"] += 1
            return
        job = await self.executor.managed(job)
        found, adopt = self.owned_children(job)
        result = await self._plan(key, job, found)
        if result.requeue_after is not None:  # a deadline, a stall's, a TTL: one timer per job
            self.queue.wake(key, result.requeue_after)
        if not adopt and self._hold(key, job, result):
            self.metrics["status_held"] += 1
            return
        self._held.pop(key, None)
        await self.executor.apply(job, result, adopted=adopt)

    async def _plan(self, key: JobKey, job: Obj, found: dict[str, dict[str, Obj]] | None = None) -> Plan:
        """Plan on the loop a job whose last plan was quick; any other (a new job, thousands of
        replicas, a huge template) in a thread, so the watches and the other workers go on."""
        args = (job, self.observed(job, found), datetime.now(timezone.utc))
        if self.reports is not None:  # the reporting replica's log followed while it runs; never waits
            self.reports.sync(key, job, args[1].pods)
        if key in self._quick_plans:
            result, took = _timed_plan(*args)
        else:
            result, took = await asyncio.to_thread(_timed_plan, *args)
        if took <= INLINE_PLAN_SECONDS:
            self._quick_plans.add(key)
        else:
            self._quick_plans.discard(key)
        return result

    def _hold(self, key: JobKey, job: Obj, result: Plan) -> bool:
        """Whether this pass leaves its status write for later (see ``detail_only``); once held,
        the write is due ``coalesce_status`` seconds later whatever else arrives meanwhile."""
        wait = self.settings.coalesce_status
        if wait <= 0 or not detail_only(job.get("status") or {}, result):
            return False
        now = asyncio.get_running_loop().time()
        due = self._held.get(key)
        if due is None:
            self._held[key] = now + wait
            self.queue.add_after(key, wait)
            return True
        return now < due - 0.01  # the timer may fire a hair early

    async def _worker(self) -> None:
        while True:
            key = cast("JobKey", await self.queue.get())  # the queue holds job keys only
            with logs.job_pass(*key):  # every line of the pass names the job and the pass (logs.py)
                try:
                    await self.reconcile(key)
                    if self.queue.failures(key) >= REPORT_AFTER_FAILURES:
                        await self._report(key, None)
                    self.queue.forget(key)
                except Conflict:
                    self.metrics["conflict"] += 1
                    self.queue.add(key)  # the watch brings the newer object; plan again from it
                except Exception as exc:
                    self.metrics["reconcile_error"] += 1
                    delay = self.queue.add_rate_limited(key)
                    log.warning("reconcile of %s failed (%s); retrying in %.1fs", key, bounded(repr(exc), 500), delay,
                                exc_info=log.isEnabledFor(logging.DEBUG))  # fmt: skip
                    if self.queue.failures(key) == REPORT_AFTER_FAILURES:
                        await self._report(key, exc)
                finally:
                    self.queue.done(key)

    async def _report(self, key: JobKey, exc: BaseException | None) -> None:
        """Say on the job that its passes keep failing (or that they work again); best effort."""
        kind, ns, name = key
        job = self.informer_for(kind, ns).get((ns, name))
        if job is None:
            return
        try:
            await self.executor.report_error(job, exc, REPORT_AFTER_FAILURES)
        except Exception as err:  # noqa: BLE001 - the API may be what fails; the retries go on regardless
            log.warning("could not report the reconcile error on %s: %s", key, bounded(repr(err), 300))

    def _all_informers(self) -> list[tuple[str, str, Informer]]:
        watched = self.per_namespace.all() if self.per_namespace is not None else []
        return [(k, ns, i) for (k, ns), i in sorted(self.informers.items())] + watched

    def synced(self) -> bool:
        return all(i.synced.is_set() for _, _, i in self._all_informers())

    def healthy(self) -> bool:
        return self.synced() and all(i.healthy for _, _, i in self._all_informers())

    def unhealthy(self) -> list[str]:
        """The watches keeping the controller from being ready, for /readyz."""
        return [f"{k}/{ns or '*'}: {'failing' if i.synced.is_set() else 'not synced'}"
                for k, ns, i in self._all_informers() if not (i.synced.is_set() and i.healthy)]  # fmt: skip

    def _requeue_all(self) -> None:
        """Every cached job again: after a failed watch or a change of leader, work may have been missed."""
        for (kind, _), informer in self.informers.items():
            if kind in RESOURCES:
                for ns, name in list(informer.cache):
                    self.queue.add((kind, ns, name))

    def _start_workers(self) -> list[asyncio.Task[None]]:
        # Silence is counted from here at the earliest: what was reported while no worker of this
        # controller listened may not have been read yet (reconcile/stall.py).
        self.listening_since = datetime.now(timezone.utc)
        return [asyncio.create_task(self._worker(), name=f"worker-{n}") for n in range(self.settings.workers)]

    async def _lead(self, elector: LeaderElector) -> None:
        """Workers run only while this replica holds the lease; losing it stops them at once."""
        while True:
            await elector.elected.wait()
            if isinstance(self.queue, TimedQueue):
                self.queue.restart_waits()
            self._requeue_all()  # the previous leader may have left anything half done
            workers = self._start_workers()
            try:
                await elector.lost.wait()
            finally:
                for t in workers:
                    t.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
                if self.reports is not None:  # the next leader follows the logs
                    await self.reports.close()
                if self.pushed is not None:  # and takes the pushes, starting from the statuses
                    self.pushed.clear()

    async def run(self, ready: asyncio.Event | None = None, elector: LeaderElector | None = None) -> None:
        self._elector = elector
        tasks = [asyncio.create_task(i.run(), name=f"informer-{k}") for k, i in self.informers.items()]
        try:
            # Children first, so the first pass over each job sees the pods it already has.
            await asyncio.gather(*(i.synced.wait() for i in self.informers.values()))
            if self.per_namespace is not None:  # started by the Namespace informer's list
                await self.per_namespace.wait_synced()
            log.info("caches synced: %d jobs", sum(len(i.cache) for (k, _), i in self.informers.items() if k in RESOURCES))
            if elector is None:
                tasks += self._start_workers()
            else:
                # Campaign only with warm caches: a replica that cannot sync must not hold the lease.
                tasks += [asyncio.create_task(elector.run(), name="leader-election"),
                          asyncio.create_task(self._lead(elector), name="leader-workers")]  # fmt: skip
            if ready is not None:
                ready.set()
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.per_namespace is not None:
                await self.per_namespace.close()
            if self.reports is not None:
                await self.reports.close()
            if elector is not None:
                await elector.release()  # workers are stopped: the standby may start now
