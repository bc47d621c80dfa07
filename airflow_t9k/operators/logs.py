"""Replica logs in the task log, in both modes, as KubernetesPodOperator(get_logs=True) does.

Which replicas: by default the one whose success decides the job (the master, chief,
launcher or rank 0: where a training script's progress is printed once, not N times), or all
of them (``log_replicas="all"``, at most ``max_followed_pods``). The deferred wait follows them
in the trigger; the worker-side wait follows them here, one thread per pod, each line once
(every line of a stream; after a reconnect exactly the lines already sent are skipped,
``api/logcursor.py``), at most ``max_log_lines`` lines in all. When the job failed, the failed
replicas' logs follow, the first to fail first
and named as the root cause, within ``max_followed_pods`` replicas and ``max_log_lines`` lines
again (``api/failed.py``); the trigger prints them the same way from the triggerer.

Every answer is split by the bounded ``LineSplitter(log=True)`` (k8s/client.py), as the trigger
splits its own: a line holds at most ``LOG_LINE_BYTES`` after its stamp (with the cut mark), and
of a progress bar's ``\r`` redraws the last. A line of megabytes costs a reader that much, never
the buffer to hold it, and the lines after it still come.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

from airflow_t9k.api.evidence import KeptLogs, controlled_by
from airflow_t9k.api.failed import FailedLogs, final_header, final_lines, first_failed, print_lines, unavailable
from airflow_t9k.api.logcursor import Cursor, since_time, split
from airflow_t9k.api.outcome import interpret
from airflow_t9k.api.paths import LOG_LINE_BYTES, child_path
from airflow_t9k.k8s.client import LineSplitter
from airflow_t9k.kinds.registry import KINDS

Obj = dict[str, Any]
LOG_REPLICAS = ("deciding", "all")
DEFAULT_MAX_LOG_LINES = 100_000  # a whole training's progress, short of a runaway print loop
DEFAULT_MAX_FOLLOWED_PODS = 8
RETRY = 2.0  # seconds before opening a replica's log again (not started yet, or the stream ended)
# A silent stream is reopened after this long: the thread then sees that the wait is over.
# (Closing a response from another thread blocks on the TLS socket a reader holds.)
READ_IDLE = 10.0
START_MARGIN = 5.0  # seconds before the wait began that the first read of a replica's log goes back
# At the job's end, how long the followers get to put their read down before the last read of
# each replica's log. One between two opens, or at the end of its stream, stops at once; one still
# reading then is on a live stream (a replica still running) and keeps its replica's log.
FINISH_JOIN = 0.2
READ_SIZE = 1 << 16  # bytes asked of the answer at a time (what urllib3 iterating a response asks)


def replica_pods(job: Obj | None) -> list[str]:
    """Every replica pod the job's status names, in its order."""
    return [str(replica["name"])
            for task in ((job or {}).get("status") or {}).get("tasks") or []
            for replica in task.get("status") or [] if replica.get("name")]  # fmt: skip


def pods_to_follow(job: Obj, log_replicas: str, max_pods: int) -> list[str] | None:
    """The pods whose logs go to the task log; None: every running replica (up to ``max_pods``),
    as they come, for a kind no single replica decides (BeamJob) or with ``"all"``."""
    kind = KINDS.get(str(job.get("kind")))
    if log_replicas == "deciding" and kind is not None:
        try:
            decisive = kind.decisive_replica(job)
        except Exception:  # noqa: BLE001 - a spec the controller will refuse: no log to follow anyway
            decisive = None
        if decisive is not None:
            return [kind.pod_name(job, *decisive)]
    return None


