"""Reference check: is a kernel's output the product it claims to be?

The reference is a @ b (+ bias, for an addmm problem) in float64 on the inputs'
device; for scaled_mm, (a * scale_a) @ (b * scale_b) (+ bias) on the dequantized fp8
operands (gemmtune.scaled.reference). Two measures must both pass, each scaled by the dtype's tolerance:

* the relative Frobenius error ||out - ref|| / ||ref|| <= tol, which bounds the
  overall rounding, and
* the largest element error <= 10 * tol * rms(ref), which catches a few wrong or
  unwritten elements that a norm over millions of elements would average away. Each
  element is first allowed one unit in the last place of the output dtype at its own
  magnitude (``ulp_slack``): the correctly rounded product of a large element can miss
  by that much, and heavy-tailed outputs (scaled_mm's per-row x per-column scales put
  elements at 50-100x rms) would otherwise fail a kernel that is exact up to the cast.

NaN or inf anywhere in the output fails, and so does any in the reference (the inputs held
NaN or inf: nothing can be verified). Against an all-zero reference only an all-zero output passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .problem import Problem
from .scaled import TOLERANCES as FP8_TOLERANCES

# Relative-error tolerance by (input dtype, output dtype). Observed errors sit
# 3-10x under these: fp32 (exact fp32 products, fp32 sums) ~1e-6; tf32 ~3e-4;
# fp16 output rounding ~3e-4; bf16 output rounding ~2e-3.
TOLERANCE = {
    ("float32", "float32"): 1e-4,
    ("float32+tf32", "float32"): 5e-3,
    ("float16", "float16"): 2e-3,
    ("float16", "float32"): 1e-3,
    ("bfloat16", "bfloat16"): 1e-2,
    ("bfloat16", "float32"): 5e-3,
}
# scaled_mm (fp8 operands): against fp64 on the dequantized operands; why these values:
# gemmtune.scaled.TOLERANCES.
TOLERANCE.update(FP8_TOLERANCES)
MAX_ELEMENT_FACTOR = 10.0


def tolerance(problem: Problem) -> float:
    src = problem.dtype + ("+tf32" if problem.allow_tf32 else "")
    return TOLERANCE[(src, problem.out_dtype)]


def reference(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """a @ b (+ bias, broadcast over the rows) in float64 on the inputs' device; 3-D operands:
    torch.bmm's product, matrix by matrix."""
    if a.dim() == 3:
        if bias is not None:
            raise ValueError("bmm takes no bias")
        return torch.bmm(a.double(), b.double())
    if bias is None:
        return torch.mm(a.double(), b.double())
    return torch.addmm(bias.double(), a.double(), b.double())


@dataclass(frozen=True)
class Check:
    ok: bool
    rel_err: float
    max_err: float  # largest element error beyond one output ulp (ulp_slack), over rms(ref)
    reason: str = ""


def ulp_slack(dtype: torch.dtype) -> float:
    """One unit in the last place, relative, of ``dtype`` (bf16 2^-7, fp16 2^-10, fp32 2^-23):
    a correctly rounded result is within half of it, and the fp32 accumulator's own rounding
    before the cast takes less than the other half.

    >>> ulp_slack(torch.bfloat16)
    0.0078125
    """
    return float(torch.finfo(dtype).eps) if dtype.is_floating_point else 0.0


def compare(out: torch.Tensor, ref: torch.Tensor, tol: float) -> Check:
    if out.shape != ref.shape:
        return Check(False, math.inf, math.inf, f"output shape {tuple(out.shape)} != {tuple(ref.shape)}")
    if out.numel() == 0:
        return Check(True, 0.0, 0.0)
    o = out.double()
    if not torch.isfinite(o).all():
        bad = int((~torch.isfinite(o)).sum())
        return Check(False, math.inf, math.inf, f"{bad} of {o.numel()} outputs are NaN or inf")
    ref_bad = int((~torch.isfinite(ref)).sum())
    if ref_bad:
        # NaN or inf in the inputs make the fp64 reference non-finite, and every error measured against
        # it NaN: NaN > tol is False, so any finite output (a kernel that skipped the NaN's K block
        # included) passed. A correct output would hold the NaN too, which fails above: nothing passes.
        return Check(False, math.inf, math.inf, f"{ref_bad} of {ref.numel()} reference elements are NaN or "
                                                "inf (NaN or inf in the inputs): the output cannot be verified")
    diff = o - ref
    ref_norm = float(torch.linalg.vector_norm(ref))
    if ref_norm == 0.0:
        # An all-zero reference (a zero operand: a LoRA B at init) gives no scale to measure against.
        # The error relative to it is 0 for an all-zero output and unbounded for any other: taken as
        # absolute, an output of 4e-3 everywhere passed a 2x2 bf16 check.
        wrong = int((diff != 0).sum())
        if wrong:
            return Check(False, math.inf, math.inf, f"the reference is all zero and {wrong} of {o.numel()} "
                                                    f"outputs are not (largest {float(diff.abs().max()):.3g})")
        return Check(True, 0.0, 0.0)
    # One output ulp at the element's own magnitude is rounding, not a wrong element: measured
    # on the H200, every kernel, cuBLASLt's included, missed the max-element check at
    # 0.10-0.14 x rms on 2048x28672x4096 and 8192^3 fp8 -> bf16 with row-wise scales.
    slack = (diff.abs() - ulp_slack(out.dtype) * ref.abs()).clamp_min(0.0)
    rms = ref_norm / math.sqrt(ref.numel())
    rel = float(torch.linalg.vector_norm(diff)) / ref_norm
    mx = float(slack.max()) / rms
    if rel > tol:
        return Check(False, rel, mx, f"relative error {rel:.3g} > tolerance {tol:.3g}")
    if mx > MAX_ELEMENT_FACTOR * tol:
        return Check(False, rel, mx, f"largest element error {mx:.3g} x rms(ref) > "
                                     f"{MAX_ELEMENT_FACTOR * tol:.3g}")
    return Check(True, rel, mx)


def check(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, problem: Problem,
          bias: torch.Tensor | None = None, scales: tuple | None = None) -> Check:
    """Compare ``out`` with the float64 product of ``a`` and ``b`` (plus ``bias``, which an
    addmm problem needs: raises ValueError without it). A scaled_mm problem needs ``scales``
    (scale_a, scale_b) and compares with the product of the dequantized operands."""
    if problem.op == "scaled_mm":
        from .scaled import reference as scaled_reference

        if scales is None:
            raise ValueError("scaled_mm problem: scales=(scale_a, scale_b) are needed")
        if (bias is not None) != problem.bias:
            raise ValueError(f"scaled_mm problem {'with' if problem.bias else 'without'} a bias: "
                             f"a bias is {'needed' if bias is None else 'not taken'}")
        return compare(out, scaled_reference(a, b, *scales, bias), tolerance(problem))
    if (bias is not None) != (problem.op == "addmm"):
        raise ValueError(f"{problem.op} problem: a bias is {'needed' if bias is None else 'not taken'}")
    return compare(out, reference(a, b, bias), tolerance(problem))
