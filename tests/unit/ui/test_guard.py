"""Cross-site requests to the UI's actions are refused; the bundle's own requests are not."""

from __future__ import annotations

import pytest

from airflow_t9k.ui.guard import refusal

JSON = {"content-type": "application/json"}
HOST = "airflow.example.com"

CASES = [
    # (name, method, headers, host, refused?)
    ("the bundle's POST", "POST", {**JSON, "origin": f"https://{HOST}", "sec-fetch-site": "same-origin"}, HOST, False),
    ("a script with the custom header", "POST", {"x-t9k-request": "1"}, HOST, False),
    ("JSON with a charset", "POST", {"content-type": "application/json; charset=utf-8"}, HOST, False),
    ("a GET is never refused", "GET", {"sec-fetch-site": "cross-site"}, HOST, False),
    ("behind a TLS proxy (no port in Host)", "POST", {**JSON, "origin": f"https://{HOST}"}, HOST, False),
    ("same host, explicit port", "POST", {**JSON, "origin": "http://127.0.0.1:8080"}, "127.0.0.1:8080", False),
    # Attacks: a plain HTML form on a sibling site, with the victim's cookie.
    ("a form POST (urlencoded)", "POST", {"content-type": "application/x-www-form-urlencoded"}, HOST, True),
    ("a form POST (multipart)", "POST", {"content-type": "multipart/form-data; boundary=x"}, HOST, True),
    ("a text/plain form faking JSON", "POST", {"content-type": "text/plain"}, HOST, True),
    ("no body, no header", "POST", {}, HOST, True),
    ("a sibling site, marked by the browser", "POST", {**JSON, "sec-fetch-site": "same-site"}, HOST, True),
    ("a cross-site fetch", "DELETE", {**JSON, "sec-fetch-site": "cross-site"}, HOST, True),
    ("another origin", "POST", {**JSON, "origin": "https://evil.example.com"}, HOST, True),
    ("a sibling origin", "POST", {**JSON, "origin": f"https://x.{HOST}"}, HOST, True),
    ("an opaque origin (sandboxed iframe)", "POST", {**JSON, "origin": "null"}, HOST, True),
    ("another port on the same host", "POST", {**JSON, "origin": "http://127.0.0.1:9999"}, "127.0.0.1:8080", True),
]


@pytest.mark.parametrize(("method", "headers", "host", "refused"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_cross_site_requests_are_refused(method, headers, host, refused):
    why = refusal(method, headers, "http", host)
    assert (why is not None) is refused, why


def _request(method: str, headers: dict[str, str]):
    from starlette.requests import Request

    raw = [(k.lower().encode(), v.encode()) for k, v in {"host": HOST, **headers}.items()]
    return Request({"type": "http", "method": method, "scheme": "https", "path": "/", "headers": raw,
                    "server": (HOST, 443), "query_string": b""})  # fmt: skip


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"content-type": "application/x-www-form-urlencoded", "origin": "https://evil.example.com"}, 403),
        ({"content-type": "application/json", "origin": f"https://{HOST}"}, None),
    ],
)
def test_the_api_dependency_answers_403(headers, status):
    from fastapi import HTTPException

    from airflow_t9k.ui.api import same_site

    if status is None:
        assert same_site(_request("POST", headers)) is None
        return
    with pytest.raises(HTTPException) as err:
        same_site(_request("POST", headers))
    assert err.value.status_code == status


def test_every_non_get_route_has_the_guard():
    from airflow_t9k.ui.api import app, same_site

    routes = [r for r in app.routes if getattr(r, "methods", None) and r.methods - {"GET", "HEAD"}]
    assert routes
    for route in routes:
        assert same_site in [d.call for d in route.dependant.dependencies], route.path
