"""Defects found by an adversarial hunt over autograd, bmm, fused epilogues, degenerate sizes and
fp8 ``scaled_mm`` (each test failed before its fix): forward-mode AD through ``gemmtune.matmul`` and
a dispatcher's direct call dropped a dual operand's tangent without a word (the Triton kernels read
the primal's memory), ``torch.func`` transforms over ``gemmtune.matmul`` failed deep inside
(``Cannot access data pointer of Tensor that doesn't have storage``), ``scaled_mm`` through a
Triton family returned a result with no ``grad_fn`` where an input required grad (a trainable
bias's gradient silently dropped; ``torch._scaled_mm`` raises at backward), ``scaled_mm`` of
``meta`` tensors with a Triton choice failed deep in the interpreter, and the backward kept every
operand where torch keeps only what the gradients read (a frozen layer's input held alive;
inference-mode operands under a trainable bias raised).
CPU: the Triton choices run in the interpreter (fp32)."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

import gemmtune
from gemmtune.api import interpreter_enabled

TILE = "triton_mm:BM16-BN16-BK16-S1-W2-G1"


def _need_triton(device: str, choice: str) -> None:
    if choice != "aten" and device == "cpu" and not interpreter_enabled():
        pytest.skip("Triton choices on the CPU need TRITON_INTERPRET=1")


def _tangent_ref(a, ta, b, tb, bias, tbias, residual, tres):
    """d/dt of silu(a @ b + bias) + residual along the tangents, in fp64."""
    a, ta, b, tb, bias, tbias, residual, tres = (t.double() for t in (a, ta, b, tb, bias, tbias, residual, tres))
    _, tan = torch.func.jvp(lambda a, b, bias, r: F.silu(a @ b + bias) + r, (a, b, bias, residual),
                            (ta, tb, tbias, tres))
    return tan


@pytest.mark.parametrize("choice", ["aten", TILE])
def test_forward_ad_through_matmul_carries_the_tangent(choice, device):
    """Under ``forward_ad.dual_level`` a dual operand's tangent came back None from a Triton choice
    (the kernel reads the primal's memory; no error), and ``aten`` raised torch's "mm_out does not
    support forward AD". A patched Linear and nn.BMM run torch's own forward there; so does matmul."""
    _need_triton(device, choice)
    m, n, k = 5, 6, 7
    a, ta, b, tb = (torch.randn(*s, device=device) for s in ((m, k), (m, k), (k, n), (k, n)))
    bias, tbias, res, tres = (torch.randn(*s, device=device) for s in ((n,), (n,), (m, n), (m, n)))
    with fwAD.dual_level():
        y = gemmtune.matmul(fwAD.make_dual(a, ta), fwAD.make_dual(b, tb), choice=choice,
                            bias=fwAD.make_dual(bias, tbias), activation="silu", residual=fwAD.make_dual(res, tres))
        primal, tangent = fwAD.unpack_dual(y)
    assert tangent is not None, "the tangent was dropped"
    torch.testing.assert_close(primal.double(), (F.silu(a.double() @ b.double() + bias.double()) + res.double()),
                               rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(tangent.double(), _tangent_ref(a, ta, b, tb, bias, tbias, res, tres),
                               rtol=1e-4, atol=1e-4)


def test_forward_ad_through_a_dispatcher_carries_the_tangent(device):
    """The same through a dispatcher called directly (``mm(a, b)``), whose cached closure for the
    shape ran the tuned kernel on the primal."""
    _need_triton(device, TILE)
    mm = gemmtune.compile_mm(n=6, k=7, dtype="fp32", hints={"m": [8]},
                             tune_fn=lambda ps, **kw: {p.key: TILE for p in ps})
    a, ta, b = torch.randn(5, 7, device=device), torch.randn(5, 7, device=device), torch.randn(7, 6, device=device)
    mm(a, b)  # the shape decided and cached first, as in a served model
    with fwAD.dual_level():
        primal, tangent = fwAD.unpack_dual(mm(fwAD.make_dual(a, ta), b))
    assert tangent is not None, "the tangent was dropped"
    torch.testing.assert_close(tangent.double(), ta.double() @ b.double(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(primal.double(), a.double() @ b.double(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("transform", ["vmap", "jvp", "grad"])
def test_torch_func_transforms_over_matmul_give_torchs_answer(transform, device):
    """``torch.func.vmap`` / ``jvp`` / ``grad`` over ``gemmtune.matmul`` raised "Cannot access data
    pointer of Tensor that doesn't have storage" from the problem's alignment check."""
    _need_triton(device, TILE)
    a, b, t = torch.randn(3, 5, 7, device=device), torch.randn(7, 6, device=device), torch.randn(5, 7, device=device)
    f = lambda x: gemmtune.matmul(x, b, choice=TILE)  # noqa: E731
    if transform == "vmap":
        got, want = torch.func.vmap(f)(a), a.double() @ b.double()
    elif transform == "jvp":
        got, want = torch.func.jvp(f, (a[0],), (t,))[1], t.double() @ b.double()
    else:
        got, want = torch.func.grad(lambda x: f(x).sum())(a[0]), torch.ones(5, 6, dtype=torch.float64) @ b.double().T
    torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4)


def _fp8_inputs(device, m=16, n=32, k=64):
    f8 = torch.float8_e4m3fn
    a = torch.randn(m, k, device=device).to(f8)
    b = torch.randn(n, k, device=device).to(f8).t()
    return a, b, torch.rand(m, 1, device=device) + 0.5, torch.rand(1, n, device=device) + 0.5


@pytest.mark.parametrize("choice, out_dtype", [("triton_mm:BM16-BN32-BK32-S1-W4-G8", torch.float32),
                                               ("pad+aten", torch.bfloat16)])  # (row-wise cuBLASLt: bf16 only)
def test_scaled_mm_with_a_trainable_bias_does_not_drop_its_gradient_silently(choice, out_dtype, device):
    """A bias (or scale) that requires grad: torch._scaled_mm records a backward that raises
    ("derivative for aten::_scaled_mm is not implemented"); through a Triton family the result had
    no grad_fn at all, so ``(y.sum() + bias.sum()).backward()`` ran and left bias.grad missing y's
    share, without a word."""
    _need_triton(device, choice)
    a, b, sa, sb = _fp8_inputs(device)
    bias = torch.randn(32, device=device, dtype=out_dtype, requires_grad=True)
    y = gemmtune.scaled_mm(a, b, sa, sb, bias=bias, out_dtype=out_dtype, choice=choice)
    assert y.requires_grad
    with pytest.raises(RuntimeError, match="not implemented|not differentiable"):
        (y.sum() + bias.sum()).backward()
    with torch.no_grad():  # and without autograd, nothing changes
        z = gemmtune.scaled_mm(a, b, sa, sb, bias=bias, out_dtype=out_dtype, choice=choice)
    assert z.grad_fn is None
    torch.testing.assert_close(z.detach(), y.detach())


def test_scaled_mm_of_meta_tensors_with_a_triton_choice_is_refused_by_name():
    """``gemmtune.matmul`` refuses a Triton choice on ``meta`` tensors by name; scaled_mm raised
    "Tensor.item() cannot be called on meta tensors" from its finite-scales check, and with
    ``check_finite=False`` "Cannot copy out of meta tensor; no data!" from deep in the interpreter."""
    a, b, sa, sb = _fp8_inputs("meta")
    for check_finite in (True, False):
        with pytest.raises(ValueError, match="meta"):
            gemmtune.scaled_mm(a, b, sa, sb, choice="triton_mm:BM16-BN32-BK32-S1-W4-G8", check_finite=check_finite)


def _saved_shapes(fn) -> list[tuple]:
    """The shapes of the tensors autograd keeps for the backward of ``fn()``."""
    shapes = []

    def pack(t):
        shapes.append(tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return shapes


@pytest.mark.parametrize("path", ["matmul", "linear"])
def test_a_frozen_product_keeps_only_what_its_backward_reads(path, device):
    """With only the input requiring grad (a frozen layer between trainable ones, a LoRA base layer),
    torch keeps the weight alone for ``grad_x = grad @ W``; gemmtune kept the (M, K) input alive too,
    until the backward (activation memory torch does not spend), and raised torch's version-counter
    error when the input was changed in place after the forward, which torch's own backward never
    reads. Through the ``gemmtune::mm`` op (a patched Linear) as through a direct call."""
    _need_triton(device, TILE)
    m, n, k = 24, 6, 40  # M != N != K: each saved shape says which tensor it is
    x = torch.randn(m, k, device=device, requires_grad=True)
    w = torch.randn(n, k, device=device)
    if path == "matmul":
        f = lambda x: gemmtune.matmul(x, w.t(), choice=TILE)  # noqa: E731
    else:
        d = gemmtune.compile_mm(n=n, k=k, dtype="fp32", layout_b="col", hints={"m": [8]},
                                tune_fn=lambda ps, **kw: {p.key: TILE for p in ps})
        lin = gemmtune.nn.Linear(k, n, bias=False, device=device, dispatcher=d).requires_grad_(False)
        with torch.no_grad():
            lin.weight.copy_(w)
        f = lin
    saved = _saved_shapes(lambda: f(x))
    assert (m, k) not in saved, f"the input is kept for the backward: {saved}"
    h = x * 1.0  # a non-leaf changed in place after the product: torch's backward never reads it
    y = f(h)
    with torch.no_grad():
        h.mul_(2)
    g = torch.randn(m, n, device=device)
    y.backward(g)
    torch.testing.assert_close(x.grad.double(), g.double() @ w.double(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("choice", ["aten", TILE])
def test_inference_operands_with_a_trainable_bias_and_residual(choice, device):
    """Operands made under ``torch.inference_mode`` (a cached activation, weights loaded there)
    with a bias and a residual that require grad: torch's ``addmm`` + add keeps neither operand
    (their gradients need neither), gemmtune saved both and raised "Inference tensors cannot be
    saved for backward"."""
    _need_triton(device, choice)
    with torch.inference_mode():
        a, b = torch.randn(5, 7, device=device), torch.randn(7, 6, device=device)
    bias = torch.randn(6, device=device, requires_grad=True)
    res = torch.randn(5, 6, device=device, requires_grad=True)
    y = gemmtune.matmul(a, b, choice=choice, bias=bias, residual=res)
    g = torch.randn(5, 6, device=device)
    y.backward(g)
    torch.testing.assert_close(bias.grad, g.sum(0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(res.grad, g)


def test_scaled_mm_takes_a_table_path_as_the_dispatchers_do(tmp_path, device):
    """``scaled_mm(..., table=path)`` (compile_mm, lookup and patch take a path) raised
    "AttributeError: 'str' object has no attribute 'choices'"; anything else that is not a table
    raised the same AttributeError. A path is now read (``table.as_table``), the rest refused."""
    from gemmtune import Problem
    from gemmtune.scaled import reference
    from gemmtune.table import LookupTable, TableChoice, provenance

    choice = "triton_mm:BM16-BN32-BK32-S1-W4-G8"
    _need_triton(device, choice)
    a, b, sa, sb = _fp8_inputs(device)
    p = Problem.from_tensors(a, b, "fp32", op="scaled_mm", scale="row")
    path = tmp_path / "fp8-table.json"
    path.write_text(LookupTable(provenance("t", "i", "x", "x", "x", "by-hand"),
                                {p.key: [TableChoice(gemmtune.Choice.parse(choice), 0.01)]}).dumps())
    out = gemmtune.scaled_mm(a, b, sa, sb, out_dtype=torch.float32, table=str(path))
    torch.testing.assert_close(out.double(), reference(a, b, sa, sb), rtol=5e-3, atol=5e-3)
    with pytest.raises(TypeError, match="table"):
        gemmtune.scaled_mm(a, b, sa, sb, out_dtype=torch.float32, table={p.key: choice})


@pytest.mark.parametrize("op", ["mm", "addmm"])
def test_the_spaces_of_an_empty_k_problem_are_listed_without_a_crash(op):
    """K = 0 (an ``nn.Linear(0, n)``, a product gemmtune.matmul answers with zeros plus the bias):
    skinny's space raised ZeroDivisionError from its plan (a K-slice of 0), and so did
    ``gemmtune.tune([...], fast=True)``, which asks for skinny's space whatever the families."""
    from gemmtune.kernels import spec

    p = gemmtune.Problem.from_sizes(8, 24, 0, "fp32", op=op)
    for family in gemmtune.families():
        choices = gemmtune.space(p, family, device="h100")
        for c in choices:
            plan = spec(family).plan(p.m, p.n, p.k, c.config)
            assert plan.get("splits", 1) >= 1, (c.id, plan)
