"""aten: torch.mm (cuBLAS on a GPU), the baseline every result is compared with; for scaled_mm
problems torch._scaled_mm (cuBLASLt; row-wise scaling runs CUTLASS's f8f8bf16_rowwise on sm90);
for bmm problems torch.bmm (cuBLAS's strided-batched GEMM)."""

from __future__ import annotations

import functools

import torch

from ..device import DeviceInfo
from ..problem import Problem
from ..configs import AtenConfig, fp8_device_reason, prune
from ..epilogue import EpilogueArgs, apply_
from .base import Unsupported

NAME = "aten"
CONFIG = AtenConfig
INDUCTOR_TEMPLATE = "aten::mm"  # cuBLAS among Inductor's candidates
INDUCTOR_BMM_TEMPLATE = "aten::bmm"  # (tuned_bmm's extern choice; checked in inductor_export)
# tuned_scaled_mm's extern choice (torch/_inductor/kernel/mm.py: aten__fp8_mm, ExternKernelChoice(
# torch._scaled_mm, "at::_scaled_mm_out"), whose uid is "aten::" + "_scaled_mm").
INDUCTOR_SCALED_MM_TEMPLATE = "aten::_scaled_mm"


def space(problem: Problem, device: DeviceInfo, kind: str = "default"):
    return prune([AtenConfig()], problem, device, constraint)


def scaled_reason(problem: Problem) -> str | None:
    """Why torch._scaled_mm cannot take a scaled_mm ``problem`` (None when it can). Its CUDA
    checks (torch 2.11 and 2.13, aten Blas.cpp and torch/_meta_registrations.py
    _check_scaled_mm_sizes): A row-major and B column-major (cuBLASLt's fp8 GEMM is "TN" only:
    both operands K-major), K and N multiples of 16; row-wise scales need a bf16 output (the
    CUTLASS rowwise kernel writes bf16 only). The 16-byte alignment of both operands is
    cuBLASLt's (fp8 needs 16-byte aligned pointers). ``pad+aten`` runs on padded K-major copies
    (Problem.padded), so only the out_dtype rule is final."""
    if problem.op != "scaled_mm":
        return None
    if problem.layout_a != "row" or problem.layout_b != "col":
        return (f"torch._scaled_mm needs A row-major and B column-major (cuBLASLt's fp8 GEMM is TN only); "
                f"A is {problem.layout_a}, B {problem.layout_b}: pad+aten copies to that layout")
    if problem.k % 16 or problem.n % 16:
        return f"torch._scaled_mm needs K and N multiples of 16 (K={problem.k}, N={problem.n}): pad+aten pads them"
    if not (problem.aligned_a and problem.aligned_b):
        return "cuBLASLt's fp8 GEMM needs 16-byte aligned operands: pad+aten copies them"
    if problem.scale == "row" and problem.out_dtype != "bfloat16":
        return (f"torch._scaled_mm's row-wise scaling writes bf16 only (CUTLASS f8f8bf16_rowwise), "
                f"not {problem.out_dtype}")
    return None


def validate(problem: Problem, cfg: AtenConfig) -> None:
    reason = scaled_reason(problem)
    if reason:
        raise ValueError(reason)


def constraint(cfg: AtenConfig, problem: Problem, device: DeviceInfo) -> str | None:
    # fp8 below sm_89 first: cuBLASLt's fp8 GEMM (torch._scaled_mm) needs Ada or Hopper, as Triton's
    # fp8 dot does (configs.fp8_device_reason); the space offered cuBLAS there all the same.
    return fp8_device_reason(problem, device) or scaled_reason(problem)


def plan(m: int, n: int, k: int, cfg: AtenConfig, sms: int | None = None) -> dict:
    """A library call: no grid of ours, no split, no workspace."""
    return {"grid": None, "tiles": 0, "splits": 1, "k_per_split": k, "workspace_bytes": 0}


def run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: AtenConfig, *,
        allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None) -> None:
    """torch.mm into ``out``. For float32 inputs this follows torch's own tf32 setting
    (torch.backends.cuda.matmul), which is off by default. The ``epilogue`` runs as torch ops:
    the bias through torch.addmm (cuBLAS adds it in its own epilogue), then the activation
    and the residual in place on ``out`` (so in ``out``'s dtype, not fp32 as in the Triton
    families: a 16-bit output is rounded up to three times instead of once). With scales in the
    ``epilogue`` (a scaled_mm problem): torch._scaled_mm."""
    if epilogue is not None and epilogue.spec.scale != "none":
        _scaled_mm(a, b, out, epilogue)
        return
    if a.dim() == 3:
        _bmm(a, b, out)
        apply_(out, epilogue)
        return
    if out.dtype == a.dtype:
        if epilogue is not None and epilogue.bias is not None:
            torch.addmm(epilogue.bias, a, b, out=out)
            apply_(out, epilogue, bias_done=True)
        else:
            torch.mm(a, b, out=out)
            apply_(out, epilogue)
        return
    _out_dtype(torch.mm, a, b, out)
    apply_(out, epilogue)