class LogFollower:
    """Follows replica logs from the worker while the task waits there (threads, stopped at the end)."""

    def __init__(self, hook: Any, namespace: str, log: logging.Logger, max_lines: int | None, max_pods: int,
                 pods: list[str] | None, owner_uid: str | None = None, tail_lines: int = 50) -> None:  # fmt: skip
        self.hook, self.namespace, self.log = hook, namespace, log
        self.max_lines, self.tail_lines = max_lines, tail_lines
        self.owner_uid = owner_uid  # a pod of that name is followed only while the job is its controller
        # From a little before the wait began, as the trigger follows from its deferral: a try that
        # reattaches does not print again what the try before it printed; the margin allows for
        # a node's clock a few seconds behind the worker's (a new job's pods start after this).
        self.started = since_time(time.time_ns() - int(START_MARGIN * 1e9))
        self.budget = max_lines
        self.max_pods = max_pods
        self.fixed = pods
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.threads: dict[str, threading.Thread] = {}
        self.last_seen: dict[str, Cursor] = {}  # pod -> where its forwarded lines stand
        self.warned: set[str] = set()  # pods whose log broke off once already (said once each)

    def resume_from(self, saved: Any, uid: str) -> None:
        """Start where an earlier try of this task left the same job's logs (``snapshot``): the
        lines written between that try's loss and this one reach the task log, once."""
        if not isinstance(saved, dict) or saved.get("uid") != uid or not isinstance(saved.get("pods"), dict):
            return
        for pod, value in saved["pods"].items():
            cursor = Cursor.from_dict(value)
            if cursor.at is not None:
                self.last_seen.setdefault(str(pod), cursor)

    def snapshot(self, uid: str) -> dict[str, Any]:
        """Where each replica's forwarded lines stand, for a later try (``resume_from``)."""
        with self.lock:  # a cursor moves under the lock: its stamp and count are read together
            return {"uid": uid, "pods": {pod: c.as_dict() for pod, c in self.last_seen.items() if c.at is not None}}

    def update(self, job: Obj) -> None:
        """Start following every pod to follow that the job's status now names."""
        wanted = self.fixed if self.fixed is not None else replica_pods(job)
        for pod in wanted:
            if pod in self.threads or len(self.threads) >= self.max_pods or self.stop_event.is_set():
                continue
            t = threading.Thread(target=self._follow, args=(pod,), name=f"t9k-log-{pod}", daemon=True)
            self.threads[pod] = t
            t.start()

    def stop(self, grace: float = 0.5) -> None:
        """Stop forwarding (after ``grace`` for the last lines of a job that just ended). The
        threads are daemons and end at their next line or within ``READ_IDLE``; nothing they
        read after this is logged."""
        self.stop_event.wait(grace)
        self.stop_event.set()

    def _ours(self, pod: str) -> bool:
        """Whether the pod of that name is the job's own replica (its controller is the job):
        a pod made under a replica's name by someone else is not followed."""
        try:
            found = self.hook.get_pod(pod, self.namespace)
        except Exception:  # noqa: BLE001 - unreachable: try again later
            return False
        return found is not None and controlled_by(found, self.owner_uid)

    def _take(self) -> bool:
        with self.lock:
            if self.budget is None:
                return True
            if self.budget <= 0:
                return False
            self.budget -= 1
            if self.budget == 0:
                self.log.info("[logs] forwarded the limit of log lines (max_log_lines); not forwarding more")
            return True

    def _follow(self, pod: str) -> None:
        cursor = self.last_seen.setdefault(pod, Cursor())
        path = child_path("Pod", self.namespace, pod, "log")
        while not self.stop_event.is_set():
            query: list[tuple[str, Any]] = [("follow", "true"), ("timestamps", "true")]
            query.append(("sinceTime", cursor.since() or self.started))
            skip = cursor.resume()  # a reopened stream replays its last second: skip exactly what was sent
            if self.owner_uid and not self._ours(pod):
                self.stop_event.wait(RETRY)
                continue
            try:
                resp = self.hook.api_client.call_api(path, "GET", query_params=query, auth_settings=["BearerToken"],
                                                     _preload_content=False, _request_timeout=(10, READ_IDLE))  # fmt: skip
            except Exception:  # noqa: BLE001 - not started yet (400), gone, unreachable: try again
                self.stop_event.wait(RETRY)
                continue
            try:
                if not self._forward(pod, pod_log_lines(resp, flush=False), cursor, skip, stoppable=True):
                    return
            except Exception as exc:  # noqa: BLE001 - the stream broke or was idle READ_IDLE: reopen it
                self._broke(pod, exc)
            finally:
                resp.release_conn()
            self.stop_event.wait(RETRY)

    def _broke(self, pod: str, exc: Exception) -> None:
        """A read of ``pod``'s log ended on an error; it is opened again from its cursor. Said once
        a pod at warning level; a stream silent for ``READ_IDLE`` is not an error."""
        from urllib3.exceptions import ReadTimeoutError

        if isinstance(exc, ReadTimeoutError) or pod in self.warned:
            self.log.debug("reading the log of %s again after: %s", pod, exc)
            return
        self.warned.add(pod)
        self.log.warning("the log of %s broke off (%s: %s); reading it again from its last line sent", pod,
                         type(exc).__name__, exc)  # fmt: skip

    def _forward(self, pod: str, lines: Iterator[bytes], cursor: Cursor, skip: Any, *, stoppable: bool) -> bool:
        """Log the ``lines`` not sent yet; False once the wait stopped (``stoppable``) or the line
        budget is spent."""
        for raw in lines:
            if stoppable and self.stop_event.is_set():
                return False
            stamp, text = split(raw.decode(errors="replace"))
            if not skip.fresh(stamp):
                continue  # forwarded before the reconnect
            if not self._take():
                return False
            self.log.info("[%s] %s", pod, text)
            with self.lock:
                cursor.sent(stamp)
        return True

    def finish(self, job: Obj) -> None:
        """The job ended: stop following, then read once more, not following, the log of each
        replica no follower is still reading, from where its cursor stands (from the wait's
        start for one never followed). Lines a follower had not seen (between two opens of its
        stream, or before its first) reach the task log too, once. Of a failed job the failed
        replicas are left to ``print_failed_logs`` (``JobState.replicas_read_at_end``)."""
        self.stop()
        until = time.monotonic() + FINISH_JOIN
        for t in list(self.threads.values()):
            t.join(max(until - time.monotonic(), 0))
        ended = interpret(job).replicas_read_at_end
        read = set(self.threads)
        candidates = ended if self.fixed is None else [p for p in self.fixed if p in ended]
        for pod in candidates:
            running = self.threads.get(pod)
            if running is not None and running.is_alive():
                continue
            if pod not in read and len(read) >= self.max_pods:
                continue
            read.add(pod)
            if self.owner_uid and not self._ours(pod):
                continue
            if not self._read_once(pod):
                break
        if self.budget is not None and self.budget <= 0:
            self._final_lines([p for p in candidates if not self.owner_uid or self._ours(p)][: self.max_pods])

    def _final_lines(self, pods: list[str]) -> None:
        """The line budget ran out: still, the end of the training reaches the task log, the last
        ``tail_lines`` of each replica read at the end not forwarded yet, under their own header."""
        for pod in pods:
            cursor = self.last_seen.get(pod)
            since = (cursor.since() if cursor else None) or self.started  # never lines from before this wait
            try:
                text = self.hook.read_log_tail(pod, self.namespace, self.tail_lines, timestamps=True, since=since)
            except Exception as exc:  # noqa: BLE001 - gone or unreachable: the outcome matters more
                self.log.debug("could not read the last lines of %s: %s", pod, exc)
                continue
            fresh = final_lines(text or "", cursor, self.tail_lines)
            if fresh:
                print_lines(self.log, final_header(pod, len(fresh), self.max_lines), fresh)

    def _read_once(self, pod: str) -> bool:
        """One read of ``pod``'s log from its cursor, not following; False when nothing more may be logged."""
        cursor = self.last_seen.setdefault(pod, Cursor())
        query: list[tuple[str, Any]] = [("timestamps", "true"), ("sinceTime", cursor.since() or self.started)]
        try:
            resp = self.hook.api_client.call_api(child_path("Pod", self.namespace, pod, "log"), "GET", query_params=query,
                                                 auth_settings=["BearerToken"], _preload_content=False,
                                                 _request_timeout=(10, READ_IDLE))  # fmt: skip
        except Exception:  # noqa: BLE001 - gone (cleaned up) or unreachable: its lines are not to be had
            return True
        try:
            return self._forward(pod, pod_log_lines(resp, flush=True), cursor, cursor.resume(), stoppable=False)
        except Exception as exc:  # noqa: BLE001 - the read broke: what it gave is logged, the other replicas are read
            self._broke(pod, exc)
            return True
        finally:
            resp.release_conn()


