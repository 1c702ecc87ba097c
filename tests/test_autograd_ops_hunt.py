"""Defects found in the autograd of the tuned GEMMs and the ``gemmtune::*`` ops (gemmtune.autograd,
gemmtune.torch_ops): each test failed before its fix. CPU: Triton choices run in the interpreter."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD

import gemmtune
from gemmtune import torch_ops
from gemmtune.api import interpreter_enabled
from gemmtune.torch_ops import REGISTRY

TRITON = "triton_mm:BM16-BN16-BK16-S1-W2-G1"


def _mm(n=6, k=40, choice="aten", layout_b="row"):
    if choice != "aten" and not interpreter_enabled():
        pytest.skip("Triton choices on the CPU need TRITON_INTERPRET=1")
    return gemmtune.compile_mm(n=n, k=k, dtype="fp32", hints={"m": [8]}, layout_b=layout_b,
                               tune_fn=lambda ps, **kw: {p.key: choice for p in ps})


def test_torch_ops_mm_and_bmm_keep_a_forward_ad_tangent():
    """``torch_ops.mm(a, b, handle)`` (the module's documented entry) and ``torch_ops.bmm`` under
    forward-mode AD: the kernel read the primal's memory and the result came back with no tangent,
    without a word (a dispatcher called directly, a patched layer and nn.BMM keep it)."""
    d = _mm(choice=TRITON)
    h = REGISTRY.register(d)
    bd = gemmtune.nn.BMM(gemmtune.compile_bmm(batch=2, n=5, k=4, dtype="fp32", hints={"m": [3]},
                                              tune_fn=lambda ps, **kw: {p.key: TRITON for p in ps}))
    a, b, t = torch.randn(8, 40), torch.randn(40, 6), torch.randn(8, 40)
    a3, b3, t3 = torch.randn(2, 3, 4), torch.randn(2, 4, 5), torch.randn(2, 3, 4)
    with fwAD.dual_level():
        y = torch_ops.mm(fwAD.make_dual(a, t), b, h)
        y3 = torch_ops.bmm(fwAD.make_dual(a3, t3), b3, bd.handle)
        tangent, tangent3 = fwAD.unpack_dual(y).tangent, fwAD.unpack_dual(y3).tangent
    assert tangent is not None and tangent3 is not None
    torch.testing.assert_close(tangent, t @ b, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(tangent3, torch.bmm(t3, b3), rtol=1e-4, atol=1e-4)
    # torch.func.vmap: the kernel read a batched tensor's (absent) storage and raised deep inside
    xs = torch.randn(3, 8, 40)
    torch.testing.assert_close(torch.func.vmap(lambda x: torch_ops.mm(x, b, h))(xs), xs @ b, rtol=1e-4, atol=1e-4)


def test_the_ops_refuse_a_forward_ad_tangent_they_would_drop():
    """``torch.ops.gemmtune.mm`` / ``bmm`` called on a dual operand: the ops have no forward-AD
    rule, and returned a result with no tangent, without a word. Now they say so."""
    d = _mm()
    h = REGISTRY.register(d)
    bd = gemmtune.nn.BMM(None, dtype="fp32")
    with fwAD.dual_level():
        a = fwAD.make_dual(torch.randn(8, 40), torch.randn(8, 40))
        with pytest.raises(RuntimeError, match="forward-mode AD"):
            torch.ops.gemmtune.mm(a, torch.randn(40, 6), h)
        a3 = fwAD.make_dual(torch.randn(2, 3, 4), torch.randn(2, 3, 4))
        with pytest.raises(RuntimeError, match="forward-mode AD"):
            torch.ops.gemmtune.bmm(a3, torch.randn(2, 4, 5), bd.handle)
        with pytest.raises(RuntimeError, match="forward-mode AD"):  # (it ran torch's ops below autograd)
            torch.ops.gemmtune.matmul(a, torch.randn(40, 6), "aten")
        # an operand with no tangent inside the level still runs
        y = torch.ops.gemmtune.mm(torch.ones(8, 40), torch.ones(40, 6), h)
    torch.testing.assert_close(y, torch.full((8, 6), 40.0))


@pytest.mark.parametrize("grad", [False, True])
def test_the_bmm_op_refuses_2d_operands_as_its_fake_kernel_does(grad):
    """Eager, ``gemmtune::bmm`` (and ``torch_ops.bmm``) ran 2-D operands as an mm and returned a
    2-D result, where its fake kernel (torch.compile) and torch.bmm refuse them: a call that worked
    eagerly raised once compiled."""
    bd = gemmtune.nn.BMM(None, dtype="fp32")
    a, b = torch.randn(8, 40, requires_grad=grad), torch.randn(40, 6)
    with pytest.raises(RuntimeError, match="3-D operands, got 2-D and 2-D"):
        torch.ops.gemmtune.bmm(a, b, bd.handle)
    with pytest.raises(RuntimeError, match="3-D operands, got 2-D and 2-D"):
        torch_ops.bmm(a, b, bd.handle)


@pytest.mark.parametrize("grad", [False, True])
def test_the_mm_op_refuses_3d_operands_as_its_fake_kernel_does(grad):
    """Eager, ``gemmtune::mm`` (and ``torch_ops.mm``) ran 3-D operands as a bmm, where its fake
    kernel refuses them ("takes 2-D operands"): a call that worked eagerly raised once compiled."""
    d = _mm(n=5, k=4)
    h = REGISTRY.register(d)
    a, b = torch.randn(2, 3, 4, requires_grad=grad), torch.randn(2, 4, 5)
    with pytest.raises(RuntimeError, match="2-D operands, got 3-D and 3-D"):
        torch.ops.gemmtune.mm(a, b, h)
    with pytest.raises(RuntimeError, match="2-D operands, got 3-D and 3-D"):
        torch_ops.mm(a, b, h)


@pytest.mark.parametrize("choice", ["aten", TRITON])
def test_a_trainable_bias_over_inference_mode_operands_through_an_activation(choice):
    """Operands made under torch.inference_mode, a trainable bias, a fused activation: torch trains
    the bias (its activation keeps the pre-activation, not the operands); the backward's recompute
    kept the operands themselves, and raised "Inference tensors cannot be saved for backward"."""
    if choice != "aten" and not interpreter_enabled():
        pytest.skip("Triton choices on the CPU need TRITON_INTERPRET=1")
    with torch.inference_mode():
        x, w = torch.randn(8, 40), torch.randn(40, 6)
    bias = torch.randn(6, requires_grad=True)
    gemmtune.matmul(x, w, choice=choice, bias=bias, activation="gelu_tanh").sum().backward()
    got, bias.grad = bias.grad, None
    torch.nn.functional.gelu(torch.addmm(bias, x, w), approximate="tanh").sum().backward()
    torch.testing.assert_close(got, bias.grad, rtol=1e-4, atol=1e-4)
    d = _mm(choice=choice)  # the gemmtune::mm op's autograd too
    h = REGISTRY.register(d)
    bias.grad = None
    torch.ops.gemmtune.mm(x, w, h, bias, "gelu_tanh").sum().backward()
    torch.testing.assert_close(got, bias.grad, rtol=1e-4, atol=1e-4)


def test_bmm_module_and_route_leave_an_autocast_bmm_to_torch():
    """Under torch.autocast, torch.bmm of fp32 operands computes and returns bf16 (as a patched
    Linear's F.linear does); nn.BMM and route_bmm ran the fp32 dispatcher and returned fp32."""
    if not interpreter_enabled():
        pytest.skip("Triton choices on the CPU need TRITON_INTERPRET=1")
    d = gemmtune.compile_bmm(batch=2, n=5, k=4, dtype="fp32", hints={"m": [3]},
                             tune_fn=lambda ps, **kw: {p.key: TRITON for p in ps})
    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = torch.bmm(a, b)
        got = gemmtune.nn.BMM(d)(a, b)
        with gemmtune.nn.route_bmm(d) as r:
            routed = a @ b
    assert want.dtype == got.dtype == routed.dtype == torch.bfloat16
    assert r.routed == 0
    torch.testing.assert_close(got, want)
    with gemmtune.nn.route_bmm(d) as r:  # outside autocast: routed as before
        assert (a @ b).dtype == torch.float32 and r.routed == 1


@pytest.mark.parametrize("kind", ["neg", "sparse", "meta"])
def test_bmm_module_takes_a_negated_sparse_or_meta_operand_as_torch_bmm_does(kind):
    """nn.BMM is torch.bmm on a dispatcher: a negated view (``Tensor.is_neg()``), a sparse COO or a
    meta operand, which torch.bmm takes (and route_bmm leaves to it), raised the dispatcher's
    refusal (ValueError / TypeError) without grad, and ran with grad (the sign resolved; meta: the
    op's fake kernel)."""
    if not interpreter_enabled():
        pytest.skip("Triton choices on the CPU need TRITON_INTERPRET=1")
    d = gemmtune.compile_bmm(batch=2, n=5, k=4, dtype="fp32", hints={"m": [3]},
                             tune_fn=lambda ps, **kw: {p.key: TRITON for p in ps})
    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    if kind == "meta":
        x, bm = a.to("meta"), b.to("meta")
        y = gemmtune.nn.BMM(d)(x, bm)
        assert y.device.type == "meta" and y.shape == (2, 3, 5)
        return
    x = torch._neg_view(a) if kind == "neg" else a.to_sparse()
    torch.testing.assert_close(gemmtune.nn.BMM(d)(x, b), torch.bmm(x, b), rtol=1e-4, atol=1e-4)
    bg = b.clone().requires_grad_()  # with grad: the sparse one met the op's missing SparseCPU kernel
    gemmtune.nn.BMM(d)(x, bg).sum().backward()
    torch.testing.assert_close(bg.grad, torch.bmm(x.transpose(1, 2), torch.ones(2, 3, 5)), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="inner dimensions"):  # other refusals still raise
        gemmtune.nn.BMM(d)(a, torch.randn(2, 5, 5))


def test_route_bmm_entered_inside_a_fullgraph_compile():
    """``route_bmm(d)`` entered inside a compiled function (route_bmm's doc: "or entering it"): the
    mode registered its dispatcher under the registry's lock, a context manager dynamo cannot trace,
    so fullgraph=True raised (Unsupported context manager) and without it the graph broke."""
    from torch._dynamo.testing import CompileCounterWithBackend

    d = gemmtune.compile_bmm(batch=2, n=5, k=4, dtype="fp32", hints={"m": [3]},
                             tune_fn=lambda ps, **kw: {p.key: "aten" for p in ps})
    a, b = torch.randn(2, 3, 4, requires_grad=True), torch.randn(2, 4, 5)

    def inside(x, y):
        with gemmtune.nn.route_bmm(d):
            return torch.bmm(x, y) * 2

    torch._dynamo.reset()
    cnt = CompileCounterWithBackend("aot_eager")
    try:
        y = torch.compile(inside, backend=cnt, fullgraph=True)(a, b)
        assert cnt.frame_count == 1 and "torch.ops.gemmtune.bmm" in cnt.graphs[0].code
        y.sum().backward()
    finally:
        torch._dynamo.reset()
    torch.testing.assert_close(y, torch.bmm(a, b) * 2)
    torch.testing.assert_close(a.grad, 2 * torch.bmm(torch.ones(2, 3, 5), b.transpose(1, 2)))


def test_torch_save_of_a_model_with_a_bmm_module(tmp_path):
    """``torch.save(model)`` of a model holding an nn.BMM raised TypeError (a Dispatcher cannot be
    pickled) after torch had truncated the file: the checkpoint already at that path was destroyed.
    Now it saves, and loads as a BMM running torch.bmm; copies still share the dispatcher."""
    import copy

    d = gemmtune.compile_bmm(batch=2, n=5, k=4, dtype="fp32", hints={"m": [3]},
                             tune_fn=lambda ps, **kw: {p.key: "aten" for p in ps})
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), gemmtune.nn.BMM(d))
    path = tmp_path / "model.pt"
    torch.save(model, path)
    loaded = torch.load(path, weights_only=False)
    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    assert isinstance(loaded[1], gemmtune.nn.BMM)
    torch.testing.assert_close(loaded[1](a, b), torch.bmm(a, b))
    torch.testing.assert_close(loaded[0].weight, model[0].weight)
    for c in (copy.deepcopy(model), copy.copy(model[1])):
        m = c[1] if isinstance(c, torch.nn.Sequential) else c
        assert m.dispatcher is d and m.handle == model[1].handle
