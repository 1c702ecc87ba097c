"""How gemmtune's Triton kernels multiply fp32 operands with TF32 off (a process-wide setting).

Pure: no Triton import, so planning and the analytic model read it too.
"""

from __future__ import annotations

import contextlib
import contextvars
import os

import torch

# How the Triton families' tl.dot multiplies fp32 with TF32 off (skinny's CUDA-core path is
# IEEE FMA either way). "tf32x3" (the default) splits each operand into a TF32 high part and a
# TF32 remainder and sums three tensor-core products (hi*hi + hi*lo + lo*hi) in fp32: on the
# H200 (session 48, scripts/exp_fp32x3.py) the tuned winners ran 1.48-2.02x cuBLAS's SGEMM on 7
# of 11 fp32 shapes (1.13x on one, cuBLAS kept on three), 1.4-1.9x IEEE Triton's best on six of
# them (0.92x on the 64x64x32768 split-K, a memory-bound one), with a relative error against
# fp64 of 1.8e-7 to 2.4e-7 where cuBLAS's SGEMM had 1.3e-7 to 1.1e-6 (TF32 alone: 2.9e-4), and
# an inf in A giving the same infs as SGEMM. "ieee": fp32 FMA on CUDA cores, SGEMM's arithmetic.
# Read once per process, at the first fp32 launch; tensor cores need sm_80 (fp32_precision).
FP32_PRECISION_ENV = "GEMMTUNE_FP32_PRECISION"
FP32_PRECISIONS = ("tf32x3", "ieee")


def fp32_setting(environ=os.environ) -> str:
    """The fp32 (TF32 off) product the environment asks for; a clear error for any other value.

    >>> fp32_setting({}), fp32_setting({FP32_PRECISION_ENV: "ieee"})
    ('tf32x3', 'ieee')
    """
    v = environ.get(FP32_PRECISION_ENV, "").strip().lower() or FP32_PRECISIONS[0]
    if v not in FP32_PRECISIONS:
        raise ValueError(f"{FP32_PRECISION_ENV}={environ[FP32_PRECISION_ENV]!r}: expected one of "
                         f"{', '.join(FP32_PRECISIONS)} (how fp32 products with TF32 off are computed)")
    return v


_FP32_ON_DEVICE: list[str] = []  # the setting as this process's GPU can run it, decided at first use
# The arithmetic assumed inside ``assume_fp32_precision`` (None: this process's own).
_ASSUMED: contextvars.ContextVar[str | None] = contextvars.ContextVar("gemmtune_fp32_assumed", default=None)


@contextlib.contextmanager
def assume_fp32_precision(setting: str | None):
    """Within the block, ``fp32_precision()`` (and so ``runs_3xtf32``, ``pads_b_kmajor`` and the
    analytic model's fp32 estimates) answers ``setting`` ("tf32x3" or "ieee") instead of this
    process's setting; None leaves it as it is. For work about timings made under a known
    arithmetic, whatever this process's: training features of stored rows (model.data.timed_as).
    Never around a launch: the kernels' own arithmetic stays the process's.

    >>> with assume_fp32_precision("ieee"):
    ...     inner = fp32_precision()
    >>> inner
    'ieee'
    """
    if setting is None:
        yield
        return
    if setting not in FP32_PRECISIONS:
        raise ValueError(f"fp32 precision {setting!r}: expected one of {', '.join(FP32_PRECISIONS)}")
    token = _ASSUMED.set(setting)
    try:
        yield
    finally:
        _ASSUMED.reset(token)


def fp32_precision() -> str:
    """How this process's Triton kernels multiply fp32 with TF32 off: the setting, or "ieee"
    on a GPU older than sm_80 (no TF32 tensor cores: Triton would run the three products on
    CUDA cores, three times IEEE's work). The interpreter (CPU) takes the setting as given.
    A value of the variable other than those named raises ValueError at the first fp32 launch
    (the command line checks it first: gemmtune.cli.main). Inside ``assume_fp32_precision``: the
    arithmetic assumed there."""
    assumed = _ASSUMED.get()
    if assumed is not None:
        return assumed
    if not _FP32_ON_DEVICE:
        v = fp32_setting()
        if v == "tf32x3" and os.environ.get("TRITON_INTERPRET") != "1" and torch.cuda.is_available() \
                and torch.cuda.get_device_capability() < (8, 0):
            v = "ieee"
        _FP32_ON_DEVICE.append(v)
    return _FP32_ON_DEVICE[0]


