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


# ------------------------------------------------------------------ scaled_mm under torch.compile
def _fp8_operands(m=5, n=16, k=32, scale="tensor"):
    torch.manual_seed(0)
    e4 = torch.float8_e4m3fn
    x, w = torch.randn(m, k).to(e4), torch.randn(n, k).to(e4).t()
    sa, sb = ((torch.rand(1) + 0.5, torch.rand(1) + 0.5) if scale == "tensor"
              else (torch.rand(m, 1) + 0.5, torch.rand(1, n) + 0.5))
    return x, w, sa, sb


@pytest.mark.parametrize("scale", ["tensor", "row"])
def test_scaled_mm_with_a_triton_choice_compiles_as_one_op(scale):
    """``torch.compile`` of a function calling ``gemmtune.scaled_mm`` with a Triton choice: dynamo
    traced into the kernel launch and failed ("Dynamo failed to run FX node with fake tensors ...
    KeyError(torch.uint64)" in the CPU interpreter), as ``gemmtune.matmul`` did before its
    ``gemmtune::matmul`` op. It traces as the ``gemmtune::scaled_mm`` op now: one node, no graph
    break, the same values as eager."""
    from gemmtune.scaled import reference
    x, w, sa, sb = _fp8_operands(scale=scale)
    bias = torch.randn(16)
    choice = "triton_mm:BM16-BN16-BK32-S1-W4-G8"
    try:  # the Triton families' fp8 tl.dot must run here (tests/test_scaled_mm.py probes it the same way)
        eager = gemmtune.scaled_mm(x, w, sa, sb, bias=bias, out_dtype=torch.float32, choice=choice)
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"the Triton interpreter cannot run an fp8 tl.dot: {e}"[:200])
    from torch._dynamo.testing import CompileCounterWithBackend
    cnt = CompileCounterWithBackend("eager")
    fn = torch.compile(lambda x, w, sa, sb, bias: gemmtune.scaled_mm(x, w, sa, sb, bias=bias, out_dtype="fp32",
                                                                      choice=choice),
                       backend=cnt, fullgraph=True)
    got = fn(x, w, sa, sb, bias)
    assert cnt.frame_count == 1
    assert [n.target for n in cnt.graphs[0].graph.nodes if n.op == "call_function"] == [
        torch.ops.gemmtune.scaled_mm]
    assert got.dtype == torch.float32 and got.shape == (5, 16)
    torch.testing.assert_close(got, eager)
    torch.testing.assert_close(got.double(), reference(x, w, sa, sb, bias), rtol=5e-3, atol=5e-3)


def test_scaled_mm_compiled_checks_as_eager():
    """The op's fake kernel gives the output's shape and dtype, and a bad call still raises by name
    (at trace time or from the op's kernel)."""
    x, w, sa, sb = _fp8_operands()
    fn = torch.compile(lambda x, w, sa, sb: gemmtune.scaled_mm(x, w, sa, sb, choice="aten"),
                       backend="eager", fullgraph=True)
    assert fn(x, w, sa, sb).dtype == torch.bfloat16
    torch._dynamo.reset()
    with pytest.raises(Exception, match="scale_a must be float32"):
        fn(x, w, sa.double(), sb)


def test_scaled_mm_compiled_never_drops_a_trainable_bias_gradient():
    """Eager, a bias that requires grad gets a backward that raises (torch._scaled_mm has no
    derivative). Through the op with no autograd of its own, the compiled backward ran and left
    ``bias.grad`` None, without a word."""
    x, w, sa, sb = _fp8_operands()
    bias = torch.randn(16, requires_grad=True)
    fn = torch.compile(lambda x, w, sa, sb, bias: gemmtune.scaled_mm(x, w, sa, sb, bias=bias, out_dtype="fp32",
                                                                      choice="aten"),
                       backend="eager", fullgraph=True)
    with pytest.raises(RuntimeError, match="derivative for gemmtune.scaled_mm is not implemented"):
        fn(x, w, sa, sb, bias).sum().backward()
    assert bias.grad is None


