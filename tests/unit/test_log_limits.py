"""Every read of a pod's log names limitBytes (issue 29, 8): the UI's tail, the task's and the
trigger's tails of failed replicas. A replica printing gigabytes (or one endless line) costs the
reader a bounded answer. The reads are caught at the transport, with what each one asks."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from airflow_t9k.api.paths import LOG_LIMIT_BYTES
from airflow_t9k.ui.reader import UI_LOG_BYTES, Reader


def test_the_ui_tail_names_a_byte_limit():
    asked: list[dict[str, str]] = []
    reader = Reader(lambda method, path, query=None, **_: asked.append(dict(query or [])) or "x", kinds=["GenericJob"])
    reader.log("ns", "p", 2000)
    assert asked == [{"tailLines": "2000", "timestamps": "false", "limitBytes": str(UI_LOG_BYTES)}]


def test_the_tasks_tail_names_a_byte_limit(monkeypatch):
    from airflow_t9k.hooks.t9k import T9kHook

    asked: list[dict[str, Any]] = []

    def call_api(path: str, method: str, query_params: list, **_: Any) -> SimpleNamespace:
        asked.append(dict(query_params))
        return SimpleNamespace(stream=lambda *_, **__: iter([b"li", b"ne\n"]), release_conn=lambda: None)

    monkeypatch.setattr(T9kHook, "api_client", property(lambda self: SimpleNamespace(call_api=call_api)))
    hook = T9kHook(conn_id="kubernetes_default")
    assert hook.read_log_tail("p", "ns", None) == "line\n"  # the whole log: still bounded
    hook.read_log_tail("p", "ns", 50, timestamps=True)
    assert [q.get("limitBytes") for q in asked] == [LOG_LIMIT_BYTES, LOG_LIMIT_BYTES]
    assert asked[1]["tailLines"] == 50


def test_the_triggers_tail_names_a_byte_limit(monkeypatch):
    from airflow_t9k.hooks.t9k import AsyncT9kHook

    asked: list[dict[str, Any]] = []

    class Content:
        async def iter_any(self) -> Any:
            for chunk in (b"li", b"ne\n"):
                yield chunk

    class Resp:
        status = 200
        content = Content()

        def release(self) -> None:
            pass

    class FakeKube:
        async def _send(self, method: str, path: str, *, query: dict[str, Any], **_: Any) -> Resp:
            asked.append(dict(query))
            return Resp()

    async def kube(self: Any) -> FakeKube:
        return FakeKube()

    monkeypatch.setattr(AsyncT9kHook, "kube", kube)
    hook = AsyncT9kHook(conn_id="kubernetes_default")
    assert asyncio.run(hook.read_log_tail("p", "ns", None)) == "line\n"
    assert asked == [{"limitBytes": LOG_LIMIT_BYTES}]
