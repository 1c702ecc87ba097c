"""scaled_mm: fp8 GEMMs with fp32 scales, ``out = (a @ b) * scale_a * scale_b (+ bias)``.

The problem op ``scaled_mm`` (gemmtune.problem) multiplies an fp8 A (float8_e4m3fn, or
float8_e5m2 where a gradient sits on A's side) by an e4m3 B, accumulates in fp32 and applies
the scales to the fp32 accumulator before the bias and the cast to a bf16 or fp32 output,
as torch._scaled_mm does:

* ``tensor``: ``scale_a`` and ``scale_b`` are one fp32 each (shape (), (1,) or (1, 1));
* ``row``: per-token ``scale_a`` (M, 1) and per-channel ``scale_b`` (1, N), fp32 ((M,) and
  (N,) are taken too).

Every family runs it: ``aten`` calls torch._scaled_mm (cuBLASLt; CUTLASS for row-wise on
sm90), the Triton families apply the scales in their fused epilogue (gemmtune.epilogue,
SCALE constexpr). This module checks scales (``bind_scales``: a wrong shape, dtype, device
or a non-finite value is a clear error), makes the benchmark's scales (``make_scales``), the
fp64 reference on the dequantized operands (``reference``) and the public entry ``scaled_mm``.

Example (CUDA tensors: skipped where doctests run, on a CPU)::

    >>> import torch, gemmtune
    >>> x = torch.randn(16, 4096, device="cuda").to(torch.float8_e4m3fn)          # doctest: +SKIP
    >>> w = torch.randn(4096, 4096, device="cuda").to(torch.float8_e4m3fn)        # doctest: +SKIP
    >>> sx = torch.rand(16, 1, device="cuda") + 0.5                               # doctest: +SKIP
    >>> sw = torch.rand(1, 4096, device="cuda") + 0.5                             # doctest: +SKIP
    >>> y = gemmtune.scaled_mm(x, w.t(), sx, sw, out_dtype=torch.bfloat16)        # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path

import torch

from .autograd import needs_grad, not_differentiable, transformed
from .epilogue import Epilogue, EpilogueArgs, apply_
from .problem import (SCALED_OUT_DTYPES, SCALES, Problem, check_dense, check_not_negated, check_operands,
                      dtype_name)

FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)

# The tables scaled_mm was given by path, by resolved path: (mtime_ns, size) of the file read, and
# its LookupTable. A path was read and parsed (and every entry validated) on every call; a file
# rewritten since (another mtime or size) is read again.
_TABLES: dict[str, tuple[tuple[int, int], object]] = {}
_TABLES_LOCK = threading.Lock()


def scale_mode(m: int, n: int, scale_a: torch.Tensor, scale_b: torch.Tensor) -> str:
    """'tensor' when both scales hold one element, else 'row' (their shapes are checked by
    ``bind_scales``). M = 1 or N = 1 with one-element scales counts as tensor-wise: the
    product is the same either way."""
    for name, t in (("scale_a", scale_a), ("scale_b", scale_b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor (fp32), not {type(t).__name__}")
    return "tensor" if scale_a.numel() == 1 and scale_b.numel() == 1 else "row"


def _capturing(t: torch.Tensor) -> bool:
    """Whether ``t``'s GPU is capturing a CUDA graph on the current stream: the dispatcher's rule
    (``gemmtune.dispatch.capturing``, looked up there, where tests replace it). Reading a value back
    to the host is illegal in a capture (it raised, and invalidated the capture), and a check made
    while capturing would not run at replay anyway: the scales are checked on calls outside one."""
    from . import dispatch
    return dispatch.capturing(t)


def _flat(t: torch.Tensor, shapes: tuple, name: str, what: str) -> torch.Tensor:
    if tuple(t.shape) not in shapes:
        want = " or ".join(str(s) for s in shapes)
        raise ValueError(f"{name} must have shape {want} ({what}), got {tuple(t.shape)}")
    return t.reshape(-1).contiguous()


def bind_scales(m: int, n: int, scale_a: torch.Tensor, scale_b: torch.Tensor, *, device: torch.device,
                out_dtype: torch.dtype, bias: torch.Tensor | None = None, mode: str | None = None,
                check_finite: bool = True) -> EpilogueArgs:
    """Check scaled_mm's scales (and bias) for an (m, n) output; the EpilogueArgs every family takes.

    ``mode``: 'tensor' or 'row' (None: from the scales' sizes, ``scale_mode``). Raises TypeError
    (not a tensor, not float32, a bias not of the output's dtype) or ValueError (a wrong shape,
    another device, a NaN or infinite scale) naming what is wrong. ``check_finite`` reads the
    scales back to the host: a device sync, which a hot loop that trusts its scales may skip. It is
    skipped while the scales' GPU captures a CUDA graph (``_capturing``).
    """
    mode = mode or scale_mode(m, n, scale_a, scale_b)
    if mode not in SCALES:
        raise ValueError(f"scale mode must be one of {SCALES}, got {mode!r}")
    for name, t in (("scale_a", scale_a), ("scale_b", scale_b)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor (fp32), not {type(t).__name__}")
        if t.dtype != torch.float32:
            raise TypeError(f"{name} must be float32 (torch._scaled_mm's scales are fp32), got {t.dtype}")
        # (a sparse scale raised from deep inside: "reshape is not implemented for sparse tensors")
        check_dense(name, t, "scaled_mm reads")
        if t.device != device:
            raise ValueError(f"{name} must be on the operands' device {device}, got {t.device}")
        check_not_negated(name, t)
    if mode == "tensor":
        one = ((), (1,), (1, 1))
        sa = _flat(scale_a, one, "scale_a", "tensor-wise: one fp32 scale")
        sb = _flat(scale_b, one, "scale_b", "tensor-wise: one fp32 scale")
    else:
        sa = _flat(scale_a, ((m, 1), (m,)), "scale_a", f"row-wise: one scale per row of A, M = {m}")
        sb = _flat(scale_b, ((1, n), (n,)), "scale_b", f"row-wise: one scale per column of B, N = {n}")
    if check_finite and device.type != "meta" and not _capturing(sa):  # (meta tensors hold no values to read)
        for name, t in (("scale_a", sa), ("scale_b", sb)):
            bad = ~torch.isfinite(t)
            if bool(bad.any()):
                raise ValueError(f"{name} holds {int(bad.sum())} NaN or infinite value(s) of {t.numel()}; "
                                 "scales must be finite")
    if bias is not None:
        if not isinstance(bias, torch.Tensor):
            raise TypeError(f"bias must be a torch.Tensor or None, not {type(bias).__name__}")
        if tuple(bias.shape) != (n,):
            raise ValueError(f"bias must have shape (N,) = {(n,)}, got {tuple(bias.shape)}")
        if bias.dtype != out_dtype:
            raise TypeError(f"bias must have the output's dtype {out_dtype}, got {bias.dtype}")
        check_dense("bias", bias, "scaled_mm reads")
        if bias.device != device:
            raise ValueError(f"bias must be on the operands' device {device}, got {bias.device}")
        check_not_negated("bias", bias)
    return EpilogueArgs(Epilogue(bias=bias is not None, scale=mode), bias, None, sa, sb)


def make_scales(problem: Problem, device: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The benchmark's scales for a scaled_mm problem, flattened as the kernels take them:
    (1,) each for 'tensor', (M,) and (N,) for 'row'. Log-normal around 1 (exp(N(0, 0.5^2))):
    never 1 and never equal across rows, so a kernel that drops a scale, or swaps rows and
    columns, is visibly wrong."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed + 104729)  # not the operands' or the bias's stream
    ma, nb = (1, 1) if problem.scale == "tensor" else (problem.m, problem.n)
    sa = torch.exp(0.5 * torch.randn(ma, generator=gen, dtype=torch.float32, device=device))
    sb = torch.exp(0.5 * torch.randn(nb, generator=gen, dtype=torch.float32, device=device))
    return sa, sb


def epilogue(problem: Problem, scales: tuple[torch.Tensor, torch.Tensor],
             bias: torch.Tensor | None) -> EpilogueArgs:
    """The EpilogueArgs of a scaled_mm problem's benchmark inputs (scales already flat)."""
    return EpilogueArgs(Epilogue(bias=bias is not None, scale=problem.scale), bias, None, *scales)


def reference(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
              bias: torch.Tensor | None = None) -> torch.Tensor:
    """``(a * scale_a) @ (b * scale_b) + bias`` in float64 on the dequantized operands: every fp8
    value and fp32 scale is exact in fp64, so the reference carries no quantization error of its
    own and the check measures the kernel's rounding alone. Scales as ``bind_scales`` flattens
    them or as the caller passes them: one element each, or (M[, 1]) and ([1, ]N)."""
    sa, sb = scale_a.double().reshape(-1), scale_b.double().reshape(-1)
    a64 = a.double() * (sa[:, None] if sa.numel() != 1 else sa)
    b64 = b.double() * (sb[None, :] if sb.numel() != 1 else sb)
    out = torch.mm(a64, b64)
    return out if bias is None else out + bias.double()


def problem_for(a: torch.Tensor, b: torch.Tensor, scale_a, scale_b, out_dtype, bias) -> Problem:
    check_operands(a, b, op="scaled_mm")  # before scale_mode reads their shapes
    return Problem.from_tensors(a, b, out_dtype, op="scaled_mm", scale=scale_mode(a.shape[0], b.shape[1],
                                                                                   scale_a, scale_b),
                                bias=bias is not None)


def default_choice(problem: Problem):
    """The untuned choice: cuBLASLt (torch._scaled_mm) where it takes the problem, else the
    tiled Triton kernel (one 64 x 64 x 64 tile config, BLOCK_K >= 32 as fp8 needs)."""
    from . import kernels
    from .configs import Choice, TileConfig

    if kernels.aten.scaled_reason(problem) is None:
        return Choice("aten", kernels.aten.CONFIG())
    return Choice("triton_mm", TileConfig(64, 64, 64, 3, 4, 8))


def table_at(table):
    """``table`` as a LookupTable: an object as it is, a path loaded once per version of its file
    (``_TABLES``, keyed by the resolved path, checked against the file's mtime_ns and size on each
    call). A missing or bad file raises as ``table.load`` does, naming it."""
    from .table import as_table
    from .table import io as table_io

    if not isinstance(table, (str, os.PathLike)):
        return as_table(table)  # a LookupTable (or None) as it is; anything else a TypeError
    path = Path(table)
    try:
        st = path.stat()
        key = str(path.resolve())
    except OSError:
        return table_io.load(path)  # its TableError names the file and why it cannot be read
    stamp = (st.st_mtime_ns, st.st_size)
    with _TABLES_LOCK:
        hit = _TABLES.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    lut = table_io.load(path)  # (a file replaced between the stat and the read is read again next call)
    with _TABLES_LOCK:
        _TABLES[key] = (stamp, lut)
    return lut


def scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
              bias: torch.Tensor | None = None, out_dtype: torch.dtype | str = torch.bfloat16, *,
              choice=None, table=None, check_finite: bool = True) -> torch.Tensor:
    """``(a @ b) * scale_a * scale_b + bias`` for fp8 ``a`` (M, K) and ``b`` (K, N), as
    torch._scaled_mm computes it, with one chosen kernel.

    ``a``: float8_e4m3fn or float8_e5m2; ``b``: float8_e4m3fn (``W.t()`` of a row-major
    weight is the layout cuBLASLt wants; any layout runs). Scales: fp32, one element each
    (tensor-wise) or ``scale_a`` (M, 1) and ``scale_b`` (1, N) (row-wise). ``bias``: (N,) of
    ``out_dtype`` (bf16 or fp32). ``choice``: a Choice or its id (``"aten"``,
    ``"triton_mm:BM64-BN64-BK64-S3-W4-G8"``, ``"persistent_tma:..."``, ``"pad+aten"``...);
    None: the first choice of ``table`` (a gemmtune.table.LookupTable or its path: read once per
    version of the file, ``table_at``) for this problem when it has one, else ``default_choice``.
    Triton choices need CUDA tensors or the Triton interpreter (TRITON_INTERPRET=1).
    ``check_finite=False`` skips the scales' NaN/inf check (a device sync; skipped inside a
    CUDA graph capture, where no value may be read back). Not differentiable, as
    torch._scaled_mm: where autograd records, the result's backward raises.
    """
    if torch.compiler.is_compiling():
        # One opaque node, the kernel launched at run time, as gemmtune.matmul's: traced through, a
        # Triton choice failed inside dynamo and even 'aten' broke the graph. A ``table`` is no
        # op argument (an object, or a file read at trace time): such a call runs outside the graph.
        if table is None:
            from .torch_ops import traced_scaled_mm
            return traced_scaled_mm(a, b, scale_a, scale_b, bias, out_dtype, choice, check_finite)
        return _untraced_scaled_mm(a, b, scale_a, scale_b, bias, out_dtype, choice=choice, table=table,
                                   check_finite=check_finite)
    from . import kernels
    from .api import checked_choice, interpreter_enabled
    from .configs import Choice

    if transformed():
        _refuse_transformed(a=a, b=b, scale_a=scale_a, scale_b=scale_b, bias=bias)
    out_dt = torch.bfloat16 if out_dtype is None else out_dtype
    try:
        name = dtype_name(out_dt)
    except TypeError:  # (float64, 'nope': its message named neither out_dtype nor the two it may be)
        name = None
    if name not in SCALED_OUT_DTYPES:
        raise TypeError(f"out_dtype must be one of {SCALED_OUT_DTYPES}, got {out_dt!r}")
    out_dt = getattr(torch, name)
    problem = problem_for(a, b, scale_a, scale_b, out_dt, bias)
    epi = bind_scales(problem.m, problem.n, scale_a, scale_b, device=a.device, out_dtype=out_dt, bias=bias,
                      mode=problem.scale, check_finite=check_finite)
    if choice is None and table is not None:
        # (a path, as compile_mm / lookup / patch take one, raised "'str' object has no attribute 'choices'")
        entries = table_at(table).choices(problem)
        choice = entries[0].choice if entries else None
    checked, after = problem, None  # (the problem the choice runs, and an epilogue applied after it)
    if choice is None:
        choice = default_choice(problem)
        if choice.family in kernels.TRITON_FAMILIES and a.device.type == "cpu" and not interpreter_enabled():
            # A shape torch._scaled_mm cannot take as laid out (N or K not a multiple of 16, not
            # A row-major / B column-major, K = 0) defaults to triton_mm, which a CPU runs only in
            # the interpreter: the default raised there, telling the user to pass choice='aten',
            # which refuses the same shape. pad+aten copies to the layout torch's CPU _scaled_mm
            # takes, as gemmtune.matmul's default falls back to aten on a CPU.
            choice = Choice("aten", kernels.aten.CONFIG(), pad=True)
            if problem.scale == "row" and out_dt != torch.bfloat16:
                # pad+aten refuses row-wise scales into fp32 (cuBLASLt's row-wise GEMM writes bf16
                # only), so the default raised here: it runs with unit tensor-wise scales into the
                # fp32 output, and the row scales and bias are applied to it in fp32 after, as the
                # Triton families' epilogue applies them to their fp32 accumulator.
                one = torch.ones(1, device=a.device)
                epi, after = EpilogueArgs(Epilogue(scale="tensor"), None, None, one, one), epi
                checked = dataclasses.replace(problem, scale="tensor", bias=False)
    choice = checked_choice(choice, checked, a,
                            "choice='pad+aten' (torch._scaled_mm on copies in the layout it takes)")

    def run() -> torch.Tensor:
        out = torch.empty((problem.m, problem.n), dtype=out_dt, device=a.device)
        if problem.m == 0 or problem.n == 0 or a.device.type == "meta":
            # (meta: the checked shape and dtype, as torch._scaled_mm's meta kernel gives; its out=
            # variant, which aten runs, has none and raised NotImplementedError from inside torch)
            return out
        if problem.k == 0:
            out.zero_()
            return out if bias is None else out.add_(bias)
        kernels.run_choice_unchecked(choice, a, b, out, workspace=None, epilogue=epi)  # out: fresh, above
        return out if after is None else apply_(out, after)

    if needs_grad(a, b, scale_a, scale_b, bias):
        # torch._scaled_mm has no derivative and records a backward that says so; a Triton kernel's
        # output had no grad_fn, so a trainable bias's gradient was dropped without a word.
        return not_differentiable(run, "gemmtune.scaled_mm", a, b, scale_a, scale_b, bias)
    return run()