def pod_log_lines(resp: Any, *, flush: bool) -> Iterator[bytes]:
    """The lines of a pod log answer (urllib3's, not preloaded) as they arrive, bounded
    (``LineSplitter(log=True)``); ``flush``: an unterminated last line too (a read that does
    not follow)."""
    splitter = LineSplitter(LOG_LINE_BYTES, log=True)
    for chunk in resp.stream(READ_SIZE, decode_content=True):
        yield from splitter.feed(chunk)
    if flush:
        yield from splitter.flush()


def print_failed_logs(hook: Any, job: Obj, log: logging.Logger, *, max_lines: int | None, max_pods: int, tail_lines: int,
                      streamed: dict[str, Cursor] | None = None) -> Obj:  # fmt: skip
    """Print the failed replicas' logs into the task log, the first to fail first; what the
    final event carries about them (``FailedLogs.report``). A replica whose pod is gone (clean-up
    deleted it) is printed from the evidence the controller kept (``KeptLogs``)."""
    ns = job["metadata"]["namespace"]
    try:
        pods = hook.list_replica_pods(job["metadata"]["name"], ns, job["metadata"].get("uid"))  # its own, not look-alikes
        live: set[str] | None = {str(p["metadata"]["name"]) for p in pods}
    except Exception as exc:  # noqa: BLE001 - the order then comes from the job's status alone
        log.warning("could not list the replicas to order their failures: %s", exc)
        pods, live = [], None
    kept = KeptLogs(job, log)
    plan = FailedLogs(first_failed(job, pods), max_lines, max_pods, tail_lines, dict(streamed or {}))

    def read(pod: str, lines: int | None, since: str | None = None) -> tuple[str, str | None]:
        text = hook.read_log_tail(pod, ns, lines, timestamps=True, since=since) if live is None or pod in live else ""
        if text and not unavailable(text):
            return text, None
        return kept.instead(pod, text, lambda: hook.get_evidence(job["metadata"]["name"], ns))

    while (step := plan.next_read()) is not None:
        pod, asked = step
        text, kept_in = read(pod, asked, plan.since(pod))  # a streamed replica: from its last streamed second
        lines = plan.add(pod, text, asked, kept_in)
        if lines is not None:  # None: the plan reads this log again with more lines
            print_lines(log, plan.header(pod, len(lines)), lines)
    if plan.skipped():
        log.info("--- not printed (max_followed_pods or max_log_lines): the logs of %s ---", ", ".join(plan.skipped()))
    if (need := plan.tail_read()) is not None:
        text, kept_in = read(*need)
        plan.set_tail(text, kept=kept_in is not None)
    return plan.report()
