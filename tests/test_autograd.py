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
