"""aten: torch.mm (cuBLAS on a GPU), the baseline every result is compared with."""

from __future__ import annotations

import torch

from ..device import DeviceInfo
from ..problem import Problem
from ..configs import AtenConfig
from ..epilogue import EpilogueArgs, apply_
from .base import Unsupported

NAME = "aten"
CONFIG = AtenConfig
INDUCTOR_TEMPLATE = "aten::mm"  # cuBLAS among Inductor's candidates


def space(problem: Problem, device: DeviceInfo, kind: str = "default"):
    return [AtenConfig()], []


def validate(problem: Problem, cfg: AtenConfig) -> None:
    return None


def constraint(cfg: AtenConfig, problem: Problem, device: DeviceInfo) -> str | None:
    return None


def plan(m: int, n: int, k: int, cfg: AtenConfig, sms: int | None = None) -> dict:
    """A library call: no grid of ours, no split, no workspace."""
    return {"grid": None, "tiles": 0, "splits": 1, "k_per_split": k, "workspace_bytes": 0}


def run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: AtenConfig, *,
        allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None) -> None:
    """torch.mm into ``out``. For float32 inputs this follows torch's own tf32 setting
    (torch.backends.cuda.matmul), which is off by default. The ``epilogue`` runs as torch ops:
    the bias through torch.addmm (cuBLAS adds it in its own epilogue), then the activation
    and the residual in place on ``out`` (so in ``out``'s dtype, not fp32 as in the Triton
    families: a 16-bit output is rounded up to three times instead of once)."""
    if out.dtype == a.dtype:
        if epilogue is not None and epilogue.bias is not None:
            torch.addmm(epilogue.bias, a, b, out=out)
            apply_(out, epilogue, bias_done=True)
        else:
            torch.mm(a, b, out=out)
            apply_(out, epilogue)
        return
    _mm_out_dtype(a, b, out)
    apply_(out, epilogue)


def _mm_out_dtype(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    # 16-bit inputs with an fp32 output: cuBLAS does it natively where torch exposes it
    # (mm.dtype, CUDA only); elsewhere upcast, which is exact but slower.
    if a.is_cuda:
        try:
            out.copy_(torch.mm(a, b, out_dtype=out.dtype))
            return
        except (TypeError, RuntimeError, NotImplementedError):
            pass
    torch.mm(a.to(out.dtype), b.to(out.dtype), out=out)


def prepare(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: AtenConfig, *,
            allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None):
    """None: torch.mm has no launch of ours to prepare."""
    return None


def features_row(facts: tuple, choice) -> tuple:
    m, n, k, al_a, al_b = facts
    return (choice.pad, 0, 0, 0, 0, 0, 0, 1, 0, m, n, k, k, al_a, al_b)


def inductor_export(choice, problem: Problem, sm_count: int | None = None) -> dict:
    if problem.op == "addmm":
        raise Unsupported("aten for addmm: Inductor looks cuBLAS (aten::addmm) up under another key and "
                          "keeps it on a miss, so it stays among Inductor's candidates without an entry")
    return {"template_id": INDUCTOR_TEMPLATE}