def test_scaled_mm_compiled_with_a_table_runs_outside_the_graph(tmp_path):
    """A ``table`` is no op argument: such a call runs eagerly, outside the graph (a graph break)."""
    from gemmtune.configs import Choice
    from gemmtune.provenance import Provenance
    from gemmtune.scaled import problem_for
    from gemmtune.table import LookupTable, TableChoice

    x, w, sa, sb = _fp8_operands()
    key = problem_for(x, w, sa, sb, torch.float32, None).key
    table = LookupTable(Provenance.current("by-hand").to_dict(), {key: [TableChoice(Choice.parse("pad+aten"))]})
    eager = gemmtune.scaled_mm(x, w, sa, sb, out_dtype=torch.float32, table=table)
    got = torch.compile(lambda x, w, sa, sb: gemmtune.scaled_mm(x, w, sa, sb, out_dtype=torch.float32, table=table),
                        backend="eager")(x, w, sa, sb)
    torch.testing.assert_close(got, eager)


# ------------------------------------------------------------------ scaled_mm's operand dtype error
def test_scaled_mm_names_why_for_non_fp8_operands():
    """fp16 operands were refused with "(e5m2 x e5m2 has no cuBLASLt kernel)", a reason about
    another case; they are told to quantize or to use gemmtune.matmul."""
    a, b = torch.randn(4, 32, dtype=torch.float16), torch.randn(32, 16, dtype=torch.float16)
    with pytest.raises(TypeError, match="gemmtune.matmul") as e:
        gemmtune.scaled_mm(a, b, torch.ones(1), torch.ones(1))
    assert "e5m2 x e5m2" not in str(e.value)
    e5 = torch.float8_e5m2
    with pytest.raises(TypeError, match="e5m2 x e5m2 has no cuBLASLt kernel"):
        gemmtune.scaled_mm(a.to(e5), b.to(e5), torch.ones(1), torch.ones(1))


# ------------------------------------------------------------------ fuse_compile: writes between members
def _members_graph(write):
    """Two ``gemmtune::fused_member`` nodes on one input ``h`` and ``write(graph, h)`` between them."""
    g = torch.fx.Graph()
    x, w1, w2, fw = (g.placeholder(n) for n in ("x", "w1", "w2", "fw"))
    h = g.call_function(operator.mul, (x, 2))
    q = g.call_function(torch.ops.gemmtune.fused_member.default, (h, w1, None, fw, None, 0, 16, -1))
    write(g, h)
    k = g.call_function(torch.ops.gemmtune.fused_member.default, (h, w2, None, fw, None, 16, 8, -1))
    g.output((q, k))
    return g


@pytest.mark.parametrize("write", [
    lambda g, h: g.call_function(torch.nn.functional.relu, (h, True)),
    lambda g, h: g.call_function(torch.nn.functional.leaky_relu, (h, 0.1, True)),
    lambda g, h: g.call_function(torch.nn.functional.dropout, (h, 0.5, True, True)),
], ids=["relu", "leaky_relu", "dropout"])
def test_members_are_kept_apart_across_a_positional_inplace(write):
    """``F.relu(h, True)`` between two members writes ``h`` in place, but ``_writes`` read
    ``inplace`` from the keyword arguments only: the pass merged the members, and the second read
    ``h`` as it was before the write. Compiled with Inductor, ``q = self.q(h); F.relu(h, True);
    k = self.k(h)`` returned k of the un-relu'd h (6.2 off on 4x16 inputs; eager and the unfused
    compile agree with torch)."""
    plan, kept = fuse_compile._plan(_members_graph(write))
    assert plan == [] and kept == 1


