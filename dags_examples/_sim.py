"""Pod annotations that tell kwok how simulated replicas end (see README, "Driving pod outcomes").

On a real cluster these annotations are inert: drop them and the pods run your code.
"""

from __future__ import annotations


def simulate(duration: str = "3s", fail_pods: str | None = None, exit_code: int | None = None) -> dict[str, str]:
    out = {"sim.t9k.test/duration": duration}
    if fail_pods:
        out["sim.t9k.test/fail-pods"] = fail_pods
    if exit_code is not None:
        out["sim.t9k.test/exit-code"] = str(exit_code)
    return out