def _refuse_transformed(**tensors) -> None:
    """Raise NotImplementedError naming a dual (forward-mode AD) or torch.func-wrapped input: the
    kernels read the primal values, so a Triton choice returned a result without the tangent, and
    vmap's batched scale failed deep in the finite check; torch._scaled_mm has no forward
    derivative either. Plain inputs under a dual level or a transform run as ever."""
    from torch.autograd import forward_ad as fwad
    wrapped = torch._C._functorch.is_functorch_wrapped_tensor
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            continue
        if wrapped(t):
            raise NotImplementedError(f"gemmtune.scaled_mm does not run under torch.func transforms (vmap, grad, "
                                      f"jvp): {name} is a transformed tensor; call it outside the transform")
        if fwad._current_level >= 0 and fwad.unpack_dual(t).tangent is not None:
            raise NotImplementedError(f"gemmtune.scaled_mm has no forward-mode AD derivative (nor has "
                                      f"torch._scaled_mm): {name} is a dual tensor")


def _untraced_scaled_mm(*args, **kwargs) -> torch.Tensor:
    """``scaled_mm`` run by dynamo as a call outside the graph (a graph break): under torch.compile
    with a ``table``."""
    return torch.compiler.disable(scaled_mm)(*args, **kwargs)

# The tolerance of a scaled_mm check (gemmtune.verify.TOLERANCE holds these). The reference
# is fp64 on the dequantized operands, so the fp8 quantization of the inputs is no error here:
# what remains is the kernel's own rounding. fp8 products are exact in fp32 (4- and 3-bit
# significands), every family sums in fp32 with at most BLOCK_K products summed at the tensor
# cores' reduced precision (~14 bits on Hopper; FP8_PROMOTE in kernels.tiled), and the scales
# are applied in fp32: a relative error of ~1e-4 before the output cast. The cast dominates:
# bf16 rounds each output by up to 2^-9 (rms ~1.1e-3 relative), as a bf16 GEMM's does, so the
# bf16 GEMM's budgets are kept (bf16 out 1e-2, fp32 out 5e-3; the latter also admits a library
# that accumulates whole K at reduced precision up to K ~ 10^5). A wrong scale (1.28x off at
# exp(0.5 N(0,1)) scales' typical spread), a dropped bias or a swapped operand is off by > 10%.
TOLERANCES = {(dt, out): (1e-2 if out == "bfloat16" else 5e-3)
              for dt in ("float8_e4m3fn", "float8_e5m2") for out in SCALED_OUT_DTYPES}

__all__ = ["scaled_mm", "bind_scales", "make_scales", "reference", "scale_mode", "TOLERANCES"]
