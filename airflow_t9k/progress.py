"""Report a training script's progress to the controller (docs/progress.md, "The push path").

::

    from airflow_t9k.progress import report

    for step in range(steps):
        loss = train_step()
        report(step=step + 1, total_steps=steps, epoch=epoch, loss=loss, acc=acc)

The values reach the job's ``status.progress`` (the Progress and ETA columns, the task log,
XCom ``metrics``, the T9k Job tab), as ``T9K_PROGRESS`` lines do, without the controller
reading the replica's log. It needs the controller's progress endpoint (``--progress-endpoint``):
every replica then has its URL, CA and token in its environment (``T9K_PROGRESS_URL``,
``T9K_PROGRESS_CA_CERT``, ``T9K_PROGRESS_TOKEN``, or Kubeflow Trainer's
``KUBEFLOW_TRAINER_SERVER_*``, under which this also reports to a Kubeflow Trainer v2.2
controller); a process that did not inherit the container's environment (a rank started over
SSH) finds them as files in ``/var/run/secrets/airflow-t9k/progress/``. Without them ``report``
does nothing, and warns once.

Standard library only, so a pod's Python needs nothing installed: copy this one file next to
the script when the package is not in the image. ``report`` never raises and never waits for
the network: it keeps the latest values (keys it is not given keep theirs), and a background
thread sends them at most once per ``T9K_PROGRESS_MIN_INTERVAL`` seconds (default 2), the
first at once, on one kept-alive connection, again after a failure (honouring ``Retry-After``).
What is still unsent when the interpreter exits is sent then (``flush``, at most 5 s). Call it
from one process, rank 0.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import json
import math
import os
import ssl
import sys
import threading
import time
import urllib.parse
import warnings
from datetime import datetime, timezone
from typing import Any

__all__ = ["flush", "report"]

URL_ENV = ("T9K_PROGRESS_URL", "KUBEFLOW_TRAINER_SERVER_URL")
# Where the controller mounts the URL, CA and token in every replica: read when the environment
# lacks them (a rank an MPI, pdsh or ColossalAI launcher started over SSH has not the container's).
MOUNT = "/var/run/secrets/airflow-t9k/progress"
CA_ENV = ("T9K_PROGRESS_CA_CERT", "KUBEFLOW_TRAINER_SERVER_CA_CERT")
TOKEN_ENV = ("T9K_PROGRESS_TOKEN", "KUBEFLOW_TRAINER_SERVER_TOKEN")
INTERVAL_ENV = "T9K_PROGRESS_MIN_INTERVAL"
DEFAULT_INTERVAL = 2.0
TIMEOUT = 5.0  # seconds a request may take
BACKOFF = (1.0, 30.0)  # after a failure: first wait, longest wait
RESERVED = ("step", "total_steps", "epoch", "total_epochs")

_lock = threading.Lock()
_reporter: _Reporter | None = None
_warned: set[str] = set()


def _env(names: tuple[str, ...], file: str = "") -> str:
    """The first of ``names`` set in the environment, else the mounted ``file``'s path (its
    content for the URL), else ''."""
    found = next((os.environ[n] for n in names if os.environ.get(n)), "")
    if found or not file:
        return found
    path = os.path.join(os.environ.get("T9K_PROGRESS_DIR") or MOUNT, file)
    if file != "url":
        return path if os.path.exists(path) else ""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _warn_once(what: str, message: str) -> None:
    if what not in _warned:
        _warned.add(what)
        warnings.warn(f"airflow_t9k.progress: {message}", RuntimeWarning, stacklevel=3)


def _number(value: Any) -> float | None:
    """A finite number (anything ``float()`` takes: ints, numpy and torch scalars), else None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _text(number: float) -> str:
    number = float(number)
    return str(int(number)) if number.is_integer() and abs(number) < 2**53 else repr(number)


