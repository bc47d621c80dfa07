"""--event-loop: uvloop where installed (auto), asyncio's own on request, a clear error when
uvloop is asked for and missing."""

from __future__ import annotations

import asyncio
import signal
import sys

import pytest

from airflow_t9k.controller import cli


async def which_loop() -> str:
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


@pytest.mark.parametrize(("choice", "loop"), [("auto", "uvloop"), ("uvloop", "uvloop"), ("asyncio", "asyncio")])
def test_loop_choice(choice, loop):
    assert cli.loop_runner(choice)(which_loop()) == loop


def test_auto_without_uvloop_is_asyncio_and_uvloop_without_it_refuses(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now raises ImportError
    assert cli.loop_runner("auto")(which_loop()) == "asyncio"
    with pytest.raises(cli.RefuseToStart, match="uvloop is not installed"):
        cli.loop_runner("uvloop")


def test_the_option_parses():
    from airflow_t9k.cli import build_parser

    assert build_parser().parse_args(["controller"]).event_loop == "auto"
    assert build_parser().parse_args(["controller", "--event-loop", "asyncio"]).event_loop == "asyncio"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["controller", "--event-loop", "trio"])


@pytest.mark.parametrize("choice", ["uvloop", "asyncio"])
def test_sigterm_cancels_the_controller_task_on_either_loop(choice):
    """What main_async does with SIGTERM (the leader's release depends on it)."""

    async def main() -> str:
        task = asyncio.create_task(asyncio.sleep(30))
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
        loop.call_later(0.05, signal.raise_signal, signal.SIGTERM)
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled"
        finally:
            loop.remove_signal_handler(signal.SIGTERM)
        return "ran on"

    assert cli.loop_runner(choice)(main()) == "cancelled"
