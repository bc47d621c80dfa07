"""Refusing cross-site requests to the UI's actions (pure; the API calls it per request).

Airflow's api-server accepts its session cookie, so without a check a plain HTML form on a
sibling site (``<form method=post action=https://airflow/t9k/.../delete>``) would delete a job
with the visitor's rights. Browsers let such a form send only "simple" requests: no custom
header, and a body of a form content type. Our bundle sends ``Content-Type:
application/json``, which a cross-site page can only send after a CORS preflight the api-server
does not grant. So every non-GET route requires a JSON content type (or the ``X-T9k-Request``
header, for scripts that send no body), and refuses what the browser itself marks as coming
from elsewhere: ``Sec-Fetch-Site`` other than same-origin/none, or an ``Origin`` that is not
the host the request was sent to.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
CUSTOM_HEADER = "x-t9k-request"
SAME_SITE = ("same-origin", "none")  # none: typed by the user or from a bookmark, not a page


def _default_port(scheme: str) -> int | None:
    return {"http": 80, "https": 443}.get(scheme)


def _same_origin(origin: str, scheme: str, host: str) -> bool:
    """The Origin names the host the request was sent to. Ports are compared when the Host
    header names one; otherwise a TLS-terminating proxy (https outside, http inside) would make
    every request look cross-origin. A sibling site differs in its host name either way."""
    theirs, ours = urlsplit(origin), urlsplit(f"{scheme}://{host}")
    if (theirs.hostname or "").lower() != (ours.hostname or "").lower():
        return False
    return ours.port is None or (theirs.port or _default_port(theirs.scheme)) == ours.port


def refusal(method: str, headers: Mapping[str, str], scheme: str, host: str) -> str | None:
    """Why the request must be refused (None when it may go on).

    ``headers``: lower-case names; ``scheme`` and ``host`` (``Host`` header, with any
    ``X-Forwarded-Host`` of a trusted proxy already applied): where the request was sent.
    """
    if method.upper() in SAFE_METHODS:
        return None
    site = headers.get("sec-fetch-site")
    if site is not None and site.lower() not in SAME_SITE:
        return f"cross-site request refused (Sec-Fetch-Site: {site})"
    origin = headers.get("origin")
    if origin is not None:
        parts = urlsplit(origin)
        if origin == "null" or not parts.scheme or not parts.netloc:
            return f"request from an opaque origin refused (Origin: {origin})"
        if not _same_origin(origin, scheme, host):
            return f"cross-origin request refused (Origin: {origin}, host: {host})"
    content_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type != "application/json" and CUSTOM_HEADER not in headers:
        return ("actions need a JSON body (Content-Type: application/json) or the X-T9k-Request header; "
                f"got Content-Type {content_type or 'none'}")  # fmt: skip
    return None
