"""Kernel families. Each module holds one family: its launcher and its config space.

A family module exposes ``NAME``, ``CONFIG`` (its config dataclass),
``space(problem, device, kind) -> (kept, rejected)``, ``constraint(cfg, problem,
device) -> reason | None``, ``validate(problem, cfg)`` (raises ValueError when the
family cannot run the config at all) and ``run(a, b, out, cfg, *, allow_tf32,
workspace)``.
"""

from types import ModuleType

from . import aten, decompose_k, splitk, triton_mm

FAMILIES: dict[str, ModuleType] = {m.NAME: m for m in (triton_mm, splitk, decompose_k, aten)}
TRITON_FAMILIES = ("triton_mm", "splitk", "decompose_k")


def get(name: str) -> ModuleType:
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown kernel family {name!r}; known: {', '.join(FAMILIES)}") from None
