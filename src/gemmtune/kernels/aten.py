"""aten: torch.mm (cuBLAS on a GPU), the baseline every result is compared with."""

from __future__ import annotations

import torch

from ..device import DeviceInfo
from ..problem import Problem
from ..configs import AtenConfig

NAME = "aten"
CONFIG = AtenConfig


def space(problem: Problem, device: DeviceInfo, kind: str = "default"):
    return [AtenConfig()], []


def validate(problem: Problem, cfg: AtenConfig) -> None:
    return None


def constraint(cfg: AtenConfig, problem: Problem, device: DeviceInfo) -> str | None:
    return None


def run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: AtenConfig, *,
        allow_tf32: bool = False, workspace=None) -> None:
    """torch.mm into ``out``. For float32 inputs this follows torch's own tf32 setting
    (torch.backends.cuda.matmul), which is off by default."""
    if out.dtype == a.dtype:
        torch.mm(a, b, out=out)
        return
    # 16-bit inputs with an fp32 output: cuBLAS does it natively where torch exposes it
    # (mm.dtype, CUDA only); elsewhere upcast, which is exact but slower.
    if a.is_cuda:
        try:
            out.copy_(torch.mm(a, b, out_dtype=out.dtype))
            return
        except (TypeError, RuntimeError, NotImplementedError):
            pass
    torch.mm(a.to(out.dtype), b.to(out.dtype), out=out)
