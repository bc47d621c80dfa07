"""The controller's log lines: text for a terminal (the default), or with ``--log-format=json``
one JSON object a line, as Kueue and Kubeflow Trainer log with zap, for a log pipeline to index.

A JSON line has ``ts`` (RFC 3339, UTC), ``level``, ``logger`` and ``msg``; during a job's pass
also ``kind``, ``namespace``, ``job``, ``uid`` and ``reconcileID`` (one id per pass, so that the
lines of one pass can be told from the next's); ``exc`` holds a traceback where the call logged
one. Nothing else of a record is written: a value a call passes in ``extra`` stays out, so a JSON
line never says more than its text line (the client libraries, which log response bodies, Secrets
included, at DEBUG, are kept at INFO by ``configure``).

The job's fields come from a context variable that the worker sets for the pass
(``job_pass``), not from each call: asyncio copies it into what the pass awaits and into the
threads it plans in (``asyncio.to_thread``). A task the pass starts and that outlives it (a
namespace's watches, a replica's log stream) is started in ``outside_pass()``'s context, so its
lines name no pass that has ended, nor a job it does not belong to.
"""

from __future__ import annotations

import contextvars
import json
import logging
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timezone
from types import MappingProxyType

FORMATS = ("text", "json")
TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
JOB_FIELDS = ("kind", "namespace", "job", "uid")  # what a task started by a pass may keep (outside_pass)
# The client libraries log whole response bodies at DEBUG, Secrets included (our SSH keys).
NOISY = ("kubernetes_asyncio", "aiohttp")

_fields: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "airflow_t9k_log_fields", default=MappingProxyType({})
)


def current() -> Mapping[str, str]:
    """The fields every line logged here now carries (empty outside a job's pass)."""
    return _fields.get()


def new_reconcile_id() -> str:
    return uuid.uuid4().hex[:12]


@contextmanager
def job_pass(kind: str, namespace: str, name: str) -> Iterator[str]:
    """A pass over one job: its lines carry the job and a new reconcile id (yielded), until the
    block ends, whatever it raised."""
    rid = new_reconcile_id()
    token = _fields.set({"kind": kind, "namespace": namespace, "job": name, "reconcileID": rid})
    try:
        yield rid
    finally:
        _fields.reset(token)


def bind(**fields: str) -> None:
    """Add fields learnt during the pass (the job's uid, once it is read from the cache); gone
    with the pass, since ``job_pass`` puts back what was there before it."""
    _fields.set({**_fields.get(), **fields})


def outside_pass(keep_job: bool = False) -> contextvars.Context:
    """A context for a task that outlives the pass starting it: no reconcile id; the job's own
    fields only with ``keep_job`` (a stream that follows the job's replica). Run ``create_task``
    in it: ``outside_pass().run(loop.create_task, coro)`` (a task copies the context it is made in)."""
    ctx = contextvars.copy_context()
    kept = {k: v for k, v in _fields.get().items() if k in JOB_FIELDS} if keep_job else {}
    ctx.run(_fields.set, kept)
    return ctx


def rfc3339(created: float) -> str:
    """``2026-12-01T10:00:00.123Z``: UTC, to the millisecond."""
    return datetime.fromtimestamp(created, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object a line: a message's newlines come out escaped, and text that is not
    ASCII as it is (the stream's encoding, UTF-8, carries it)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, str] = {
            "ts": rfc3339(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line.update(_fields.get())
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure(level: str, fmt: str = "text") -> None:
    """The root logger's one handler (stderr) in the format asked, and the noisy libraries kept
    at INFO or above."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT))
    logging.basicConfig(level=level, handlers=[handler])
    if fmt == "json":  # a library's warning, written to stderr as it is, would be a line that is not JSON
        logging.captureWarnings(True)
    for noisy in NOISY:
        logging.getLogger(noisy).setLevel(max(logging.INFO, logging.getLogger().level))
