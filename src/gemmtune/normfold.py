"""The norm fold: an RMSNorm computed inside the decode GEMV after it (``GEMMTUNE_FOLD_NORMS=1``,
experimental, off by default: within noise of the unfolded step).

Measured on the H200 (benchmarks/results/2026-11-30-h200-s44, sections 1-2): Llama-1B's compiled
decode step took 0.971 ms folded against 0.976 ms unfolded with Inductor's PDL on (1.073 against
1.091 without), 198 kernels against 229: the residual sum before each folded norm is the
epilogue of the GEMM before it (fuse_compile._take_residual: o_proj's and down_proj's
``gemmtune::mm``), so the add kernel goes with the norm. The folded strip itself takes 1.06-1.44x the plain strip's time:
it sums x^2 over its row again after the K loop (kernels.skinny._rms_scale). Session 43's version
summed them inside the loop, which cost 10-31 registers, and lost (1.179 against 1.116 ms); a sum
to one fp32 at every step (session 44) lost too (0.9925 against 0.9802 ms).

Why: in a decode step at M = 1 the RMSNorm before the fused q/k/v (and gate/up) GEMV is a kernel
of its own: on an H200, the best Llama-1B decode step spent ~115 of 1126 µs in 33 norm kernels
(benchmarks/results/2026-11-30-h200-s42, call 5). The one-row strip can compute the norm itself
(``kernels.skinny.run(..., norm_weight=g, norm_eps=eps)``): each program reads the whole row x
anyway.

The graph side (``rms_norm_input``, ``only_read_by``; called by ``fuse_compile.merge``): the chain
transformers' Llama-style RMSNorm traces to (Llama, Qwen2, Mistral; transformers 5.x, dynamo's
pre-grad graph)::

    h    = x.to(torch.float32)
    var  = h.pow(2).mean(-1, keepdim=True)
    y    = h * torch.rsqrt(var + eps)
    out  = weight * y.to(x_dtype)

with ``out`` read by nothing but a fused group's ``gemmtune::fused_member`` nodes (and dynamo's
zero-user ``getattr(out, "is_cpu")`` probes), at a static M of 1. Other norms (Gemma's ``1 + weight``,
LayerNorm) are other chains: not matched, left as they are. The merged GEMM then takes ``x`` and the
norm's weight and eps: the ``gemmtune::rms_mm`` op (``run`` is its kernel path).

In a graph lowered with Inductor's PDL on, a folded group runs its dispatcher's ``-pdl`` twin
(``rms_pdl_decomposition``). Not done: eager calls, M > 1.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class NormMatch:
    """An RMSNorm chain ending at ``out``: its input ``x`` (the node), weight node and eps."""

    x: torch.fx.Node
    weight: torch.fx.Node
    eps: float
    nodes: tuple  # the chain's nodes from the first cast to ``out``, in graph order


def _is_method(n, name: str) -> bool:
    return isinstance(n, torch.fx.Node) and n.op == "call_method" and n.target == name


def _is_fn(n, *targets) -> bool:
    return isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target in targets


def _arg(n: torch.fx.Node, i: int, name: str):
    return n.args[i] if len(n.args) > i else n.kwargs.get(name)


def _cast_of(n, dtype=None):
    """The tensor node ``n`` casts (``t.to(dtype)``), when ``n`` is such a cast (to ``dtype``
    where given), else None."""
    if not _is_method(n, "to"):
        return None
    target = _arg(n, 1, "dtype")
    if dtype is not None and target is not dtype:
        return None
    src = n.args[0]
    return src if isinstance(src, torch.fx.Node) else None


def _val_dtype(n):
    v = n.meta.get("example_value", n.meta.get("val"))
    return v.dtype if isinstance(v, torch.Tensor) else None


def _same_dtype_as(x: torch.fx.Node, cast: torch.fx.Node, out: torch.fx.Node) -> bool:
    """Whether the chain casts back to ``x``'s dtype and ``out`` keeps it (the weight in it too):
    ``rms_mm`` computes that chain, in ``x``'s dtype. A cast to another dtype (an fp32 residual
    stream under an fp16 norm) or a weight of another dtype was folded all the same: the op's norm
    came out in another dtype than the graph's, and the GEMM refused it (or its fake's dtype was wrong)."""
    target, xd = _arg(cast, 1, "dtype"), _val_dtype(x)
    if isinstance(target, torch.fx.Node):  # symbolic_trace: ``y.to(x.dtype)``
        if not (_is_fn(target, getattr) and target.args == (x, "dtype")):
            return False
        target = xd
    elif not isinstance(target, torch.dtype) or (xd is not None and target is not xd):
        return False
    od = _val_dtype(out)  # (where a value is unknown, a hand-made graph: what is known must agree)
    return od is None or target is None or od == target


def _operands(n: torch.fx.Node) -> tuple:
    """A binary op's two operands, positional or keyword (``torch.add(v, other=eps)``: indexing
    ``args[1]`` raised IndexError inside the compile); (None, None) for anything more (an ``alpha``)."""
    if len(n.args) > 2 or set(n.kwargs) - {"input", "other"}:
        return None, None
    return _arg(n, 0, "input"), _arg(n, 1, "other")


def rms_norm_input(out) -> NormMatch | None:
    """The RMSNorm whose output node is ``out`` (the chain in the module docstring), or None.
    Every node inside the chain must have only the users the chain gives it; ``out``'s own users
    are the caller's to check."""
    if not _is_fn(out, operator.mul, torch.mul):
        return None
    a, b = _operands(out)
    # weight * y.to(x_dtype), either order
    for weight, cast in ((a, b), (b, a)):
        y = _cast_of(cast)
        if y is None or not isinstance(weight, torch.fx.Node) or weight.op not in ("placeholder", "get_attr"):
            continue
        if not _is_fn(y, operator.mul, torch.mul):
            continue
        y0, y1 = _operands(y)
        for h, rs in ((y0, y1), (y1, y0)):
            if not _is_fn(rs, torch.rsqrt):
                continue
            add = _arg(rs, 0, "input")
            if not _is_fn(add, operator.add, torch.add):
                continue
            var, eps = _operands(add)
            if isinstance(var, (int, float)) and not isinstance(eps, (int, float)):
                var, eps = eps, var
            if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not _is_method(var, "mean"):
                continue
            dims, keep = _arg(var, 1, "dim"), var.kwargs.get("keepdim", var.args[2] if len(var.args) > 2 else False)
            if dims not in (-1, (-1,), [-1]) or keep is not True:
                continue
            sq = var.args[0]
            if not (_is_method(sq, "pow") and sq.args[0] is h and sq.args[1] == 2):
                continue
            x = _cast_of(h, torch.float32)
            if x is None or not _same_dtype_as(x, cast, out):
                continue
            chain = (h, sq, var, add, rs, y, cast, out)
            users_ok = (set(h.users) == {sq, y} and all(len(n.users) == 1 for n in (sq, var, add, rs, y, cast)))
            if not users_ok:
                return None
            return NormMatch(x, weight, float(eps), chain)
    return None