class _Reporter:
    def __init__(self, url: str) -> None:
        self.url = urllib.parse.urlsplit(url)
        self.path = self.url.path + (f"?{self.url.query}" if self.url.query else "")
        self.ca = _env(CA_ENV, "ca.crt")
        self.token_path = _env(TOKEN_ENV, "token")
        try:
            self.interval = max(float(os.environ.get(INTERVAL_ENV) or DEFAULT_INTERVAL), 0.0)
        except ValueError:
            self.interval = DEFAULT_INTERVAL
        self.values: dict[str, float] = {}
        self.version = 0  # bumped by every report; what was last sent is `sent`
        self.sent = 0
        self.next_at = 0.0  # monotonic time the next request may go
        self.delay = BACKOFF[0]
        self.wake = threading.Condition(threading.Lock())
        self.conn: http.client.HTTPConnection | None = None
        self.context: ssl.SSLContext | None = None
        self.pid = os.getpid()
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name="t9k-progress", daemon=True)
        self.thread.start()

    # -- called from the training loop ----------------------------------------------------
    def update(self, values: dict[str, float]) -> None:
        with self.wake:
            self.values.update(values)
            self.version += 1
            self.wake.notify()

    def flush(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.wake:
            while self.sent < self.version and time.monotonic() < deadline:
                self.next_at = min(self.next_at, time.monotonic())  # no waiting out the interval at the end
                self.wake.notify()
                self.wake.wait(min(0.1, max(deadline - time.monotonic(), 0)))
            return self.sent >= self.version

    def stop(self) -> None:
        """The sender thread ends (what is unsent stays unsent)."""
        with self.wake:
            self.stopped = True
            self.wake.notify_all()

    # -- the sender thread -----------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self.wake:
                while not self.stopped and (self.sent >= self.version or time.monotonic() < self.next_at):
                    wait = None if self.sent >= self.version else self.next_at - time.monotonic()
                    self.wake.wait(wait)
                if self.stopped:
                    self._close()
                    return
                version, values = self.version, dict(self.values)
            retry_after = self._send(values)
            with self.wake:
                if retry_after is None:
                    self.sent = max(self.sent, version)
                    self.delay = BACKOFF[0]
                    self.next_at = time.monotonic() + self.interval
                else:
                    self.next_at = time.monotonic() + retry_after
                self.wake.notify_all()

    def body(self, values: dict[str, float]) -> bytes:
        """Kubeflow Trainer's body (this controller reads it, and so does Trainer's)."""
        status: dict[str, Any] = {"lastUpdatedTime": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        for done, total in (("step", "total_steps"), ("epoch", "total_epochs")):
            if values.get(done) is not None and values.get(total):
                status["progressPercentage"] = int(min(max(values[done] / values[total] * 100, 0), 100))
                break
        status["metrics"] = [{"name": k, "value": _text(v)} for k, v in values.items()]
        return json.dumps({"trainerStatus": status}).encode()

    def _connection(self) -> http.client.HTTPConnection:
        if self.conn is None:
            host, port = self.url.hostname or "", self.url.port
            if self.url.scheme == "https":
                if self.context is None:
                    self.context = ssl.create_default_context(cafile=self.ca or None)
                self.conn = http.client.HTTPSConnection(host, port, timeout=TIMEOUT, context=self.context)
            else:
                self.conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT)
        return self.conn

    def _send(self, values: dict[str, float]) -> float | None:
        """None when the values were taken (or refused for good); else seconds to wait before trying again."""
        try:
            with open(self.token_path) as f:  # read each time: the kubelet renews it
                token = f.read().strip()
        except OSError as exc:
            _warn_once("token", f"cannot read the token ({exc}); retrying")
            return self._failed(None)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        for attempt in (1, 2):  # a kept-alive connection the server closed fails once
            try:
                conn = self._connection()
                conn.request("POST", self.path, body=self.body(values), headers=headers)
                resp = conn.getresponse()
                text = resp.read().decode(errors="replace")[:4096]  # all of it: the connection is kept
                break
            except (OSError, http.client.HTTPException) as exc:
                self._close()
                if attempt == 2:
                    _warn_once("network", f"cannot reach {self.url.netloc} ({exc}); retrying")
                    return self._failed(None)
        if resp.status == 200:
            return None
        if resp.getheader("Connection", "").lower() == "close":
            self._close()
        if resp.status in (429, 503) or resp.status >= 500:
            # 503 may be a standby controller: a new connection may reach the leader.
            self._close()
            return self._failed(resp.getheader("Retry-After"))
        try:
            message = json.loads(text).get("message") or text
        except (ValueError, AttributeError):
            message = text
        _warn_once(f"http{resp.status}", f"the controller refused the report ({resp.status}): {message}")
        if resp.status in (400, 404, 413, 422):  # these values will never be taken: the next ones may
            return None
        return self._failed(None)  # 401/403: a token or pod not (yet) known; slowly again

    def _failed(self, retry_after: str | None) -> float:
        try:
            wait = float(retry_after) if retry_after else self.delay
        except ValueError:
            wait = self.delay
        self.delay = min(self.delay * 2, BACKOFF[1])
        return max(wait, 0.1)

    def _close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):  # closing a broken connection
                self.conn.close()
            self.conn = None


def _get() -> _Reporter | None:
    global _reporter
    url = _env(URL_ENV, "url")
    if not url:
        _warn_once("off", "no progress endpoint in the environment (T9K_PROGRESS_URL): report() does nothing. "
                          "Print T9K_PROGRESS lines instead, or run the controller with --progress-endpoint")  # fmt: skip
        return None
    with _lock:
        if _reporter is None or _reporter.pid != os.getpid():  # a forked child gets its own thread
            _reporter = _Reporter(url)
    return _reporter


def report(step: Any = None, total_steps: Any = None, epoch: Any = None, total_epochs: Any = None, loss: Any = None,
           **metrics: Any) -> None:  # fmt: skip
    """Record the latest values; they are sent in the background. Never raises.

    ``step`` and ``total_steps`` are whole numbers, ``epoch`` and ``total_epochs`` numbers
    (2.5 is half-way through the third epoch); every other keyword is a named metric. Values
    may be ints, floats or anything ``float()`` takes (numpy and torch scalars); None leaves a
    key as it was. At most 16 metric names are kept by the controller, the first ones.
    """
    try:
        given = {"step": step, "total_steps": total_steps, "epoch": epoch, "total_epochs": total_epochs, "loss": loss, **metrics}
        values: dict[str, float] = {}
        for name, value in given.items():
            if value is None:
                continue
            number = _number(value)
            if number is None:
                _warn_once(f"value:{name}", f"{name}={value!r} is not a finite number; left out")
                continue
            values[str(name)] = number
        reporter = _get()
        if reporter is not None and values:
            reporter.update(values)
    except Exception as exc:  # noqa: BLE001 - reporting must never stop a training loop
        _warn_once("error", f"report failed: {exc!r}")


def flush(timeout: float = TIMEOUT) -> bool:
    """Send what is unsent now and wait for it, at most ``timeout`` seconds; True when nothing is
    left unsent. Runs by itself when the interpreter exits."""
    try:
        reporter = _reporter
        if reporter is None or reporter.pid != os.getpid():
            return True
        return reporter.flush(timeout)
    except Exception:  # noqa: BLE001 - never into the training loop
        return False


atexit.register(flush)

if __name__ == "__main__":  # python3 progress.py step=3 total_steps=10 loss=0.5: one report, sent before exit
    report(**{k: v for k, _, v in (a.partition("=") for a in sys.argv[1:])})