# The results store records, per row, which of the two fp32 arithmetics timed it (ResultRow
# .fp32_precision): 3xTF32 runs 1.5-2x faster than IEEE on the same kernel, so a row timed under
# one is no measurement for a process running the other, and the tuner measures it again.
def precision_tag(problem, setting: str | None = None) -> str:
    """The store's ``fp32_precision`` tag of a result for ``problem`` (a gemmtune Problem): "" where
    the problem's arithmetic does not depend on the fp32 setting (not fp32, or TF32 allowed), else
    ``setting`` ("tf32x3" or "ieee"; None: this process's ``fp32_precision()``, read only then).

    >>> from gemmtune.problem import Problem
    >>> precision_tag(Problem.from_sizes(8, 8, 8, "fp32"), "ieee")
    'ieee'
    >>> precision_tag(Problem.from_sizes(8, 8, 8, "fp32", allow_tf32=True), "ieee")
    ''
    >>> precision_tag(Problem.from_sizes(8, 8, 8, "bf16"), "ieee")
    ''
    """
    return key_precision_tag(problem.key, setting)


def key_precision_tag(problem_key: str, setting: str | None = None) -> str:
    """``precision_tag`` from a problem key alone (the store holds keys): the key's input dtype
    (third ':'-part, before '->') is "fp32" exactly when the inputs are fp32 with TF32 off
    ("fp32+tf32" when allowed). A key of another form tags "".

    >>> key_precision_tag("mm:M16-N32-K32:fp32->fp32:row.a/row.a", "tf32x3")
    'tf32x3'
    >>> key_precision_tag("mm:M16-N32-K32:fp32+tf32->fp32:row.a/row.a", "tf32x3")
    ''
    >>> key_precision_tag("bmm:B2-M16-N32-K32:bf16->bf16:row.a/row.a", "tf32x3"), key_precision_tag("k", "ieee")
    ('', '')
    """
    parts = problem_key.split(":")
    if len(parts) < 3 or parts[2].partition("->")[0] != "fp32":
        return ""
    if setting is None:
        return fp32_precision()
    if setting not in FP32_PRECISIONS:
        raise ValueError(f"fp32 precision {setting!r}: expected one of {', '.join(FP32_PRECISIONS)}")
    return setting


def runs_3xtf32_dtype(dtype, allow_tf32: bool) -> bool:
    """Whether this process's Triton kernels multiply operands of ``dtype`` (a torch dtype or
    gemmtune's name of one) as 3xTF32: fp32, TF32 not allowed, and the setting 3xTF32
    (``fp32_precision``)."""
    return dtype in (torch.float32, "float32") and not allow_tf32 and fp32_precision() == "tf32x3"


def runs_3xtf32(problem) -> bool:
    """``runs_3xtf32_dtype`` for a gemmtune Problem."""
    return runs_3xtf32_dtype(problem.dtype, problem.allow_tf32)


# 3xTF32 with B row-major (N-contiguous) runs about a third slower than with B K-major: Hopper's
# TF32 wgmma reads B from shared memory K-major only, so Triton writes each B tile's split parts
# there transposed, one 4-byte store at a time (32 scalar STS against 24 STS.128 a K step, sm_90
# SASS of BM128-BN64-BK32). On the H200 (session 49, call 5; triton_mm's default space in both
# layouts, the same shapes): 4096^3 2438 against 1631 us, 2048^3 324 against 208, 1024x4096x4096
# 635 against 408. So a pad+ choice of such a problem copies B K-major (kernels.run_choice,
# Problem.padded), as fp8's pad+ choices do: torch's transposed copy of a 4096x4096 fp32 B took
# 124 us, 2048x2048 34.6 us.
def pads_b_kmajor(dtype: torch.dtype, allow_tf32: bool) -> bool:
    """Whether a 2-D pad+ choice copies B K-major (column-major) for operands of ``dtype``: where
    they run as 3xTF32 (``runs_3xtf32_dtype``)."""
    return runs_3xtf32_dtype(dtype, allow_tf32)


def pads_b_kmajor_problem(problem) -> bool:
    """``pads_b_kmajor`` for a gemmtune Problem: an mm or addmm that ``runs_3xtf32`` (a bmm's
    pad+ copies stay row-major)."""
    return problem.op in ("mm", "addmm") and runs_3xtf32(problem)