def only_read_by(out: torch.fx.Node, readers) -> bool:
    """Whether ``out``'s users are ``readers`` and dynamo's zero-user attribute probes
    (``getattr(out, 'is_cpu')``) alone."""
    readers = set(readers)
    for u in out.users:
        if u in readers:
            continue
        if _is_fn(u, getattr) and not u.users:
            continue
        return False
    return True


# ---------------------------------------------------------------------- the op and its kernel path

def rms_norm_torch(x: torch.Tensor, g: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' Llama-style RMSNorm, as its module computes it (the chain above): the fallback
    of ``rms_mm``, and what the fold is checked against beside fp64."""
    h = x.to(torch.float32)
    y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return g * y.to(x.dtype)


def fold_reference(x: torch.Tensor, g: torch.Tensor, eps: float, b: torch.Tensor,
                   bias: torch.Tensor | None = None) -> torch.Tensor:
    """The folded product in float64: ``(x * rsqrt(mean(x^2) + eps) * g) @ b (+ bias)``."""
    h = x.double()
    y = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * g.double()) @ b.double()
    return y if bias is None else y + bias.double()


def _fallback(d, x, g, eps, b, bias):
    return d._run(rms_norm_torch(x, g, eps), b, bias)


_FOLD_WARNED: set = set()


def run(d, x: torch.Tensor, g: torch.Tensor, eps: float, b: torch.Tensor,
        bias: torch.Tensor | None = None) -> torch.Tensor:
    """``gemmtune::rms_mm``'s kernel on dispatcher ``d``: ``rms_norm_torch(x, g, eps) @ b (+ bias)``.
    Where ``d``'s winner for this M is a one-row strip that folds (``skinny_spec.fold_misfit``),
    the strip computes the norm itself (``skinny.run(..., norm_weight=g, norm_eps=eps)``), checked
    once per shape against the fp64 product (``verify.compare`` at the dtype's tolerance); else, or
    where that check fails (warned once), the norm runs in torch and the GEMM on ``d``. With a
    bias, the winner is the one a call with a bias runs (the table's addmm winner where it has one).
    A call whose inputs hold NaN or inf runs unfused and leaves the check to a later, finite call."""
    runs = d.__dict__.setdefault("_gemmtune_norm_runs", {})
    # Everything check_fold and the fp64 check depend on: a key without g's dtype or B's layout gave
    # a later call the fold decided for another one, and check_fold's ValueError instead of the norm.
    key = (x.shape, x.dtype, x.device, g.shape, g.dtype, g.device, b.shape, b.stride(), b.dtype, float(eps),
           None if bias is None else (bias.shape, bias.dtype))
    fn = runs.get(key)
    if fn is None:
        from .dispatch.common import capturing
        if capturing(x):
            return _fallback(d, x, g, eps, b, bias)  # nothing is checked inside a capture: decided later
        fn = _first(d, x, g, eps, b, bias)
        if fn is None:  # a non-finite input: the fold's check proves nothing on it, decided later
            return _fallback(d, x, g, eps, b, bias)
        runs[key] = fn
    return fn(x, g, eps, b, bias)


def _finite(*ts) -> bool:
    return all(t is None or bool(torch.isfinite(t).all()) for t in ts)


def _first(d, x, g, eps, b, bias):
    from .epilogue import bind
    from .kernels import skinny
    from .kernels.skinny_spec import fold_misfit
    from .problem import dtype_name
    from .verify import TOLERANCE, compare

    xn = rms_norm_torch(x, g, eps)
    d._run(xn, b, bias)  # decides (and verifies) d's choice for this M, with a bias the addmm one
    m, k = x.shape
    n = b.shape[1]
    dec = d.decision(m, n, k)
    ch = None if dec is None else dec.choice
    if bias is not None and ch is not None and d.table is not None:
        # A call with a bias runs the table's addmm winner where it has one (Dispatcher._addmm_choice,
        # decided by the call above): the fold replaces that kernel, so it is the one that must fold.
        # The mm decision was read here, so a skinny mm winner folded over a cuBLAS (or other) addmm
        # winner, and a skinny addmm winner never folded.
        with d._lock:  # (as Dispatcher._first_sight calls it)
            ch = d._addmm_choice(m, n, k, xn, b, ch)
    # (run calls what this returns without d)
    plain = functools.partial(_fallback, d)
    if ch is None or ch.family != "skinny" or ch.pad or fold_misfit(ch.config, m, k) is not None:
        return plain
    cfg = ch.config

    def folded(x, g, eps, b, bias):
        out = torch.empty(x.shape[0], b.shape[1], dtype=x.dtype, device=x.device)
        ep = None if bias is None else bind(x.shape[0], b.shape[1], x.dtype, x.device, bias=bias)
        skinny.run(x, b, out, cfg, epilogue=ep, norm_weight=g, norm_eps=eps)
        return out

    if not _finite(x, g, b, bias):
        # NaN or inf in the input makes the fp64 reference and the fold both non-finite: compare
        # fails, and the fold was given up for this shape for good on one bad call (a NaN in one
        # decode step's activations). That says nothing about the fold: None, no decision yet.
        return None
    tol = TOLERANCE.get((dtype_name(x.dtype),) * 2)  # (d._run above took this dtype)
    try:
        got = folded(x, g, eps, b, bias)
        ok = tol is not None and compare(got, fold_reference(x, g, eps, b, bias), tol).ok
        why = "its output is outside the tolerance against fp64"
    except ValueError as e:  # skinny.check_fold's refusal
        ok, why = False, str(e)
    if not ok:
        if (ch.id, why) not in _FOLD_WARNED:
            _FOLD_WARNED.add((ch.id, why))
            import warnings
            warnings.warn(f"gemmtune: the norm fold on {ch.id} ({m}x{n}x{k}) is not used: {why}; the norm "
                          "runs before the GEMM", RuntimeWarning, stacklevel=4)
        return plain
    return folded


def rms_pdl_decomposition(x, g, eps, b, handle, bias=None):
    """Inductor's decomposition of ``gemmtune::rms_mm``: in a graph lowered with Inductor's PDL on,
    the same op on the dispatcher's ``-pdl`` twin (torch_ops.pdl_twin_handle), so the folded strip
    runs as its ``-pdl`` config, as ``gemmtune::mm``'s strips do (torch_ops._gemv_decomposition);
    else the op stays as it is. Why: with the folded strips launched without PDL, Llama-1B's
    compiled decode step (b1, PDL on) took 1.061 ms folded against 1.032 ms unfolded on an H200,
    where without PDL the fold had gained (1.073 against 1.091 ms; benchmarks/results/
    2026-11-30-h200-s44): each plain launch breaks the chain of early starts."""
    from .torch_ops import pdl_twin_handle
    twin = pdl_twin_handle(handle)
    if twin is None:
        return NotImplemented
    return torch.ops.gemmtune.rms_mm(x, g, eps, b, twin, bias)


def _define_op():
    from .torch_ops import _LIB, REGISTRY

    _LIB.define("rms_mm(Tensor x, Tensor g, float eps, Tensor b, int handle, Tensor? bias=None) -> Tensor")

    def _impl(x, g, eps, b, handle, bias=None):
        return run(REGISTRY.get(handle), x, g, eps, b, bias)

    for key in ("CPU", "CUDA"):
        _LIB.impl("rms_mm", _impl, key)

    @torch.library.register_fake("gemmtune::rms_mm", lib=_LIB)
    def _fake(x, g, eps, b, handle, bias=None):
        from .torch_ops import register_inductor_gemv
        register_inductor_gemv()  # (rms_pdl_decomposition, before Inductor lowers the graph)
        torch._check(x.dim() == 2 and b.dim() == 2, lambda: "gemmtune::rms_mm takes 2-D x and b")
        torch._check(x.shape[1] == b.shape[0], lambda: "gemmtune::rms_mm: inner dimensions differ")
        return x.new_empty(x.shape[0], b.shape[1])


_define_op()

__all__ = ["NormMatch", "fold_reference", "only_read_by", "rms_norm_input", "rms_norm_torch", "run"]
