"""The controller's flags for the push path, and what they set up (docs/progress.md, "The push path")."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow_t9k.controller.push_listener import MAX_CONNECTIONS, MAX_PER_SOURCE
from airflow_t9k.controller.reconcile.push import AUDIENCE, PushTarget
from airflow_t9k.controller.tls import CHECK_EVERY, ServingTLS, from_files, reload, self_signed

if TYPE_CHECKING:
    import argparse

    from airflow_t9k.controller.runner import Controller


class BadFlags(Exception):
    """The push path's flags do not go together; the message says why."""


def add_push_arguments(p: Any) -> None:
    g = p.add_argument_group('progress pushed by replicas (docs/progress.md, "The push path")')
    g.add_argument("--progress-endpoint", metavar="URL",
                   help="turn on the push path: serve an HTTPS endpoint where replicas POST their progress (Kubeflow "
                        "Trainer's body or ours, authenticated by a projected token and a TokenReview), and give every "
                        "replica created from now on its URL, CA and token. URL is how pods reach this listener, e.g. "
                        "https://airflow-t9k-controller.airflow-t9k-system.svc:8443 or, for a controller on the local "
                        "cluster's host, https://10.88.0.1:8443. Off by default; the T9K_PROGRESS log lines work "
                        "either way")  # fmt: skip
    g.add_argument("--progress-address", default="0.0.0.0", help="address the endpoint listens on (default 0.0.0.0)")
    g.add_argument("--progress-port", type=int, default=8443, help="port the endpoint listens on (default 8443)")
    g.add_argument("--progress-tls-cert", metavar="FILE",
                   help="the endpoint's serving certificate (PEM); read again when it changes")  # fmt: skip
    g.add_argument("--progress-tls-key", metavar="FILE", help="its private key (PEM)")
    g.add_argument("--progress-tls-ca", metavar="FILE",
                   help="the CA bundle replicas verify the endpoint with (default: the certificate). Without "
                        "--progress-tls-cert/--progress-tls-key, a CA and certificate for the URL's host are made at "
                        "start and kept in memory: for one controller run by hand, not a deployment")  # fmt: skip
    g.add_argument(
        "--progress-audience",
        default=AUDIENCE,
        help=f"audience of the replicas' projected tokens, checked by TokenReview (default {AUDIENCE})",
    )
    g.add_argument(
        "--progress-push-rate",
        type=float,
        default=1.0,
        metavar="PER_SECOND",
        help="reports a second one job's replicas may push, on average (default 1); more get 429",
    )
    g.add_argument(
        "--progress-push-burst",
        type=float,
        default=10.0,
        metavar="N",
        help="reports one job's replicas may push at once (default 10)",
    )
    g.add_argument(
        "--progress-check-source-ip",
        choices=("on", "off"),
        default="on",
        help="on (default): a report must come from an address of the pod its token names (the cached pod's "
        "status.podIPs), checked before the TokenReview; off where a proxy, a service mesh's sidecar or NAT between "
        "the pods and the controller hides the pod's address",
    )

    g.add_argument(
        "--progress-max-connections",
        type=int,
        default=MAX_CONNECTIONS,
        metavar="N",
        help=f"connections the endpoint keeps open at once, TLS handshakes included (default {MAX_CONNECTIONS}); "
        "more are closed as they arrive. Each costs about 70 KB (measured): this bounds what a flood can take from the "
        "reconciler's memory",
    )
    g.add_argument(
        "--progress-max-connections-per-source",
        type=int,
        default=MAX_PER_SOURCE,
        metavar="N",
        help=f"of those, from one address (default {MAX_PER_SOURCE}; a pod has one, a node's SNAT puts its pods behind one)",
    )


def push_setup(args: argparse.Namespace) -> tuple[PushTarget, ServingTLS] | None:
    """The push path's target and TLS from the flags; None when it is off. BadFlags on a wrong flag."""
    url = args.progress_endpoint
    if not url:
        if args.progress_tls_cert or args.progress_tls_key:
            raise BadFlags("--progress-tls-cert/--progress-tls-key need --progress-endpoint")
        return None
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise BadFlags(f"--progress-endpoint must be an https:// URL with a host, got {url!r}")
    if args.progress_interval <= 0:
        raise BadFlags("--progress-endpoint needs --progress-interval > 0: it bounds how often pushed values are written")
    if args.progress_push_rate <= 0 or args.progress_push_burst < 1:
        raise BadFlags("--progress-push-rate must be > 0 and --progress-push-burst >= 1")
    if args.progress_max_connections < 1 or args.progress_max_connections_per_source < 1:
        raise BadFlags("--progress-max-connections and --progress-max-connections-per-source must be at least 1")
    if bool(args.progress_tls_cert) != bool(args.progress_tls_key):
        raise BadFlags("--progress-tls-cert and --progress-tls-key go together")
    try:
        if args.progress_tls_cert:
            tls = from_files(args.progress_tls_cert, args.progress_tls_key, args.progress_tls_ca)
        else:
            if args.progress_tls_ca:
                raise BadFlags("--progress-tls-ca needs --progress-tls-cert and --progress-tls-key")
            tls = self_signed([parts.hostname])
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise BadFlags(f"progress endpoint TLS: {exc}") from None
    return PushTarget(url.rstrip("/"), tls.ca_pem, args.progress_audience), tls


async def follow_certificates(controller: Controller, tls: ServingTLS) -> None:
    """Files that change are served at once; pods created after that get the new CA."""
    while True:
        await asyncio.sleep(CHECK_EVERY)
        target = controller.settings.progress_push
        if reload(tls) and target is not None:
            controller.settings.progress_push = replace(target, ca_pem=tls.ca_pem)
