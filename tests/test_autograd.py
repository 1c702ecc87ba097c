"""Direct calls are differentiable whichever kernel runs (gemmtune.autograd): ``gemmtune.matmul``
and a dispatcher called as ``mm(a, b)``. Before, a Triton choice returned a result with no
``grad_fn`` (gradients silently dropped) and ``aten`` raised from torch.mm's ``out=``.
CPU: the Triton choices run in the interpreter (fp32)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import gemmtune
from gemmtune.api import interpreter_enabled

CHOICES = ["aten", "triton_mm:BM16-BN16-BK16-S1-W2-G1", "splitk:BM16-BN16-BK16-S1-W2-G1-SK2-det",
           "pad+triton_mm:BM16-BN16-BK16-S1-W2-G1"]
ACTS = {"none": lambda z: z, "relu": F.relu, "silu": F.silu,
        "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"), "gelu_erf": F.gelu}


def _leaf(*shape):
    return torch.randn(*shape, dtype=torch.float64).float().requires_grad_()


def _grads(fn, *leaves, weight):
    for t in leaves:
        t.grad = None
    (fn() * weight).sum().backward()
    return [t.grad.clone() for t in leaves]


@pytest.mark.parametrize("choice", CHOICES)
@pytest.mark.parametrize("act", list(ACTS))
def test_matmul_gradients_match_torch(choice, act):
    if choice != "aten" and not interpreter_enabled():
        pytest.skip("Triton choices on the CPU need TRITON_INTERPRET=1")
    torch.manual_seed(0)
    m, n, k = 19, 13, 37  # odd: the pad+ choice pads, the tiles are ragged
    a, b, bias, res = _leaf(m, k), _leaf(k, n), _leaf(n), _leaf(m, n)
    w = torch.randn(m, n)  # a non-uniform upstream gradient
    got = _grads(lambda: gemmtune.matmul(a, b, choice=choice, bias=bias, activation=act, residual=res),
                 a, b, bias, res, weight=w)
    want = _grads(lambda: ACTS[act](a @ b + bias) + res, a, b, bias, res, weight=w)
    for name, g, r in zip(("a", "b", "bias", "residual"), got, want):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4, msg=f"grad of {name}")


def test_matmul_only_the_operands_that_require_grad_get_one():
    if not interpreter_enabled():
        pytest.skip("needs TRITON_INTERPRET=1")
    a, b = _leaf(8, 16), torch.randn(16, 4)
    y = gemmtune.matmul(a, b, choice="triton_mm:BM16-BN16-BK16-S1-W2-G1")
    assert y.grad_fn is not None
    y.sum().backward()
    torch.testing.assert_close(a.grad, torch.ones(8, 4) @ b.T)
    assert b.grad is None


def test_no_grad_fn_where_autograd_does_not_record():
    a, b = _leaf(8, 16), _leaf(16, 4)
    with torch.no_grad():
        assert gemmtune.matmul(a, b, choice="aten").grad_fn is None
    y = gemmtune.matmul(a.detach(), b.detach(), choice="aten")
    assert y.grad_fn is None and not y.requires_grad


def test_bmm_gradients_through_matmul():
    if not interpreter_enabled():
        pytest.skip("needs TRITON_INTERPRET=1")
    a, b = _leaf(3, 9, 20), _leaf(3, 20, 7)
    w = torch.randn(3, 9, 7)
    got = _grads(lambda: gemmtune.matmul(a, b, choice="triton_mm:BM16-BN16-BK16-S1-W2-G1"), a, b, weight=w)
    want = _grads(lambda: torch.bmm(a, b), a, b, weight=w)
    for g, r in zip(got, want):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("choice", ["aten", "triton_mm:BM16-BN16-BK16-S1-W2-G1"])
@pytest.mark.parametrize("act", ["none", "gelu_tanh"])
def test_gradients_of_an_fp32_output_of_fp16_operands(choice, act):
    """``out_dtype=torch.float32`` of fp16 operands: the gradient arrives in fp32 and the operands
    are fp16. The backward's torch.mm refused the mixed dtypes (RuntimeError) for every choice."""
    if choice != "aten" and not interpreter_enabled():
        pytest.skip("needs TRITON_INTERPRET=1")
    torch.manual_seed(1)
    m, n, k = 11, 13, 24

    def leaf(*shape, dt=torch.float16):
        return torch.randn(*shape, dtype=torch.float64).to(dt).requires_grad_()
    a, b, bias, res = leaf(m, k), leaf(k, n), leaf(n, dt=torch.float32), leaf(m, n, dt=torch.float32)
    w = torch.randn(m, n, dtype=torch.float64)
    got = _grads(lambda: gemmtune.matmul(a, b, choice=choice, out_dtype=torch.float32, bias=bias,
                                         activation=act, residual=res), a, b, bias, res, weight=w.float())
    assert [g.dtype for g in got] == [torch.float16, torch.float16, torch.float32, torch.float32]
    ref = [t.detach().double().requires_grad_() for t in (a, b, bias, res)]
    want = _grads(lambda: ACTS[act](ref[0] @ ref[1] + ref[2]) + ref[3], *ref, weight=w)
    for name, g, r in zip(("a", "b", "bias", "residual"), got, want):
        torch.testing.assert_close(g.double(), r, rtol=2e-3, atol=2e-3, msg=f"grad of {name}")
    a3, b3 = leaf(2, m, k), leaf(2, k, n)  # a bmm's backward too
    w3 = torch.randn(2, m, n, dtype=torch.float64)
    got = _grads(lambda: gemmtune.matmul(a3, b3, choice=choice, out_dtype=torch.float32), a3, b3, weight=w3.float())
    ref = [t.detach().double().requires_grad_() for t in (a3, b3)]
    want = _grads(lambda: torch.bmm(*ref), *ref, weight=w3)
    for g, r in zip(got, want):
        assert g.dtype == torch.float16
        torch.testing.assert_close(g.double(), r, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("choice", ["aten", "triton_mm:BM16-BN16-BK16-S1-W2-G1"])
@pytest.mark.parametrize("act", list(ACTS))
def test_double_backward_through_the_epilogue_matches_torch(choice, act):
    """``create_graph=True`` (a gradient penalty, a Hessian-vector product) through an epilogue's
    activation: the backward's own ops are differentiated. For silu it ran aten.silu_backward,
    which has no derivative: RuntimeError "derivative for aten::silu_backward is not implemented",
    where torch's F.silu differentiates twice."""
    if choice != "aten" and not interpreter_enabled():
        pytest.skip("Triton choices on the CPU need TRITON_INTERPRET=1")
    torch.manual_seed(2)
    m, n, k = 7, 5, 13
    leaves = [_leaf(m, k), _leaf(k, n), _leaf(n), _leaf(m, n)]
    ref = [t.detach().double().requires_grad_() for t in leaves]

    def second(fn, ts):
        gs = torch.autograd.grad(fn(*ts).square().sum(), ts, create_graph=True)
        return torch.autograd.grad(sum(g.sin().sum() for g in gs), ts, allow_unused=True)

    got = second(lambda a, b, bias, res: gemmtune.matmul(a, b, choice=choice, bias=bias, activation=act,
                                                         residual=res), leaves)
    want = second(lambda a, b, bias, res: ACTS[act](a @ b + bias) + res, ref)
    for name, g, r in zip(("a", "b", "bias", "residual"), got, want):
        assert (g is None) == (r is None), name
        if g is not None:
            torch.testing.assert_close(g.double(), r, rtol=2e-3, atol=2e-3, msg=f"grad of grad of {name}")


@pytest.mark.parametrize("choice", ["aten", "triton_mm:BM16-BN16-BK16-S1-W2-G1"])
def test_dispatcher_direct_call_is_differentiable(choice):
    if choice != "aten" and not interpreter_enabled():
        pytest.skip("needs TRITON_INTERPRET=1")
    mm = gemmtune.compile_mm(n=6, k=40, dtype="fp32", hints={"m": [8]},
                             tune_fn=lambda ps, **kw: {p.key: choice for p in ps})
    a, b, bias = _leaf(8, 40), _leaf(40, 6), _leaf(6)
    w = torch.randn(8, 6)
    for act in ("none", "silu"):
        got = _grads(lambda: mm(a, b, bias=bias, activation=act), a, b, bias, weight=w)
        want = _grads(lambda: ACTS[act](a @ b + bias), a, b, bias, weight=w)
        for g, r in zip(got, want):
            torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4)
    assert mm.decision(m=8).choice.id == choice
    with torch.no_grad():
        assert mm(a, b).grad_fn is None


