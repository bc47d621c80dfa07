"""airflow_t9k/progress.py, the scripts' helper, against a real local HTTPS server: what it sends,
how often, after refusals and at exit; that it never raises; that it needs only the standard library."""

from __future__ import annotations

import ast
import json
import shutil
import ssl
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from airflow_t9k import progress
from airflow_t9k.controller.tls import self_signed

PATH = "/apis/batch.tensorstack.dev/v1beta1/namespaces/ns/genericjobs/job/progress"


class Server:
    """An HTTPS server that records each request and answers from a script of (status, headers)."""

    def __init__(self) -> None:
        tls = self_signed(["127.0.0.1"])
        self.ca_pem = tls.ca_pem
        self.requests: list[dict[str, Any]] = []
        self.answers: list[tuple[int, dict[str, str]]] = []
        self.got = threading.Condition()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the controller's listener

            def do_POST(self) -> None:  # http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with outer.got:
                    outer.requests.append({"path": self.path, "auth": self.headers["Authorization"], "body": json.loads(body)})
                    code, headers = outer.answers.pop(0) if outer.answers else (200, {})
                    outer.got.notify_all()
                data = json.dumps({"message": f"answer {code}"}).encode()
                self.send_response(code)
                for k, v in {"Content-Type": "application/json", "Content-Length": str(len(data)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
                if headers.get("Connection") == "close":
                    self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.socket = tls.context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def wait(self, n: int, timeout: float = 10) -> list[dict[str, Any]]:
        with self.got:
            self.got.wait_for(lambda: len(self.requests) >= n, timeout)
            return list(self.requests)


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    s = Server()
    (tmp_path / "ca.crt").write_text(s.ca_pem)
    (tmp_path / "token").write_text("token-1\n")
    monkeypatch.setenv("T9K_PROGRESS_URL", f"https://127.0.0.1:{s.port}{PATH}")
    monkeypatch.setenv("T9K_PROGRESS_CA_CERT", str(tmp_path / "ca.crt"))
    monkeypatch.setenv("T9K_PROGRESS_TOKEN", str(tmp_path / "token"))
    monkeypatch.setenv("T9K_PROGRESS_MIN_INTERVAL", "60")  # nothing goes by the clock: only the first, then flush
    monkeypatch.setattr(progress, "_reporter", None)
    monkeypatch.setattr(progress, "_warned", set())
    yield s
    if progress._reporter is not None:  # no thread of this test's goes on into the next
        progress._reporter.stop()
        progress._reporter.thread.join(10)
    s.httpd.shutdown()
    s.httpd.server_close()


def metrics(request: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: m["value"] for m in request["body"]["trainerStatus"]["metrics"]}


def test_the_first_report_goes_at_once_the_rest_wait_and_flush_sends_the_latest(server: Server, tmp_path: Path):
    progress.report(step=1, total_steps=200, epoch=0, loss=2.5)
    first = server.wait(1)[0]
    assert first["path"] == PATH
    assert first["auth"] == "Bearer token-1"
    assert first["body"]["trainerStatus"]["progressPercentage"] == 0
    assert metrics(first) == {"step": "1", "total_steps": "200", "epoch": "0", "loss": "2.5"}
    assert "lastUpdatedTime" in first["body"]["trainerStatus"]
    for step in range(2, 101):
        progress.report(step=step, loss=1 / step, acc=step / 200)
    progress.report(val_acc=0.5)  # only some keys: the others keep theirs
    (tmp_path / "token").write_text("token-2\n")  # the kubelet renewed it
    assert progress.flush(5) is True
    requests = server.wait(2)
    assert len(requests) == 2
    last = requests[1]
    assert last["auth"] == "Bearer token-2"
    assert last["body"]["trainerStatus"]["progressPercentage"] == 50
    assert metrics(last) == {"step": "100", "total_steps": "200", "epoch": "0", "loss": "0.01", "acc": "0.5", "val_acc": "0.5"}
    assert progress.flush(1) is True
    assert len(server.requests) == 2  # nothing new: nothing sent


def test_a_refusal_with_retry_after_is_sent_again_and_a_closed_connection_is_opened_again(server: Server):
    server.answers = [(429, {"Retry-After": "1"}), (503, {"Retry-After": "1", "Connection": "close"})]
    progress.report(step=3)
    assert progress.flush(10) is True
    requests = server.wait(3)
    assert [metrics(r) for r in requests] == [{"step": "3"}] * 3


def test_values_that_will_never_be_taken_are_given_up_with_one_warning(server: Server):
    server.answers = [(422, {}), (422, {})]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        progress.report(step=1)
        server.wait(1)
        assert progress.flush(5) is True  # given up: nothing left to send
        progress.report(step=2)
        assert progress.flush(5) is True
    assert len(server.requests) == 2
    assert [str(w.message) for w in caught] == ["airflow_t9k.progress: the controller refused the report (422): answer 422"]


def test_values_that_are_not_finite_numbers_are_left_out_with_a_warning_and_never_raise(server: Server):
    class Scalar:  # a numpy or torch scalar: float() takes it
        def __float__(self) -> float:
            return 0.25

    with pytest.warns(RuntimeWarning, match="is not a finite number"):
        progress.report(step=5, loss=Scalar(), acc=float("nan"), name="resnet", grad=[1, 2])
    assert progress.flush(5) is True
    assert metrics(server.wait(1)[0]) == {"step": "5", "loss": "0.25"}


def test_without_an_endpoint_it_does_nothing_and_warns_once(monkeypatch: pytest.MonkeyPatch):
    for name in (*progress.URL_ENV, *progress.CA_ENV, *progress.TOKEN_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(progress, "_reporter", None)
    monkeypatch.setattr(progress, "_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        for step in range(5):
            progress.report(step=step, loss=0.1)
    assert len(caught) == 1
    assert "no progress endpoint in the environment" in str(caught[0].message)
    assert progress._reporter is None
    assert progress.flush() is True


def test_without_the_env_the_mounted_files_are_read(server: Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A rank started over SSH (MPI, pdsh) has not the container's env, but the pod's volume."""
    import os

    (tmp_path / "url").write_text(os.environ["T9K_PROGRESS_URL"] + "\n")
    for name in (*progress.URL_ENV, *progress.CA_ENV, *progress.TOKEN_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("T9K_PROGRESS_DIR", str(tmp_path))  # the mount, here a test directory
    progress.report(step=9)
    request = server.wait(1)[0]
    assert metrics(request) == {"step": "9"}
    assert request["auth"] == "Bearer token-1"


def test_kubeflow_trainers_names_are_read_too(server: Server, monkeypatch: pytest.MonkeyPatch):
    for ours, theirs in zip((*progress.URL_ENV[:1], *progress.CA_ENV[:1], *progress.TOKEN_ENV[:1]),
                            (*progress.URL_ENV[1:], *progress.CA_ENV[1:], *progress.TOKEN_ENV[1:]), strict=True):  # fmt: skip
        import os

        monkeypatch.setenv(theirs, os.environ[ours])
        monkeypatch.delenv(ours)
    progress.report(step=7)
    assert metrics(server.wait(1)[0]) == {"step": "7"}


def test_a_script_with_only_the_standard_library_sends_its_last_values_at_exit(server: Server, tmp_path: Path):
    shutil.copy(progress.__file__, tmp_path / "t9k_progress.py")  # the file alone, as a ConfigMap would carry it
    script = ("import time, t9k_progress as p\np.report(step=1, total_steps=30)\n"
              "while p._reporter.sent < 1: time.sleep(0.01)\n"  # the first has gone: the rest waits for the interval
              "for s in range(2, 31):\n    p.report(step=s, loss=1 / s)\nprint('done')\n")  # fmt: skip
    out = subprocess.run([sys.executable, "-S", "-I", "-c", f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n{script}"],
                         capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert out.returncode == 0
    assert out.stdout == "done\n", out.stderr
    requests = server.wait(2)
    assert len(requests) == 2
    assert metrics(requests[-1]) == {"step": "30", "total_steps": "30", "loss": str(1 / 30)}


def test_the_helper_imports_nothing_beyond_the_standard_library():
    tree = ast.parse(Path(progress.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {str(n.module).split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "json" in imported
    assert imported - {"__future__"} <= sys.stdlib_module_names, imported - sys.stdlib_module_names


def test_a_context_for_the_ca_verifies_the_server(server: Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    other = self_signed(["127.0.0.1"])  # a CA that did not sign the server's certificate
    (tmp_path / "ca.crt").write_text(other.ca_pem)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        progress.report(step=1)
        assert progress.flush(2) is False
    assert server.requests == []
    assert "cannot reach" in str(caught[0].message)
    assert isinstance(progress._reporter.context, ssl.SSLContext)
