"""Which replica failed first, and how much of each failed replica's log goes to the task log.

When a distributed job fails, one replica usually failed on its own (an exception, an OOM
kill) and the others failed because it did (a broken collective, a lost rendezvous): the
first to fail is the root cause, and its log is the one to read first. So the failed
replicas are ordered by when their container terminated (``terminated.finishedAt`` of the
pod, or of the job's status when the pod is gone), and their logs are printed in that order,
within two bounds: at most ``max_pods`` replicas and ``max_lines`` lines in all. Each
replica in turn gets an equal share of the lines still unspent, so one long log cannot crowd
out the others and a short one leaves its share to those after it; a share is the log's
*last* lines, where a traceback is. Lines already streamed into the task log while waiting
are not printed twice: a streamed replica's log is read from the second of its last streamed
line, and exactly the lines sent at that stamp are skipped (``api/logcursor.py``; stamps are
not unique, so lines that share the last one are told apart by their order).

Every line is as the followers forward it (``log_lines``): a progress bar's ``\r`` redraws
resolved to the last, at most ``LOG_LINE_BYTES`` with the cut mark. The root cause's last lines
that go into the final event (the trigger's ``next_kwargs``) and the error message are bounded
again (``tail_of``): each line at most ``LOG_TAIL_LINE_BYTES``, ``LOG_TAIL_BYTES`` in all.

Pure: the operator (sync) and the trigger (async) do the reading, in ``operators/logs.py``
and ``triggers/outcome.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from airflow_t9k.api.evidence import last_lines
from airflow_t9k.api.logcursor import Cursor, instant, split, unsent
from airflow_t9k.api.paths import LOG_LINE_BYTES, LOG_TAIL_BYTES, LOG_TAIL_LINE_BYTES
from airflow_t9k.k8s.client import CUT_MARK_ROOM, LineSplitter, cut_line

Obj = dict[str, Any]
PRINT_CHUNK = 1000  # lines per log record when printing a failed replica's log
UNKNOWN = "~"  # sorts after every RFC 3339 time: a replica whose end is not on record comes last


@dataclass(frozen=True)
class FailedReplica:
    pod: str
    finished_at: str | None  # RFC 3339, the earliest a failed container of it terminated
    detail: str = ""  # "container main exit code 137 (OOMKilled)"

    def as_dict(self) -> Obj:
        return {"pod": self.pod, "finished_at": self.finished_at, "detail": self.detail}


def _terminated(statuses: list[Obj]) -> list[tuple[str, Obj]]:
    """(container name, terminated state) of each container that ended, failed ones first."""
    ended = []
    for cs in statuses:
        state = cs.get("state")
        if isinstance(state, dict):  # a pod's containerStatuses
            t = state.get("terminated") if isinstance(state.get("terminated"), dict) else None
        else:  # the controller's summary in the job's status: {"state": "Terminated", "exitCode": ...}
            t = cs if state == "Terminated" else None
        if t is not None:
            ended.append((str(cs.get("name") or ""), t))
    failed = [e for e in ended if (e[1].get("exitCode") or 0) != 0]
    return failed or ended


def _end(statuses: list[Obj]) -> tuple[str | None, str]:
    """When the replica's (first failed) container ended, and how."""
    ended = [(t.get("finishedAt"), name, t) for name, t in _terminated(statuses) if t.get("finishedAt")]
    if not ended:
        return None, ""
    when, name, t = min(ended, key=lambda e: str(e[0]))
    reason = f" ({t['reason']})" if t.get("reason") else ""
    return str(when), f"container {name} exit code {t.get('exitCode')}{reason}"