def _scaled_mm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, epilogue: EpilogueArgs) -> None:
    """torch._scaled_mm into ``out``. Scales arrive flat (gemmtune.scaled.bind_scales) and go
    back to torch's shapes: one element each, or (M, 1) and (1, N). A bf16 output takes the bias
    in cuBLASLt's epilogue; an fp32 one gets it added afterwards (torch._scaled_mm wants a bf16
    bias for an fp32 output, which would round an fp32 bias)."""
    sa, sb = epilogue.scale_a, epilogue.scale_b
    if epilogue.spec.scale == "row":
        if a.device.type == "cpu" and not cpu_rowwise_scaled_mm():
            raise ValueError(f"torch {torch.__version__}'s CPU _scaled_mm takes per-tensor scales only: row-wise "
                             "scales need a GPU, a newer torch (2.13 has them), or a Triton family")
        sa, sb = sa.view(-1, 1), sb.view(1, -1)
    fused_bias = epilogue.bias if out.dtype == torch.bfloat16 else None
    torch._scaled_mm(a, b, sa, sb, bias=fused_bias, out_dtype=out.dtype, out=out)
    rest = epilogue.spec.__class__(bias=epilogue.bias is not None and fused_bias is None,
                                   activation=epilogue.spec.activation, residual=epilogue.residual is not None)
    if not rest.is_none:
        apply_(out, EpilogueArgs(rest, epilogue.bias, epilogue.residual))


@functools.lru_cache(maxsize=None)
def cpu_rowwise_scaled_mm() -> bool:
    """Whether this torch's CPU ``_scaled_mm`` takes row-wise scales (2.13 does; 2.11 stops at an
    internal assert, "only supports per-tensor scaling for CPU backend"). Asked once, on 16x16."""
    a = torch.ones(16, 16).to(torch.float8_e4m3fn)
    try:
        torch._scaled_mm(a, a.t(), torch.ones(16, 1), torch.ones(1, 16), out_dtype=torch.bfloat16)
    except RuntimeError:
        return False
    return True


def _bmm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    """torch.bmm into ``out`` (3-D)."""
    if out.dtype == a.dtype:
        torch.bmm(a, b, out=out)
    else:
        _out_dtype(torch.bmm, a, b, out)


def _out_dtype(op, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    # 16-bit inputs with an fp32 output (op: torch.mm or torch.bmm): cuBLAS does it natively where
    # torch exposes it (mm.dtype / bmm.dtype, CUDA only); elsewhere upcast, exact but slower.
    if a.is_cuda:
        try:
            out.copy_(op(a, b, out_dtype=out.dtype))
            return
        except (TypeError, RuntimeError, NotImplementedError):
            pass
    op(a.to(out.dtype), b.to(out.dtype), out=out)


def prepare(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: AtenConfig, *,
            allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None):
    """None: torch.mm has no launch of ours to prepare."""
    return None


def features_row(facts: tuple, choice) -> tuple:
    m, n, k, al_a, al_b = facts
    return (choice.pad, 0, 0, 0, 0, 0, 0, 1, 0, m, n, k, k, al_a, al_b)


def inductor_export(choice, problem: Problem, sm_count: int | None = None) -> dict:
    if problem.op == "scaled_mm":
        # tuned_scaled_mm hands this choice out_dtype and use_fast_accum as kwarg_overrides, which
        # a lookup hit does not apply (torch 2.13 LookupTableChoices._create_lookup_choices): Inductor
        # calls _scaled_mm(a, b, scale_a, scale_b[, bias], out=buf), which takes the output's dtype
        # from ``out`` (ATen checks out_dtype only when it is given) and use_fast_accum=False, what
        # gemmtune's aten measured. A torch.dtype has no JSON form, so none is written.
        if problem.bias and problem.out_dtype == "float32":
            # That call passes the bias, and CUDA's _scaled_mm refuses one with a float32 output
            # (aten/src/ATen/native/cuda/Blas.cpp); gemmtune's aten adds it after the call instead.
            raise Unsupported("aten for scaled_mm with a bias and a float32 output: Inductor's aten::_scaled_mm "
                              "passes the bias to torch._scaled_mm, which refuses it on CUDA (\"Bias is not "
                              "supported when out_dtype is set to Float32\")")
        return {"template_id": INDUCTOR_SCALED_MM_TEMPLATE}
    if problem.op == "addmm":
        raise Unsupported("aten for addmm: Inductor looks cuBLAS (aten::addmm) up under another key and "
                          "keeps it on a miss, so it stays among Inductor's candidates without an entry")
    return {"template_id": INDUCTOR_BMM_TEMPLATE if problem.op == "bmm" else INDUCTOR_TEMPLATE}
