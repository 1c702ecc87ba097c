"""aten: torch.mm (cuBLAS on a GPU), the baseline every result is compared with."""

from __future__ import annotations

import torch

from ..device import DeviceInfo
from ..problem import Problem
from ..configs import AtenConfig
from ..epilogue import EpilogueArgs, apply_

NAME = "aten"
CONFIG = AtenConfig


def space(problem: Problem, device: DeviceInfo, kind: str = "default"):
    return [AtenConfig()], []


def validate(problem: Problem, cfg: AtenConfig) -> None:
    return None


def constraint(cfg: AtenConfig, problem: Problem, device: DeviceInfo) -> str | None:
    return None


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
