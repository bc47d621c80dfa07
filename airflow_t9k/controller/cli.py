"""``airflow-t9k controller``: run the bundled controller."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import signal
import socket
import sys
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from airflow_t9k.api.resources import RESOURCES, TEMPLATE_RESOURCES, resource_for
from airflow_t9k.controller.features import detect_dra, detect_gang, detect_in_place
from airflow_t9k.controller.leader import LeaderElector
from airflow_t9k.controller.logs import FORMATS as LOG_FORMATS
from airflow_t9k.controller.logs import configure as configure_logging
from airflow_t9k.controller.metrics import InstrumentedKube, Metrics
from airflow_t9k.controller.nodewatch import may_watch_nodes
from airflow_t9k.controller.push_setup import (
    BadFlags,
    add_push_arguments,
    follow_certificates,
    keep_certificates,
    push_setup,
    tls_origin,
)
from airflow_t9k.controller.reconcile.nodes import NodeRule, parse_rule
from airflow_t9k.controller.reconcile.priority import PriorityBand, describe_map, parse_map
from airflow_t9k.controller.runner import Controller, Settings
from airflow_t9k.controller.scope import Scope, SelectorError, parse_selector
from airflow_t9k.controller.serve import serve_all
from airflow_t9k.controller.slim import plain_json_bodies
from airflow_t9k.k8s.client import DEEP_NESTING, ApiClientTransport, Kube, load_transport
from airflow_t9k.k8s.errors import ApiError, Forbidden, NotFound
from airflow_t9k.k8s.kubeconfig import Endpoint, KubeconfigError
from airflow_t9k.k8s.multiplexed import MultiplexedLines
from airflow_t9k.kinds.base import LABEL_MANAGED_BY, LABEL_PART_OF, MANAGED_BY
from airflow_t9k.kinds.registry import KINDS

log = logging.getLogger("airflow_t9k.controller")
NAMESPACE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class RefuseToStart(Exception):
    """Starting would fight another controller, or could not work at all."""


def add_controller_parser(sub: Any) -> None:
    p = sub.add_parser("controller", help="run the bundled T9k job controller")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("-n", "--namespace", action="append", dest="namespaces", default=[],
                   help="namespace to watch; repeat for several; default: all namespaces")  # fmt: skip
    p.add_argument(
        "--namespace-selector",
        metavar="SELECTOR",
        help="label selector on Namespaces (e.g. 'airflow-t9k.io/jobs=enabled'): reconcile jobs only in "
        "namespaces it matches (needs list/watch on namespaces). kube-system, kube-public, "
        "kube-node-lease and the controller's own namespace are never reconciled, selector or not",
    )
    p.add_argument("--exclude-namespace", action="append", dest="exclude_namespaces", default=[], metavar="NAME",
                   help="never reconcile jobs in this namespace (repeat for several), besides kube-system, kube-public, "
                        "kube-node-lease and the controller's own: e.g. Airflow's namespace, whose Secrets a job's pod "
                        "could mount. Jobs there get NamespaceNotManaged")  # fmt: skip
    p.add_argument("--workers", type=int, default=Settings.workers,
                   help="jobs reconciled concurrently (default %(default)s; each is an asyncio task, not a thread)")  # fmt: skip
    p.add_argument(
        "--coalesce-status",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="a status change that keeps the job's phase and has nothing to do (replica detail, counts) "
        "waits up to this long so that several land in one write; 0 writes each at once (default 1)",
    )
    p.add_argument(
        "--progress-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="live progress (docs/progress.md): follow each running job's reporting replica log for "
        "T9K_PROGRESS lines and write new values to status.progress at most once per SECONDS per job "
        "(default 10); 0 follows no log",
    )
    p.add_argument(
        "--progress-streams",
        type=int,
        default=200,
        metavar="N",
        help="replica logs followed at once for progress (default 200); 0 follows none "
        "(progress only by the push path, --progress-endpoint)",
    )
    p.add_argument(
        "--progress-http2",
        choices=("auto", "off"),
        default="auto",
        help="auto (default): the followed logs share a few HTTP/2 connections (up to the API server's stream limit, "
        "100 by default, on each) where the API server agrees to HTTP/2; off: each on an HTTP/1.1 connection of its own",
    )
    add_push_arguments(p)
    p.add_argument("--health-port", type=int, default=8081,
                   help="port for /healthz (alive) and /readyz (caches synced); 0 disables")  # fmt: skip
    p.add_argument("--health-address", default="0.0.0.0", help="address for the health endpoint")
    p.add_argument("--metrics-port", type=int, default=8080, help="port for Prometheus /metrics; 0 disables")
    p.add_argument("--metrics-address", default="127.0.0.1",
                   help="address for /metrics (default 127.0.0.1: it names namespaces and jobs and answers anyone who "
                        "reaches it; scrape through a proxy that checks a token, or open it behind a NetworkPolicy). "
                        "The same address and port as the health endpoint share one listener")  # fmt: skip
    p.add_argument("--metrics-secure", action="store_true",
                   help="serve /metrics over HTTPS to callers with a bearer token the API server accepts (TokenReview) "
                        "and allows to get the non-resource URL /metrics (SubjectAccessReview), as controller-runtime's "
                        "secure metrics server does; the Helm chart turns it on. Needs RBAC to create tokenreviews and "
                        "subjectaccessreviews")  # fmt: skip
    p.add_argument(
        "--metrics-tls-cert",
        metavar="FILE",
        help="with --metrics-secure: the serving certificate (PEM); default a self-signed one made at start",
    )
    p.add_argument("--metrics-tls-key", metavar="FILE", help="its private key (PEM)")
    le = p.add_argument_group("leader election (for more than one replica)")
    le.add_argument("--leader-elect", action="store_true",
                    help="act only while holding a coordination.k8s.io Lease (the Deployment turns this on); "
                         "off by default, for one controller run by hand")  # fmt: skip
    le.add_argument(
        "--leader-election-namespace", help="namespace of the Lease (default: $POD_NAMESPACE, then the pod's own namespace)"
    )
    le.add_argument("--leader-election-id", default="airflow-t9k-controller", help="name of the Lease")
    le.add_argument(
        "--leader-elect-lease-duration",
        type=float,
        default=10.0,
        help="seconds a standby waits after the leader's last renewal before taking over (default 10)",
    )
    le.add_argument(
        "--leader-elect-renew-deadline",
        type=float,
        default=7.0,
        help="seconds the leader keeps acting without a successful renewal (default 7)",
    )
    le.add_argument(
        "--leader-elect-retry-period",
        type=float,
        default=1.5,
        help="seconds between renewals and between a standby's attempts (default 1.5)",
    )
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument(
        "--log-format",
        default="text",
        choices=LOG_FORMATS,
        help="text (default): a line for a terminal; json: one JSON object a line with ts, level, logger, msg and, "
        "during a job's pass, kind, namespace, job, uid and reconcileID (docs/operations.md)",
    )
    p.add_argument("--event-loop", choices=["auto", "asyncio", "uvloop"], default="auto",
                   help="asyncio event loop: auto (default) runs on uvloop where it is installed, else on "
                        "asyncio's own; uvloop requires it")  # fmt: skip
    p.add_argument("--kind", action="append", dest="kinds", default=[], choices=sorted(RESOURCES),
                   help="job kind to watch; repeat for several; default: every kind (e.g. leave AscendJob to "
                        "MindCluster's ascend-operator where it runs)")  # fmt: skip
    p.add_argument(
        "--template-wait",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long from its creation a job waits for a job template it names and that does not exist "
        "(it may be applied after the job), before it fails with TemplateNotFound (default 30)",
    )
    p.add_argument("--allow-beam-external-service", action="store_true",
                   help="let a BeamJob's jobManager.accessScope NodePort, VPC or External make a NodePort or "
                        "LoadBalancer Service: it opens Flink's unauthenticated REST API outside the cluster. Off by "
                        "default: such a job fails (docs/kinds.md)")  # fmt: skip
    p.add_argument("--force", action="store_true", help="start even where another controller seems to own the CRDs")
    p.add_argument("--queueing", choices=["auto", "kueue", "off"], default="auto",
                   help="admission of jobs that name a queue through Kueue's Workload API (docs/queueing.md): auto "
                        "(default) uses it where the cluster serves it and the queue names a LocalQueue of the job's "
                        "namespace; kueue requires it for every named queue; off never uses it")  # fmt: skip
    p.add_argument("--in-place-restarts", choices=["auto", "on", "off"], default="auto",
                   help="restart replicas in place where the job's spec.restartStrategy allows it (docs/disruptions.md): "
                        "auto (default) where the API server keeps RestartAllContainers rules and every node declares "
                        "the feature; on: wherever the API server keeps them (such pods then go only to nodes that "
                        "declare it); off: always recreate them")  # fmt: skip
    p.add_argument("--restart-agent-image", default=None,
                   help="image of the in-place restart gate and agent containers (they run sh); default: each "
                        "replica's main container's image")  # fmt: skip
    p.add_argument("--gang-scheduling", choices=["auto", "off"], default="auto",
                   help="a PodGroup (scheduling.k8s.io/v1alpha2, all-or-nothing placement) for every multi-pod job "
                        "that Kueue and Volcano do not admit, where the API server serves it (docs/queueing.md)")  # fmt: skip
    p.add_argument("--priority-class-map", action="append", default=[], type=priority_map, metavar="LOW-HIGH=NAME,...",
                   help="give the pods of a job with spec.scheduler.t9kScheduler the PriorityClass its priority maps to, "
                        "so kube-scheduler orders and preempts by it without Kueue (docs/queueing.md): e.g. "
                        "'0-49=batch-low,50-100=batch-high', or '0-100=airflow-t9k-priority-{priority}' for one class a "
                        "value; a pod template's own priorityClassName wins. Default: none (the priority is only a pod "
                        "annotation). Needs get, list, watch on priorityclasses")  # fmt: skip
    p.add_argument("--avoid-bad-nodes", choices=["on", "off"], default="on",
                   help="a job's later pods avoid a node where two of its retried failures happened, or where a "
                        "replica was while the node was not Ready, cordoned or unhealthy by --unhealthy-node-condition; "
                        "a failure there spends no restart (docs/disruptions.md). Needs list and watch on nodes; "
                        "without them the controller warns and goes on with it off")  # fmt: skip
    p.add_argument("--unhealthy-node-condition", action="append", default=[], type=node_rule, metavar="RULE",
                   help="what else makes a node unhealthy for --avoid-bad-nodes: a condition 'TYPE=STATUS' (e.g. "
                        "'GPUHealthy=False'), a taint 'taint:KEY' or 'taint:KEY=VALUE', or a label 'label:KEY=VALUE' "
                        "(e.g. a GPU operator's health label); repeat for more")  # fmt: skip
    p.set_defaults(func=run_controller)


def node_rule(text: str) -> NodeRule:
    """One ``--unhealthy-node-condition``; argparse reports a bad one as a usage error."""
    try:
        return parse_rule(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def priority_map(text: str) -> tuple[PriorityBand, ...]:
    """One ``--priority-class-map`` as bands; argparse reports a bad one as a usage error."""
    try:
        return parse_map(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def priority_bands(given: list[tuple[PriorityBand, ...]]) -> tuple[PriorityBand, ...]:
    """Every ``--priority-class-map`` given, as one map (checked again: two flags may overlap)."""
    return parse_map(describe_map(tuple(b for bands in given for b in bands)))


def crd_is_ours(labels: dict[str, str]) -> bool:
    """`airflow-t9k crds` labels its CRDs managed-by=airflow-t9k, the Helm chart managed-by=Helm
    (so that a later install adopts what an uninstall kept); both say part-of=airflow-t9k.
    managed-by alone marks CRDs applied before part-of was added."""
    return MANAGED_BY in (labels.get(LABEL_MANAGED_BY), labels.get(LABEL_PART_OF))


async def check_crds(kube: Kube, force: bool, kinds: list[str]) -> None:
    """Refuse to run where the T9k platform's own CRDs (and so its controllers) are installed,
    or where ours (the job templates' too) are not."""
    for kind in [*kinds, *TEMPLATE_RESOURCES]:
        name = (TEMPLATE_RESOURCES.get(kind) or resource_for(kind)).crd_name
        try:
            crd = await kube.get_metadata(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        except NotFound:
            raise RefuseToStart(
                f"CRD {name} is not installed; install it first: airflow-t9k crds | kubectl apply --server-side -f -"
            ) from None
        except Forbidden:
            log.warning("cannot read CRD %s (RBAC); skipping the check for the T9k platform", name)
            continue
        labels = (crd.get("metadata") or {}).get("labels") or {}
        owner = labels.get(LABEL_MANAGED_BY)
        if not crd_is_ours(labels) and not force:
            raise RefuseToStart(
                f"CRD {name} was not installed by airflow-t9k (managed-by={owner!r}): the T9k platform's own "
                "controllers seem to manage these kinds here, and two controllers would fight over the same "
                "pods. Use the platform's controllers, or pass --force if you are sure."
            )


async def detect_queueing(kube: Kube, mode: str) -> str:
    """Resolve --queueing against the cluster: kueue | auto | absent | off (runner.Settings.queueing)."""
    if mode == "off":
        return "off"
    try:
        doc = await kube.get("/apis/kueue.x-k8s.io/v1beta2")
        served = any(r.get("name") == "workloads" for r in doc.get("resources") or [])
    except NotFound:
        served = False
    if not served:
        if mode == "kueue":
            raise RefuseToStart("--queueing=kueue, but the cluster does not serve kueue.x-k8s.io/v1beta2 Workloads: "
                                "install Kueue, or run with --queueing=auto")  # fmt: skip
        return "absent"
    return mode


async def detect_volcano(kube: Kube) -> bool:
    """Does the cluster serve Volcano's PodGroups (scheduling.volcano.sh/v1beta1)? AscendJob gang
    scheduling uses them where it does, as MindCluster's operator does (docs/kinds.md)."""
    try:
        doc = await kube.get("/apis/scheduling.volcano.sh/v1beta1")
    except NotFound:
        return False
    return any(r.get("name") == "podgroups" for r in doc.get("resources") or [])


def own_namespace() -> str | None:
    """The namespace the controller's pod runs in (None when run by hand): never reconciled, so
    a job there cannot borrow the controller's service account or sit next to its Secrets."""
    ns = os.environ.get("POD_NAMESPACE")
    if not ns and SA_NAMESPACE.is_file():
        ns = SA_NAMESPACE.read_text().strip()
    return ns or None


def make_scope(args: argparse.Namespace) -> Scope:
    try:
        selector = parse_selector(args.namespace_selector) if args.namespace_selector else None
    except SelectorError as exc:
        raise RefuseToStart(f"--namespace-selector: {exc}") from None
    bad = [n for n in args.exclude_namespaces if not NAMESPACE_NAME.match(n)]
    if bad:
        raise RefuseToStart(f"--exclude-namespace: {', '.join(map(repr, bad))} is not a namespace name")
    return Scope(own=own_namespace(), selector=selector, exclude=frozenset(args.exclude_namespaces))


def lease_namespace(args: argparse.Namespace) -> str:
    ns = args.leader_election_namespace or os.environ.get("POD_NAMESPACE")
    if not ns and SA_NAMESPACE.is_file():
        ns = SA_NAMESPACE.read_text().strip()
    if not ns:
        raise RefuseToStart("--leader-elect needs --leader-election-namespace when not running in a pod")
    return ns


def log_pool_size(progress_interval: float, progress_streams: int) -> int | None:
    """Connections of the log streams' own pool, or None when no log is followed (and no pool is made).

    A connection for every stream and a few for the push path's TokenReviews: with the pool's
    default 100, a stream past the 100th waited for a free connection (up to its 10-minute
    timeout) and read nothing meanwhile."""
    if progress_interval <= 0 or progress_streams <= 0:
        return None
    return progress_streams + 20


def multiplexed(log_kube: InstrumentedKube, instruments: Metrics) -> MultiplexedLines | None:
    """The followed logs over HTTP/2 (k8s/multiplexed.py), ``log_kube`` serving them where the
    API server does not agree to it; None for a transport that is not our own (a kubeconfig only
    kubernetes_asyncio's loader reads: a proxy, an exec plugin), which keeps HTTP/1.1."""
    endpoint = getattr(log_kube.transport, "endpoint", None)
    if not isinstance(endpoint, Endpoint):
        return None
    requests = instruments.requests
    return MultiplexedLines(endpoint, log_kube, on_response=lambda status: requests.labels(status, "GET", log_kube.host).inc())


def make_elector(args: argparse.Namespace, kube: Kube, instruments: Metrics) -> LeaderElector | None:
    if not args.leader_elect:
        return None
    gauge = instruments.leader.labels(args.leader_election_id)
    gauge.set(0)
    try:
        return LeaderElector(
            kube, lease_namespace(args), args.leader_election_id, f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}",
            lease_duration=args.leader_elect_lease_duration, renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period, on_change=lambda leading: gauge.set(int(leading)),
        )  # fmt: skip
    except ValueError as exc:
        raise RefuseToStart(str(exc)) from None


def metrics_security(args: argparse.Namespace, kube: Any) -> tuple[Any, Any]:
    """(TLS context, guard) for --metrics-secure: the given certificate, or a self-signed one for
    this host (a scraper verifies it by its own CA, or skips verification, as it does for Kueue)."""
    import socket

    from airflow_t9k.controller.metrics_auth import MetricsGuard
    from airflow_t9k.controller.tls import from_files, self_signed

    if bool(args.metrics_tls_cert) != bool(args.metrics_tls_key):
        raise RefuseToStart("--metrics-tls-cert and --metrics-tls-key go together")
    tls = from_files(args.metrics_tls_cert, args.metrics_tls_key, None) if args.metrics_tls_cert else \
        self_signed([socket.gethostname(), "localhost", "127.0.0.1"])  # fmt: skip
    return tls.context, MetricsGuard(kube)


async def main_async(args: argparse.Namespace) -> int:
    try:
        # No bound on the pool: its long-lived watches (one per job kind and child kind in each
        # namespace in scope) alone can pass any fixed number, and a request past the bound
        # waits for a connection to free. Writes are bounded by the workers (apply.py).
        transport = await load_transport(args.kubeconfig, args.context, connections=0)
    except KubeconfigError as exc:
        log.error("%s", exc)
        return 2
    if isinstance(transport, ApiClientTransport):
        plain_json_bodies(transport.api)
    instruments = Metrics()
    kube = InstrumentedKube(transport, instruments)
    kinds = sorted(set(args.kinds or RESOURCES))
    servers: list[Any] = []
    log_kube: Kube | None = None
    log_lines: MultiplexedLines | None = None
    try:
        try:
            await check_crds(kube, args.force, kinds)
            queueing = await detect_queueing(kube, args.queueing)
            volcano = await detect_volcano(kube)
            in_place = (
                "off (--in-place-restarts=off)"
                if args.in_place_restarts == "off"
                else await detect_in_place(kube, (args.namespaces or ["default"])[0], args.in_place_restarts == "auto")
            )
            gang = "off (--gang-scheduling=off)" if args.gang_scheduling == "off" else await detect_gang(kube)
            nodes_off = "off (--avoid-bad-nodes=off)" if args.avoid_bad_nodes == "off" else await may_watch_nodes(kube)
            dra = await detect_dra(kube)
            if nodes_off is not None and args.avoid_bad_nodes == "on":
                log.warning("bad nodes are not avoided: %s", nodes_off)
        except RefuseToStart as exc:
            log.error("%s", exc)
            return 3
        except ApiError as exc:
            log.error("cannot reach the API server: %s", exc)
            return 4
        try:
            elector = make_elector(args, InstrumentedKube(transport, instruments), instruments)
            scope = make_scope(args)
            push = push_setup(args)
            bands = priority_bands(args.priority_class_map)
        except (RefuseToStart, BadFlags, ValueError) as exc:
            log.error("%s", exc)
            return 2
        keeper = None
        if push is not None and args.progress_tls_secret:
            from airflow_t9k.controller.cert_secret import CertsUnavailable

            try:  # not fenced by the lease: every replica keeps its certificate
                push, keeper = await keep_certificates(args, InstrumentedKube(transport, instruments), push)
            except CertsUnavailable as exc:
                log.error("progress endpoint: %s", exc)
                return 3
        if elector is not None:
            kube.fence = elector.valid  # every write of the controller checks its lease first
        settings = Settings(
            namespaces=args.namespaces,
            workers=args.workers,
            kinds=kinds,
            queueing=queueing,
            coalesce_status=args.coalesce_status,
            volcano=volcano,
            in_place_problem=in_place,
            restart_agent_image=args.restart_agent_image,
            gang_problem=gang,
            scope=scope,
            template_wait=args.template_wait,
            progress_interval=max(args.progress_interval, 0.0),
            progress_streams=args.progress_streams,
            beam_external_service=args.allow_beam_external_service,
            priority_map=bands,
            avoid_bad_nodes=nodes_off is None,
            dra_problem=dra,
            node_rules=tuple(args.unhealthy_node_condition),
            progress_push=push[0] if push else None,
            push_rate=args.progress_push_rate,
            push_burst=args.progress_push_burst,
        )
        pool = log_pool_size(settings.progress_interval, settings.progress_streams)
        if pool is not None:  # log streams on their own pool (reports.py)
            log_kube = InstrumentedKube(await load_transport(args.kubeconfig, args.context, connections=pool), instruments)
            log_lines = multiplexed(log_kube, instruments) if args.progress_http2 == "auto" else None
        controller = Controller(kube, settings, instruments, log_kube=log_kube, log_lines=log_lines)
        secure = metrics_security(args, kube) if args.metrics_secure else None
        servers.extend(await serve_all(controller, (args.health_address, args.health_port),
                                       (args.metrics_address, args.metrics_port), secure=secure))  # fmt: skip
        certs = None
        if push is not None:
            # Only here: aiohttp's web server (about 2 MB) is loaded by a controller that pushes.
            from airflow_t9k.controller.push_server import ProgressEndpoint, serve_push

            endpoint = ProgressEndpoint(controller, log_kube or kube, kinds=kinds, audience=args.progress_audience,
                                        check_source=args.progress_check_source_ip == "on")  # fmt: skip
            servers.append(await serve_push(endpoint, args.progress_address, args.progress_port, push[1].context,
                                            max_connections=args.progress_max_connections,
                                            max_per_source=args.progress_max_connections_per_source))  # fmt: skip
            certs = asyncio.create_task(follow_certificates(controller, push[1], keeper)) if push[1].files or keeper else None
            log.info("progress endpoint %s: listening on %s:%d, TLS %s, token audience %s", push[0].endpoint,
                     args.progress_address, args.progress_port, tls_origin(push[1], keeper), args.progress_audience)  # fmt: skip
        task = asyncio.create_task(controller.run(elector=elector))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        where = ", ".join(args.namespaces) or "all namespaces"
        overlap = sorted(set(args.namespaces) & set(scope.excluded()))
        if overlap:
            log.warning("-n %s: never reconciled (excluded); its jobs get %s", ", ".join(overlap), "NamespaceNotManaged")
        log.info("in-place restarts: %s; gang scheduling without add-ons: %s; DRA devices counted: %s",
                 in_place or "available", gang or "available", dra or "yes")  # fmt: skip
        log.info("controller started: reconciling %s in %s (never %s; selector %s), %d workers, queueing %s",
                 ", ".join(k for k in kinds if k in KINDS), where, ", ".join(scope.excluded()),
                 scope.selector.text if scope.selector else "none", args.workers, queueing)  # fmt: skip
        if elector is not None:
            log.info("leader election on: lease %s/%s, identity %s", elector.namespace, elector.name, elector.identity)
        try:
            await task
        except asyncio.CancelledError:
            log.info("controller stopped")
        finally:
            if certs is not None:
                certs.cancel()
        return 0
    finally:
        for server in servers:
            await server.cleanup()
        if log_lines is not None:
            await log_lines.close()
        if log_kube is not None:
            await log_kube.close()
        await kube.close()


def run_controller(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, getattr(args, "log_format", "text"))
    # Jobs may hold values nested as deep as the API server stores them (10,000 levels) in the
    # fields the CRDs leave open; every pass serializes the job for its status write.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), DEEP_NESTING))
    try:
        run = loop_runner(getattr(args, "event_loop", "auto"))
    except RefuseToStart as exc:
        log.error("%s", exc)
        return 2
    try:
        return run(main_async(args))
    except Exception:
        # Through the log, so that with --log-format=json the crash is one JSON line too.
        log.critical("controller crashed", exc_info=True)
        return 1


def loop_runner(choice: str) -> Callable[[Coroutine[Any, Any, int]], int]:
    """``asyncio.run``, or ``uvloop.run`` (libuv's loop: less CPU per request and per event)."""
    if choice == "asyncio":
        return asyncio.run
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise RefuseToStart("--event-loop=uvloop, but uvloop is not installed: pip install uvloop") from None
        return asyncio.run
    log.debug("event loop: uvloop %s", uvloop.__version__)  # type: ignore[attr-defined]  # uvloop re-exports it implicitly
    return uvloop.run