def first_failed(job: Obj | None, pods: list[Obj] | None = None) -> list[FailedReplica]:
    """The job's failed replicas, the first to fail first; ties (finishedAt has one-second
    resolution) and replicas whose end is not on record keep the order of the job's status."""
    by_pod = {str((p.get("metadata") or {}).get("name")): p for p in pods or []}
    out = []
    for task in ((job or {}).get("status") or {}).get("tasks") or []:
        for replica in task.get("status") or []:
            name = replica.get("name")
            if replica.get("phase") != "Failed" or not name:
                continue
            pod = by_pod.get(str(name))
            when, detail = _end(((pod or {}).get("status") or {}).get("containerStatuses") or [])
            if when is None:  # the pod is gone (cleaned up): the controller kept how it ended
                when, detail = _end(replica.get("containers") or [])
            out.append(FailedReplica(str(name), when, detail))
    ordered = sorted(out, key=lambda r: r.finished_at or UNKNOWN)  # sorted() is stable: ties keep status order
    return _controllers_first(ordered, ((job or {}).get("status") or {}).get("rootCause"))


def _controllers_first(ordered: list[FailedReplica], cause: Any) -> list[FailedReplica]:
    """``ordered`` starting from the replica the controller named in ``status.rootCause``, so the
    job's condition and the task's error cannot name different root causes (the controller saw
    each pod before clean-up; this side may see only some of them, or the job's summary of
    the rest). A named replica no longer listed as failed (replaced since) leads with what the
    controller recorded of it."""
    name = cause.get("replica") if isinstance(cause, dict) else None
    if not isinstance(name, str) or not name or (ordered and ordered[0].pod == name):
        return ordered
    rest = [r for r in ordered if r.pod != name]
    named = next((r for r in ordered if r.pod == name), None)
    if named is None:
        code = cause.get("exitCode")
        detail = f"exit code {code}" if isinstance(code, int) and not isinstance(code, bool) else ""
        finished = cause.get("finishedAt") if isinstance(cause.get("finishedAt"), str) else None
        named = FailedReplica(name, finished, detail)
    return [named, *rest]


def unavailable(text: str) -> bool:
    """Whether a log read answered with the hooks' note instead of a log (the pod is gone)."""
    return text.startswith("(log not available")


def _stamped(raw: str) -> bool:
    stamp = raw.partition(" ")[0]
    return stamp[:4].isdigit() and "T" in stamp and instant(stamp) is not None


def log_lines(text: str) -> list[str]:
    """The lines of a log as read (a tail, or the lines the controller kept), each as a follower
    forwards it (``LineSplitter(log=True)``): split at newlines only, a line's ``\r`` redraws
    resolved to the last, at most ``LOG_LINE_BYTES`` after its stamp, with the cut mark."""
    splitter = LineSplitter(LOG_LINE_BYTES, log=True)
    raw = splitter.feed(text.encode("utf-8", errors="replace")) + splitter.flush()
    return [line.decode("utf-8", errors="replace") for line in raw]


def strip_stamps(text: str) -> list[str]:
    """The lines of a log read with ``timestamps=true``, without their stamps (a line that is not
    stamped, such as "(log not available: ...)", as it is)."""
    return [split(raw)[1] if _stamped(raw) else raw for raw in log_lines(text)]


def stamped_lines(text: str) -> list[tuple[str, str]]:
    """(stamp, text) of each line of a log read with ``timestamps=true`` ("" for a line without one)."""
    return [split(raw) if _stamped(raw) else ("", raw) for raw in log_lines(text)]


_MARKED = re.compile(r" \u2026 \[cut: (\d+) bytes\]$")


def cap_line(line: str, limit: int) -> str:
    """``line`` within ``limit`` bytes, cut as ``cut_line`` cuts; a line cut before keeps
    counting what that cut left out."""
    raw = line.encode("utf-8", errors="replace")
    if len(raw) <= limit:
        return line
    dropped = 0
    if (m := _MARKED.search(line)) is not None:
        raw, dropped = line[: m.start()].encode("utf-8", errors="replace"), int(m.group(1))
    return cut_line(raw, limit, dropped).decode("utf-8", errors="replace")