def test_matmul_under_torch_compile_is_one_op_node_with_its_gradients():
    """``gemmtune.matmul`` inside a compiled function traces as the gemmtune::matmul op: no graph
    break, one graph for every M, the values and gradients of the eager call (a Choice object, an
    out_dtype name, a fused epilogue, a bmm with a broadcast operand). Traced through, a Triton
    choice failed in the interpreter (a TorchRuntimeError on a uint64 fake tensor) and the
    default choice broke the graph."""
    from torch._dynamo.testing import CompileCounterWithBackend
    from torch._dynamo.utils import counters

    if not interpreter_enabled():
        pytest.skip("Triton choices on the CPU need TRITON_INTERPRET=1")
    torch.manual_seed(0)
    choice = gemmtune.Choice.parse(CHOICES[1])
    b, bias = _leaf(37, 13), _leaf(13)

    def fn(a, b, bias, res):
        return gemmtune.matmul(a, b, choice=choice, bias=bias, activation="silu", residual=res) * 2

    torch._dynamo.reset()
    counters.clear()
    cnt = CompileCounterWithBackend("aot_eager")
    cf = torch.compile(fn, backend=cnt, dynamic=True, fullgraph=True)
    for m in (5, 19, 40):
        a, res, w = _leaf(m, 37), _leaf(m, 13), torch.randn(m, 13)
        got = _grads(lambda: cf(a, b, bias, res), a, b, bias, res, weight=w)
        want = _grads(lambda: fn(a, b, bias, res), a, b, bias, res, weight=w)
        torch.testing.assert_close(cf(a, b, bias, res), fn(a, b, bias, res))
        for g, e in zip(got, want):
            torch.testing.assert_close(g, e)
    assert cnt.frame_count == 1 and not counters["graph_break"], dict(counters["graph_break"])
    assert "torch.ops.gemmtune.matmul" in cnt.graphs[0].code
    # The default choice, an fp32 output of fp16 operands, and a bmm with a broadcast operand.
    torch._dynamo.reset()
    a16, b16 = torch.randn(6, 37, dtype=torch.float16), torch.randn(37, 13, dtype=torch.float16)
    y = torch.compile(lambda a, b: gemmtune.matmul(a, b, out_dtype="fp32"), backend="aot_eager", fullgraph=True)(a16, b16)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, a16.float() @ b16.float(), rtol=1e-3, atol=1e-3)
    torch._dynamo.reset()
    a3, b3 = torch.randn(3, 6, 37), torch.randn(1, 37, 13).expand(3, 37, 13)
    y = torch.compile(lambda a, b: gemmtune.matmul(a, b, choice=CHOICES[1]), backend="aot_eager", fullgraph=True)(a3, b3)
    torch.testing.assert_close(y, torch.bmm(a3, b3), rtol=1e-4, atol=1e-4)
    torch._dynamo.reset()
