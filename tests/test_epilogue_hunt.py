"""Defects found by session 51's hunt over the fused-epilogue, fp8 and autograd paths (CPU: the
Triton interpreter, fp32/fp16; conftest sets TRITON_INTERPRET=1). Each test failed on the code it
was written against."""

from __future__ import annotations

import operator

import pytest
import torch

import gemmtune  # noqa: F401  (defines the gemmtune::* ops)
from gemmtune import fuse_compile


# ------------------------------------------------------------------ fuse_compile._take_residual
def _residual_graph(residual_after_mm: bool, write_between: bool):
    """``h = view(mm(a, w)) + r`` at M = 1 (a decode step's o_proj and the residual sum after it),
    the residual ``r = r0 * 2`` computed before the GEMM or after it, and optionally an in-place
    write to ``r0``'s source between the GEMM and the sum."""
    g = torch.fx.Graph()
    a, w, r0 = g.placeholder("a"), g.placeholder("w"), g.placeholder("r0")

    def residual():
        r = g.call_method("mul", (r0, 2))
        r.meta["val"] = torch.empty(1, 1, 8)
        return r
    r = None if residual_after_mm else residual()
    mm = g.call_function(torch.ops.gemmtune.mm.default, (a, w, 7))
    view = g.call_method("view", (mm, 1, 1, 8))
    if residual_after_mm:
        r = residual()
    if write_between:
        g.call_method("mul_", (r, 3))
    h = g.call_function(operator.add, (view, r))
    g.output(h)
    mm.meta["val"], view.meta["val"], h.meta["val"] = torch.empty(1, 8), torch.empty(1, 1, 8), torch.empty(1, 1, 8)
    return g, h


@pytest.mark.parametrize("after, write", [(True, False), (False, True)])
def test_take_residual_leaves_a_residual_it_cannot_read_at_the_gemm(after, write):
    """A residual computed after the GEMM was read by a reshape inserted before its definition (an
    invalid graph: "used before it has been defined"), and one written in place between the GEMM
    and the sum was read before that write. Both are left as the sum they were."""
    g, h = _residual_graph(after, write)
    assert fuse_compile._take_residual(g, h) is None
    g.lint()
    assert any(n is h for n in g.nodes)


def test_take_residual_still_takes_the_usual_one():
    g, h = _residual_graph(False, False)
    view = fuse_compile._take_residual(g, h)
    assert view is not None
    g.lint()
    mm = next(n for n in g.nodes if n.target is torch.ops.gemmtune.mm.default)
    assert mm.args[5] is not None  # the residual is the GEMM's epilogue now


@pytest.mark.parametrize("op, args", [("mul", (2.0,)), ("relu", ()), ("t", ())])
def test_take_residual_takes_it_only_through_a_reshape(op, args):
    """``h = r + f(mm(a, w))`` with ``f`` not a reshape (a 2-D input's patched layer returns the
    GEMM's output itself, so ``r + o_proj(x) * 2`` reads it through a ``mul``): the residual was
    made the GEMM's epilogue all the same, giving ``f(mm + r)``, silently wrong (``2 * mm + 2 * r``
    for the mul; for a square ``.t()`` the residual added transposed). Only a view or reshape of
    the product keeps ``f(mm) + r == f(mm + r)``."""
    g = torch.fx.Graph()
    a, w, r = g.placeholder("a"), g.placeholder("w"), g.placeholder("r")
    mm = g.call_function(torch.ops.gemmtune.mm.default, (a, w, 7))
    f = g.call_method(op, (mm, *args))
    h = g.call_function(operator.add, (f, r))
    g.output(h)
    for n in (mm, f, r, h):
        n.meta["val"] = torch.empty(8, 8)
    assert fuse_compile._take_residual(g, h) is None
    assert mm.args == (a, w, 7)


# ------------------------------------------------------------------ Dispatcher.warmup(epilogues=...)
def _dispatcher():
    from gemmtune.dispatch import compile_mm
    return compile_mm(n=7, k=16, dtype="fp32", hints={"m": [4]},
                      tune_fn=lambda ps, **_: {p.key: "triton_mm:BM16-BN16-BK16-S1-W4-G8" for p in ps})


@pytest.mark.parametrize("given", ["bias+relu", "epilogue"])
def test_warmup_takes_one_epilogue_given_bare(given):
    """``mm.warmup(m=[3], epilogues="bias+relu")``: iterated as characters, it raised "bad epilogue
    id 'b'" (an Epilogue: "'Epilogue' object is not iterable"), naming neither the mistake nor the
    fix. One epilogue given bare is that one epilogue."""
    from gemmtune.epilogue import Epilogue
    d = _dispatcher()
    d.warmup("cpu", m=[3], epilogues=Epilogue(True, "relu") if given == "epilogue" else given)
    assert len(d._fast_fused) == 1 and (3, 7, 16) in d.decisions


def test_warmup_refuses_a_scale_epilogue_by_name():
    """A scaled_mm epilogue (``scale.row``) warmed a plain call and said nothing: a dispatcher
    serves no scaled_mm."""
    d = _dispatcher()
    with pytest.raises(ValueError, match="scaled_mm"):
        d.warmup("cpu", m=[3], epilogues=["scale.row+bias"])
    with pytest.raises(TypeError, match="epilogues must be"):
        d.warmup("cpu", m=[3], epilogues=[3])
