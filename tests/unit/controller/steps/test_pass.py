"""The pass itself: the ordered list of steps, and what ending a pass skips."""

from __future__ import annotations

import pytest

from airflow_t9k.controller.reconcile.passstate import PassState, Step, run
from airflow_t9k.controller.reconcile.plan import STEPS
from tests.builders import generic
from tests.unit.controller.steps.state import state

ORDER = ["deleting", "expire", "legacy", "template", "shape", "observe", "finished", "avoid", "strategy", "render",
         "scheduler", "pause", "admission", "gang", "podgroup", "start", "deadline", "verdict", "stall", "children", "end",
         "group-restart", "replicas", "failures", "tasks", "wake", "seal", "usage", "progress", "overrun", "public"]  # fmt: skip


def test_the_steps_are_the_documented_order_of_decisions():
    assert [s.name for s in STEPS] == ORDER
    # Every step after "seal" works on the sealed plan, so runs also after a step ended the pass.
    assert [s.name for s in STEPS if s.always] == ORDER[ORDER.index("seal") :]


def test_the_design_doc_lists_the_same_steps():
    from pathlib import Path

    doc = (Path(__file__).parents[4] / "docs" / "design.md").read_text()
    section = doc[doc.index("## One pass") :]
    section = section[: section.index("\n## ", 1)]
    listed = [line.split("`")[1] for line in section.splitlines() if line.startswith("| `")]
    assert listed == ORDER


def _mark(name: str, end: bool = False):
    def step(p: PassState) -> PassState:
        p.events.append(name)  # type: ignore[arg-type]
        return p.end() if end else p

    return step


@pytest.mark.parametrize(
    ("steps", "ran", "ended"),
    [
        ((Step("a", _mark("a")), Step("b", _mark("b")), Step("z", _mark("z"), always=True)), ["a", "b", "z"], False),
        ((Step("a", _mark("a", end=True)), Step("b", _mark("b")), Step("z", _mark("z"), always=True)), ["a", "z"], True),
        ((Step("a", _mark("a")), Step("b", _mark("b", end=True)), Step("c", _mark("c")), Step("y", _mark("y"), always=True),
          Step("z", _mark("z"), always=True)), ["a", "b", "y", "z"], True),
    ],
)  # fmt: skip
def test_a_step_that_ends_the_pass_skips_the_decision_steps_but_not_the_always_ones(steps, ran, ended):
    p = run(steps, state(generic()))
    assert p.events == ran
    assert p.ended is ended


def test_a_step_may_return_another_state():
    other = state(generic("other"))
    p = run((Step("swap", lambda p: other),), state(generic()))
    assert p is other


def test_the_pure_core_imports_no_client_and_no_airflow():
    import subprocess
    import sys

    code = (
        "import sys; import airflow_t9k.controller.reconcile.plan; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'airflow', 'kubernetes', 'kubernetes_asyncio', 'aiohttp'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
