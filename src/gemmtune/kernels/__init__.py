"""Kernel families. Each module holds one family: its launcher and its config space.

A family module exposes ``NAME``, ``CONFIG`` (its config dataclass),
``space(problem, device, kind) -> (kept, rejected)``, ``constraint(cfg, problem,
device) -> reason | None``, ``validate(problem, cfg)`` (raises ValueError when the
family cannot run the config at all) and ``run(a, b, out, cfg, *, allow_tf32,
workspace)``.
"""

from types import ModuleType

import torch

from . import aten, decompose_k, splitk, triton_mm

FAMILIES: dict[str, ModuleType] = {m.NAME: m for m in (triton_mm, splitk, decompose_k, aten)}
TRITON_FAMILIES = ("triton_mm", "splitk", "decompose_k")


def get(name: str) -> ModuleType:
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown kernel family {name!r}; known: {', '.join(FAMILIES)}") from None


def aligned_copy(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself when its data pointer and leading stride are 16-byte aligned, else a
    copy with the same layout whose leading stride is padded to a multiple of 16 bytes."""
    from ..problem import operand_aligned, operand_layout

    rows, cols = t.shape
    es = t.element_size()
    if operand_aligned(t.data_ptr(), rows, cols, t.stride(), es):
        return t
    per = 16 // es if 16 % es == 0 else 1
    if operand_layout(rows, cols, t.stride()) == "col":
        lead = -(-rows // per) * per
        buf = torch.empty((cols, lead), dtype=t.dtype, device=t.device)
        view = buf[:, :rows].t()
    else:
        lead = -(-cols // per) * per
        buf = torch.empty((rows, lead), dtype=t.dtype, device=t.device)
        view = buf[:, :cols]
    view.copy_(t)
    return view


def run_choice(choice, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, *,
               allow_tf32: bool = False, workspace=None) -> None:
    """Run one choice into ``out`` (shapes already checked; M, N, K > 0)."""
    if choice.pad:
        a, b = aligned_copy(a), aligned_copy(b)
    get(choice.family).run(a, b, out, choice.config, allow_tf32=allow_tf32, workspace=workspace)
