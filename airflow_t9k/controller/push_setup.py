"""The controller's flags for the push path, and what they set up (docs/progress.md, "The push path")."""

from __future__ import annotations

import asyncio
import os
import ssl
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow_t9k.controller.push_listener import MAX_CONNECTIONS, MAX_PER_SOURCE
from airflow_t9k.controller.reconcile.push import AUDIENCE, PushTarget
from airflow_t9k.controller.tls import CHECK_EVERY, ServingTLS, empty, from_files, reload, self_signed

if TYPE_CHECKING:
    import argparse

    from airflow_t9k.controller.cert_secret import CertSecret
    from airflow_t9k.controller.runner import Controller
    from airflow_t9k.k8s.client import Kube

SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
# certs.CERT_DAYS and certs.CA_DAYS, written out: certs.py loads cryptography, which a controller
# without the push path never needs (tests/unit/controller/test_cert_secret.py keeps them equal).
CERT_DAYS, CA_DAYS = 90, 3650


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
    g.add_argument("--progress-tls-secret", metavar="[NAMESPACE/]NAME",
                   help="keep the endpoint's CA and certificate in this Secret (namespace: the pod's by default): every "
                        "replica makes them when it holds none, renews the certificate at 2/3 of its life and the CA "
                        "likewise (the old CA stays in the bundle pods trust), and serves what it holds; edits are "
                        "seen at once. Needs get, watch and update on it and create on Secrets (docs/progress.md, "
                        '"TLS"). Instead of --progress-tls-cert/--progress-tls-key')  # fmt: skip
    g.add_argument("--progress-tls-dns-name", action="append", default=[], metavar="NAME",
                   help="with --progress-tls-secret: a name (or address) the certificate is for; again for more "
                        "(default: the URL's host)")  # fmt: skip
    g.add_argument(
        "--progress-tls-cert-days",
        type=int,
        default=CERT_DAYS,
        metavar="DAYS",
        help=f"with --progress-tls-secret: the certificate's life (default {CERT_DAYS})",
    )
    g.add_argument(
        "--progress-tls-ca-days",
        type=int,
        default=CA_DAYS,
        metavar="DAYS",
        help=f"with --progress-tls-secret: a CA's life (default {CA_DAYS})",
    )
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
    secret = getattr(args, "progress_tls_secret", None)
    if not url:
        if args.progress_tls_cert or args.progress_tls_key or secret:
            raise BadFlags("--progress-tls-cert/--progress-tls-key/--progress-tls-secret need --progress-endpoint")
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
    if getattr(args, "progress_tls_dns_name", None) and not secret:
        raise BadFlags("--progress-tls-dns-name needs --progress-tls-secret (a certificate made at start is for the URL's host)")
    if secret:
        if args.progress_tls_cert or args.progress_tls_ca:
            raise BadFlags("--progress-tls-secret or --progress-tls-cert/--progress-tls-key/--progress-tls-ca: one of the two")
        if not 1 <= args.progress_tls_cert_days < args.progress_tls_ca_days:
            raise BadFlags("--progress-tls-cert-days must be at least 1 and less than --progress-tls-ca-days")
        secret_ref(secret)  # a name it cannot place fails now
        # Filled by keep_certificates before anything listens or any pod is made.
        return PushTarget(url.rstrip("/"), "", args.progress_audience), empty()
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


def secret_ref(value: str) -> tuple[str, str]:
    """(namespace, name) of ``[NAMESPACE/]NAME``; the namespace defaults to the pod's."""
    ns, _, name = value.rpartition("/")
    ns = ns or os.environ.get("POD_NAMESPACE") or (SA_NAMESPACE.read_text().strip() if SA_NAMESPACE.is_file() else "")
    if not ns or not name:
        raise BadFlags(f"--progress-tls-secret {value!r}: give NAMESPACE/NAME when not running in a pod")
    return ns, name


async def keep_certificates(args: argparse.Namespace, kube: Kube,
                            push: tuple[PushTarget, ServingTLS]) -> tuple[tuple[PushTarget, ServingTLS], CertSecret]:  # fmt: skip
    """--progress-tls-secret: the Secret made or read, its certificate loaded and its CA bundle in
    the target, before the listener opens and before any pod gets the CA. ``kube`` must not be
    fenced by the lease: a standby keeps its certificate too. Raises CertsUnavailable."""
    from airflow_t9k.controller.cert_secret import CertSecret

    target, tls = push
    ns, name = secret_ref(args.progress_tls_secret)
    names = list(args.progress_tls_dns_name) or [urlsplit(target.endpoint).hostname or ""]
    keeper = CertSecret(kube, ns, name, names, tls, ca_days=args.progress_tls_ca_days, cert_days=args.progress_tls_cert_days)
    await keeper.start()
    return (replace(target, ca_pem=tls.ca_pem), tls), keeper


async def follow_certificates(controller: Controller, tls: ServingTLS, keeper: CertSecret | None = None) -> None:
    """The Secret kept (``keeper``), or files read again when they change: the new certificate is
    served at once, and pods created after that get the new CA bundle."""
    if keeper is not None:
        keeper.on_bundle = lambda bundle: _new_bundle(controller, bundle)
        await keeper.run()
        return
    while True:
        await asyncio.sleep(CHECK_EVERY)
        target = controller.settings.progress_push
        if reload(tls) and target is not None:
            controller.settings.progress_push = replace(target, ca_pem=tls.ca_pem)


def tls_origin(tls: ServingTLS, keeper: CertSecret | None) -> str:
    if keeper is not None:
        return f"from {keeper.where}, kept by the controllers"
    return "from " + ", ".join(tls.files) if tls.files else "from a CA made at start (in memory)"


def _new_bundle(controller: Controller, bundle: str) -> None:
    target = controller.settings.progress_push
    if target is not None and target.ca_pem != bundle:
        controller.settings.progress_push = replace(target, ca_pem=bundle)
