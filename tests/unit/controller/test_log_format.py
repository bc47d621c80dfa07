"""--log-format=json (controller/logs.py): one JSON object a line, the job's fields from the pass
that logs it, and nothing a record carries besides. The last tests run the controller's own
worker over a job whose pass fails (its API server does not answer), with no fake of the pass."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys

import pytest

from airflow_t9k.controller import logs
from airflow_t9k.controller.cli import add_controller_parser
from tests.unit.controller.test_metrics_and_probes import offline_controller

RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
JOB = {"kind": "GenericJob", "namespace": "team-a", "job": "train"}


def record(msg: str, *args: object, level: int = logging.INFO, exc: bool = False, **extra: object) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("boom\nsecond line")
        except ValueError:
            exc_info = sys.exc_info()
    rec = logging.LogRecord("airflow_t9k.controller.runner", level, __file__, 1, msg, args, exc_info)
    rec.created = 1796119200.5  # 2026-12-01T10:00:00.5Z
    rec.__dict__.update(extra)
    return rec


def emitted(rec: logging.LogRecord, fields: dict[str, str] | None = None) -> tuple[str, dict]:
    if fields is None:
        text = logs.JsonFormatter().format(rec)
    else:
        with logs.job_pass(fields["kind"], fields["namespace"], fields["job"]):
            logs.bind(**{k: v for k, v in fields.items() if k not in JOB})
            text = logs.JsonFormatter().format(rec)
    return text, json.loads(text)


@pytest.mark.parametrize(
    ("rec", "fields", "expected"),
    [
        pytest.param(record("caches synced: %d jobs", 3), None,
                     {"level": "info", "logger": "airflow_t9k.controller.runner", "msg": "caches synced: 3 jobs"},
                     id="no-context"),
        pytest.param(record("deleted %s", "train", level=logging.WARNING), {**JOB, "uid": "u-1"},
                     {"level": "warning", "msg": "deleted train", **JOB, "uid": "u-1"}, id="in-a-pass"),
        pytest.param(record("名前 %s — ünïcode", "ジョブ"), None, {"msg": "名前 ジョブ — ünïcode"}, id="non-ascii"),
        pytest.param(record("first\nsecond\r\nthird \"quoted\" \\ tab\t"), None,
                     {"msg": "first\nsecond\r\nthird \"quoted\" \\ tab\t"}, id="newlines"),
        pytest.param(record("%s", "\x00\x1b[31mred"), None, {"msg": "\x00\x1b[31mred"}, id="control-characters"),
        pytest.param(record("failed", level=logging.ERROR, exc=True), JOB, {"level": "error", "msg": "failed", **JOB},
                     id="exception"),
    ],
)  # fmt: skip
def test_one_json_object_a_line(rec, fields, expected):
    text, line = emitted(rec, fields)
    assert "\n" not in text
    assert "\r" not in text
    assert line.items() >= expected.items(), line
    assert line["ts"] == "2026-12-01T10:00:00.500Z"
    assert RFC3339_UTC.match(line["ts"])
    if fields is None:
        assert not {"job", "namespace", "kind", "uid", "reconcileID"} & set(line)
    else:
        assert re.fullmatch(r"[0-9a-f]{12}", line["reconcileID"])
    if rec.exc_info:
        assert line["exc"].startswith("Traceback")
        assert "ValueError: boom\nsecond line" in line["exc"]
    else:
        assert "exc" not in line
    assert all(isinstance(v, str) for v in line.values())


def test_what_a_record_carries_besides_stays_out():
    """A value passed in ``extra`` (a token, a body) is not written: only the fixed fields are."""
    _, line = emitted(record("pushed", token="s3cr3t-token", body={"data": "c2VjcmV0"}))
    assert set(line) == {"ts", "level", "logger", "msg"}
    assert "s3cr3t" not in json.dumps(line)
    assert "c2VjcmV0" not in json.dumps(line)


def test_stack_info_is_a_field():
    rec = record("where")
    rec.stack_info = "Stack (most recent call last):\n  File x"
    _, line = emitted(rec)
    assert line["stack"].startswith("Stack (most recent call last):")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [([], "text"), (["--log-format", "json"], "json"), (["--log-format=text"], "text")],
)
def test_the_flag_defaults_to_text(argv, expected):
    import argparse

    parser = argparse.ArgumentParser()
    add_controller_parser(parser.add_subparsers())
    assert parser.parse_args(["controller", *argv]).log_format == expected


def test_the_flag_refuses_another_format(capsys):
    import argparse

    parser = argparse.ArgumentParser()
    add_controller_parser(parser.add_subparsers())
    with pytest.raises(SystemExit):
        parser.parse_args(["controller", "--log-format", "yaml"])
    assert "invalid choice: 'yaml'" in capsys.readouterr().err


def test_a_pass_sets_its_fields_and_puts_back_what_was_there_even_when_it_raises():
    assert dict(logs.current()) == {}
    inside: dict[str, str] = {}

    def failing_pass() -> str:
        with logs.job_pass("GenericJob", "ns", "a") as rid:
            logs.bind(uid="uid-a")
            inside.update(logs.current())
            raise RuntimeError(rid)

    with pytest.raises(RuntimeError) as raised:
        failing_pass()
    first = str(raised.value)
    assert inside == {"kind": "GenericJob", "namespace": "ns", "job": "a", "uid": "uid-a", "reconcileID": first}
    assert dict(logs.current()) == {}
    with logs.job_pass("GenericJob", "ns", "a") as second:
        assert "uid" not in logs.current()  # the uid was the first pass's
    assert second != first


@pytest.mark.asyncio
async def test_tasks_a_pass_starts_keep_the_job_or_nothing_but_never_the_pass():
    seen: dict[str, dict[str, str]] = {}

    async def note(name: str) -> None:
        await asyncio.sleep(0)
        seen[name] = dict(logs.current())

    loop = asyncio.get_running_loop()
    with logs.job_pass("GenericJob", "ns", "a"):
        logs.bind(uid="u")
        awaited = asyncio.create_task(note("awaited"))  # part of the pass: it keeps everything
        stream = logs.outside_pass(keep_job=True).run(loop.create_task, note("stream"))
        watch = logs.outside_pass().run(loop.create_task, note("watch"))
        await asyncio.gather(awaited, stream, watch)
    assert seen["awaited"]["reconcileID"]
    assert seen["stream"] == {"kind": "GenericJob", "namespace": "ns", "job": "a", "uid": "u"}
    assert seen["watch"] == {}


class Lines(logging.Handler):
    """The JSON lines the controller logs, as the json format writes them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logs.JsonFormatter())
        self.lines: list[dict] = []

    def emit(self, rec: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(rec)))


