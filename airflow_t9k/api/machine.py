"""TI-style machine types (seed 004): ``aUbGcP`` = a CPUs, b G of memory, c GPUs.

Seed 004 writes memory as ``2G`` and the Kubernetes quantity is written the same way: ``2G``
(10^9 bytes), not ``2Gi``; a cluster's quota and the user reading the pod see the seed's number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_PATTERN = re.compile(r"^(?P<cpu>\d+(?:\.\d+)?)U(?P<mem>\d+(?:\.\d+)?)G(?P<gpu>\d+)P$")
GPU_RESOURCE = "nvidia.com/gpu"


class InvalidMachineType(ValueError):
    """The machine type is not of the form aUbGcP."""


@dataclass(frozen=True)
class MachineType:
    cpu: float
    memory_g: float
    gpu: int

    def resources(self) -> dict[str, Any]:
        """Container ``resources``; a 0 means "not specified" (e.g. ``0U0G1P`` is one GPU)."""
        amounts: dict[str, str] = {}
        if self.cpu:
            amounts["cpu"] = _num(self.cpu)
        if self.memory_g:
            amounts["memory"] = f"{_num(self.memory_g)}G"
        if self.gpu:
            amounts[GPU_RESOURCE] = str(self.gpu)
        return {"requests": dict(amounts), "limits": dict(amounts)} if amounts else {}


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def parse_machine_type(text: str) -> MachineType:
    m = _PATTERN.match(str(text).strip())
    if not m:
        raise InvalidMachineType(
            f"machine type {text!r} is not of the form aUbGcP (a CPUs, b G of memory, c GPUs), e.g. '2U8G1P' or '0U0G1P'"
        )
    # 0U0G0P asks for nothing in particular: seed 004's table makes 0 "the default" and an
    # empty type "defaults, no GPU", so it is the empty type written out (resources() is {}).
    return MachineType(float(m["cpu"]), float(m["mem"]), int(m["gpu"]))