def test_members_merge_across_an_out_of_place_call():
    plan, kept = fuse_compile._plan(_members_graph(lambda g, h: g.call_function(torch.nn.functional.relu, (h,))))
    assert len(plan) == 1 and kept == 0
    plan, kept = fuse_compile._plan(_members_graph(
        lambda g, h: g.call_function(torch.nn.functional.relu, (h,), {"inplace": False})))
    assert len(plan) == 1 and kept == 0


# ------------------------------------------------------------------ a dispatcher's bmm with an epilogue, compiled
def test_compiled_dispatcher_bmm_with_an_epilogue_raises_eagers_error():
    """Eager, ``mm(a3, b3, bias=...)`` raises "a bmm (3-D operands) takes no fused epilogue"; compiled,
    the call was sent to the 2-D ``gemmtune::mm`` op, whose fake kernel raised "gemmtune::mm takes
    2-D operands, got 3-D and 3-D" inside a TorchRuntimeError ("Dynamo failed to run FX node with
    fake tensors"), which did not say what was wrong with the call."""
    d = _dispatcher()
    a, b = torch.randn(2, 3, 16), torch.randn(2, 16, 7)
    with pytest.raises(ValueError, match="takes no fused epilogue"):
        d(a, b, bias=torch.zeros(7))
    torch._dynamo.reset()
    with pytest.raises(ValueError, match="takes no fused epilogue"):
        torch.compile(lambda a, b: d(a, b, bias=torch.zeros(7)), backend="eager")(a, b)
    # (without an epilogue it still traces as gemmtune::bmm)
    torch.testing.assert_close(torch.compile(lambda a, b: d(a, b), backend="eager")(a, b), torch.bmm(a, b))


# ------------------------------------------------------------------ the norm fold: writes between norm and GEMM
def _norm_graph(write_between: bool):
    """transformers' RMSNorm chain on ``hs`` (normfold's module doc), read by two fused members at
    M = 1 of a patched group (handle 5), optionally with ``hs.add_(1)`` between the norm and them."""
    g = torch.fx.Graph()
    hs, weight, w1, w2, fw = (g.placeholder(n) for n in ("hs", "weight", "w1", "w2", "fw"))
    h = g.call_method("to", (hs, torch.float32))
    sq = g.call_method("pow", (h, 2))
    var = g.call_method("mean", (sq, -1), {"keepdim": True})
    add = g.call_function(operator.add, (var, 1e-5))
    rs = g.call_function(torch.rsqrt, (add,))
    y = g.call_function(operator.mul, (h, rs))
    cast = g.call_method("to", (y, torch.float32))
    out = g.call_function(operator.mul, (weight, cast))
    out.meta["val"] = torch.empty(1, 64)
    if write_between:
        g.call_method("add_", (hs, 1))
    q = g.call_function(torch.ops.gemmtune.fused_member.default, (out, w1, None, fw, None, 0, 16, 5))
    k = g.call_function(torch.ops.gemmtune.fused_member.default, (out, w2, None, fw, None, 16, 8, 5))
    g.output((q, k))
    return g


@pytest.mark.parametrize("write", [False, True])
def test_the_norm_fold_reads_the_norms_input_only_where_nothing_wrote_it(write, monkeypatch):
    """GEMMTUNE_FOLD_NORMS=1 moves the norm into the merged GEMM, which reads the norm's input at
    the first member: an in-place write to that input between the norm and the members
    (``hs.add_(1)``) was then folded in, the GEMM computing the norm of the written input, where
    the model normalised it before the write. The norm stays where it is then."""
    monkeypatch.setenv("GEMMTUNE_FOLD_NORMS", "1")
    g = _norm_graph(write)
    assert fuse_compile.merge(g) == 1
    g.lint()
    folded = [n for n in g.nodes if n.target is fuse_compile._fused_rows_rms]
    plain = [n for n in g.nodes if n.target is fuse_compile._fused_rows]
    assert (len(folded), len(plain)) == ((0, 1) if write else (1, 0))