def _job(name: str, uid: str) -> dict:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": "1",
                     "creationTimestamp": "2026-12-01T10:00:00Z"},
        "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1,
                                   "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}}]},
    }  # fmt: skip


@pytest.mark.asyncio
async def test_every_line_of_a_workers_pass_names_the_job_and_the_pass_and_none_after_it():
    """The real worker and pass: the job's pods cannot be created (nothing answers at the API
    server's address), so each pass logs its failure; those lines carry the job, its uid and a
    reconcile id of their own, and once the worker is stopped its context holds nothing."""
    controller = offline_controller(workers=1)
    controller.informers[("GenericJob", "ns")].cache[("ns", "train")] = _job("train", "uid-train")
    handler = Lines()
    runner_log = logging.getLogger("airflow_t9k.controller.runner")
    runner_log.addHandler(handler)
    try:
        controller.queue.add(("GenericJob", "ns", "train"))
        worker = asyncio.create_task(controller._worker())
        for _ in range(500):
            if len([ln for ln in handler.lines if "reconcile of" in ln["msg"]]) >= 2:
                break
            await asyncio.sleep(0.02)
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)
    finally:
        runner_log.removeHandler(handler)
        await controller.kube.close()
    failed = [ln for ln in handler.lines if "reconcile of" in ln["msg"]]
    assert len(failed) >= 2, handler.lines
    for line in failed:
        assert line.items() >= {"kind": "GenericJob", "namespace": "ns", "job": "train", "uid": "uid-train"}.items()
        assert line["level"] == "warning"
    assert len({ln["reconcileID"] for ln in failed}) == len(failed)  # one id a pass
    assert dict(logs.current()) == {}
