"""Run the real controller as a separate process, the way a user would."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def parse_metrics(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, value = line.rsplit(" ", 1)
        if name.startswith("airflow_t9k_controller_total{") and 'what="' in name:
            name = name.split('what="', 1)[1].split('"', 1)[0]
        out[name] = float(value)
    return out


def free_port() -> int:
    """A port nothing listens on, on any address: the kernel picks one free for a wildcard bind.
    (Bound on 127.0.0.1 it once returned the local cluster's API-server port, which listens on
    the real node's bridge address only, and an Airflow api-server binding 0.0.0.0 then failed.)"""
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return int(s.getsockname()[1])


def written_since(path: Path, offset: int) -> str:
    """What a process logging to ``path`` wrote after the file was ``offset`` bytes long."""
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


class ControllerProcess:
    def __init__(self, kubeconfig: Path, namespace: str | None, log_dir: Path, *extra: str) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.extra = extra
        self.log_path = log_dir / f"controller-{namespace or 'all'}-{int(time.time() * 1000)}.log"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.launched_at = 0  # the log's size when the process started: what it wrote comes after
        self.ports_lost = 0

    def start(self, wait: bool = True) -> ControllerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)  # a module's own controller may start first on a fresh clone
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._launch()
        if wait:
            self.wait_healthy()
        return self

    def _launch(self) -> None:
        args = [sys.executable, "-m", "airflow_t9k.cli", "controller", "--kubeconfig", str(self.kubeconfig),
                "--health-port", str(self.port), "--health-address", "127.0.0.1", "--metrics-port", str(self.port),
                "--log-level", "INFO", *self.extra]  # fmt: skip
        if self.namespace:
            args += ["-n", self.namespace]
        self.log.flush()
        self.launched_at = self.log_path.stat().st_size
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT, env=os.environ.copy())

    def wait_healthy(self, timeout: float = 30) -> None:
        """Until this process listens and /readyz says every cache has synced and every watch is
        open. ``free_port`` only found a port free a moment before: any process's outgoing
        connection may take it meanwhile, and another test's controller or Airflow then answers
        there. So the probes count only once this process has said it listens; a process that
        found its port taken is started again on another (port allocation, not a retried test)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                if "address already in use" in written_since(self.log_path, self.launched_at) and self.ports_lost < 3:
                    self.ports_lost += 1
                    self.port = free_port()
                    self._launch()
                    continue
                raise AssertionError(f"controller exited with {self.proc.returncode}:\n{self.tail()}")
            if (
                f"listening on 127.0.0.1:{self.port}" in written_since(self.log_path, self.launched_at)
                and self.probe("/readyz") == 200
            ):
                return
            time.sleep(0.1)
        raise AssertionError(f"controller not healthy within {timeout}s:\n{self.tail()}")

    def probe(self, path: str, timeout: float = 1) -> int | None:
        """The HTTP status of one of the health endpoints, None when nothing answers."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=timeout) as r:
                return int(r.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except OSError:
            return None

    def metrics(self) -> dict[str, float]:
        """Prometheus text: our own counters by their `what` label (`create.Pod`), others by name
        with labels (`leader_election_master_status{name="..."}`)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as r:
            return parse_metrics(r.read().decode())

    def metric_sum(self, prefix: str, **labels: str) -> float:
        """The sum of every sample whose name starts with ``prefix`` and carries ``labels``."""
        want = [f'{k}="{v}"' for k, v in labels.items()]
        return sum(v for k, v in self.metrics().items() if k.startswith(prefix) and all(w in k for w in want))

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def tail(self, n: int = 40) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, as when a node dies."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if hasattr(self, "log"):
            self.log.close()

    def wait_exit(self, timeout: float = 30) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)