def tail_of(lines: list[str], count: int) -> str:
    """The last ``count`` of ``lines`` for the final event and the error message: each at most
    ``LOG_TAIL_LINE_BYTES``, and only the last that fit in ``LOG_TAIL_BYTES`` in all, after a
    line saying how many earlier ones were left out."""
    wanted = lines[-count:] if count > 0 else []
    kept: list[str] = []
    size = CUT_MARK_ROOM  # room for the line saying what was left out
    for line in reversed(wanted):
        capped = cap_line(line, LOG_TAIL_LINE_BYTES)
        size += len(capped.encode("utf-8", errors="replace")) + 1
        if size > LOG_TAIL_BYTES and kept:
            kept.append(f"\u2026 [cut: {len(wanted) - len(kept)} earlier lines]")
            break
        kept.append(capped)
    return "\n".join(reversed(kept))


@dataclass
class FailedLogs:
    """The plan and the record of printing the failed replicas' logs: ``next_read`` says whose
    log to read and how many last lines, ``add`` takes what was read and returns the lines to
    print; ``report`` is what the task's final event carries."""

    replicas: list[FailedReplica]
    max_lines: int | None  # None: no bound
    max_pods: int
    tail_lines: int  # of the first failed replica's log, quoted in the error message
    streamed: dict[str, Cursor] = field(default_factory=dict)  # pod -> where streaming it stopped
    printed: dict[str, int] = field(default_factory=dict)  # pod -> lines printed
    cut: dict[str, bool] = field(default_factory=dict)  # pod -> only the log's last lines were printed
    kept_in: dict[str, str] = field(default_factory=dict)  # pod -> the evidence ConfigMap its lines came from
    tail: str = ""
    _spent: int = 0
    _tail_read: bool = False
    _again: tuple[str, int] | None = None  # a read to make again with more lines (see ``add``)

    def to_read(self) -> list[FailedReplica]:
        return self.replicas[: self.max_pods]

    def next_read(self) -> tuple[str, int | None] | None:
        """(pod, tailLines) of the next log to read, or None: done (or no lines left)."""
        if self._again is not None:
            return self._again
        left = [r for r in self.to_read() if r.pod not in self.printed]
        if not left:
            return None
        if self.max_lines is None:
            return left[0].pod, None
        unspent = self.max_lines - self._spent
        if unspent <= 0:
            return None
        return left[0].pod, max(unspent // len(left), 1)

    def since(self, pod: str) -> str | None:
        """``sinceTime`` to read ``pod``'s log with: the second of its last streamed line."""
        cursor = self.streamed.get(pod)
        return cursor.since() if cursor is not None else None

    def add(self, pod: str, text: str, asked: int | None, kept_in: str | None = None) -> list[str] | None:
        """What was read of ``pod``'s log (its last ``asked`` lines, from ``since(pod)``): the
        lines to print; None when the read cannot tell which lines were streamed already (it was
        cut inside the run of lines sharing the last streamed stamp): ``next_read`` then asks
        for the same log with more lines. ``kept_in``: the lines are the controller's evidence
        record of that name (the pod is gone); they carry no timestamps, so lines streamed while
        waiting may repeat."""
        if kept_in is not None:
            self.kept_in[pod] = kept_in
            text = last_lines(text, asked)
        lines = strip_stamps(text)
        cursor = None if kept_in is not None else self.streamed.get(pod)
        retried, self._again = self._again, None
        if cursor is not None and cursor.at is not None and not unavailable(text):
            read = stamped_lines(text)
            fresh, sure = unsent(read, cursor, complete=asked is None or len(read) < asked)
            if not sure and retried is None:
                self._again = (pod, (asked or 0) + cursor.count)  # one more read, with the lines sent at that stamp
                return None
            if not sure and retried is not None:  # still inside that run: what remains unsent is at least what was first asked
                fresh = [t for _, t in read][-(retried[1] - cursor.count) :]
            if retried is not None:
                asked = retried[1] - cursor.count
                fresh = fresh[-asked:] if asked > 0 else []
        else:
            fresh = lines
        # The root cause's last lines for the error message, streamed or not; a read from the last
        # streamed second may hold fewer than that (then ``tail_read`` reads them on their own).
        covered = len(lines) >= self.tail_lines or (cursor is None and (asked is None or asked >= self.tail_lines))
        if self.replicas and pod == self.replicas[0].pod and covered:
            self.tail = tail_of(lines, self.tail_lines)
            self._tail_read = True
        self.printed[pod] = len(fresh)
        self.cut[pod] = asked is not None and len(fresh) >= asked
        self._spent += len(fresh)
        return fresh

    def tail_read(self) -> tuple[str, int] | None:
        """(root cause's pod, tail_lines) when the error message still needs its last lines:
        its log was not read (``max_log_lines`` spent or 0), or fewer lines of it than that."""
        if not self.replicas or self.tail_lines <= 0 or self._tail_read:
            return None
        return self.replicas[0].pod, self.tail_lines

    def set_tail(self, text: str, kept: bool = False) -> None:
        if kept:
            text = last_lines(text, self.tail_lines)
        self.tail = tail_of(strip_stamps(text), self.tail_lines)
        self._tail_read = True

    def skipped(self) -> list[str]:
        """Failed replicas whose logs were not printed (beyond max_pods or max_lines)."""
        return [r.pod for r in self.replicas if r.pod not in self.printed]

    def header(self, pod: str, lines: int) -> str:
        replica = next(r for r in self.replicas if r.pod == pod)
        rank = "failed first: the root cause" if replica is self.replicas[0] else "failed later"
        ended = f" at {replica.finished_at}" if replica.finished_at else ""
        how = f", {replica.detail}" if replica.detail else ""
        which = f"its last {lines} lines" if self.cut.get(pod) else f"{lines} lines"
        again = ", the lines streamed above not repeated" if pod in self.streamed and pod not in self.kept_in else ""
        kept = f", kept in the evidence record {self.kept_in[pod]} (the pod is gone)" if pod in self.kept_in else ""
        return f"--- log of failed replica {pod} ({rank}{ended}{how}): {which}{again}{kept} ---"

    def report(self) -> Obj:
        """For the final event: the order of failure and the root cause's last lines."""
        root = self.replicas[0].pod if self.replicas else None
        return {
            "failed_first": [r.as_dict() for r in self.replicas],
            "logs": {root: self.tail} if root and self.tail else {},
            "logs_printed": True,
        }


def print_lines(log: Any, header: str, lines: list[str]) -> None:
    """A failed replica's log into the task log, under its header, in records of PRINT_CHUNK
    lines (one record per line would cost the triggerer a round trip per line)."""
    log.info("%s", header)
    for i in range(0, len(lines), PRINT_CHUNK):
        log.info("%s", "\n".join(lines[i : i + PRINT_CHUNK]))


def root_cause(failed_first: list[Obj]) -> str:
    """'; root cause: replica X failed first (at T, container main exit code 3)' or ''."""
    if not failed_first:
        return ""
    first = failed_first[0]
    what = ", ".join(str(x) for x in (f"at {first['finished_at']}" if first.get("finished_at") else "", first.get("detail")) if x)
    others = f"; then {', '.join(str(r['pod']) for r in failed_first[1:])}" if len(failed_first) > 1 else ""
    return f"; root cause: replica {first['pod']} failed first{f' ({what})' if what else ''}{others}"


def final_lines(text: str, cursor: Cursor | None, asked: int) -> list[str]:
    """Of a replica's last ``asked`` lines (read with timestamps), the ones not forwarded yet
    (``cursor``: where its forwarded lines stand), each within the line cap. When the read was cut
    inside the run of lines stamped with the cursor's second, which of those were sent cannot be
    told: then only the lines of later seconds."""
    lines = stamped_lines(text)
    fresh, certain = unsent(lines, cursor, complete=len(lines) < asked)
    if not certain and cursor is not None and cursor.at is not None:
        fresh = [t for stamp, t in lines if (when := instant(stamp)) is not None and when > cursor.at]
    return [cap_line(t, LOG_LINE_BYTES) for t in fresh]


def final_header(pod: str, count: int, max_lines: int | None) -> str:
    """The header of the last lines printed after the line budget ran out (both waits)."""
    return f"--- the last {count} lines of {pod} (after max_log_lines={max_lines} ran out) ---"
