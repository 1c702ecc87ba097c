"""Gradients for gemmtune's products: one backward for the ``gemmtune::mm`` / ``gemmtune::bmm``
ops (gemmtune.torch_ops) and for the direct calls, ``gemmtune.matmul(...)`` and a dispatcher
called as ``mm(a, b)``.

A Triton kernel writes into a fresh output, which autograd knows nothing of: called directly
with an operand that requires grad, the result used to come back with no ``grad_fn`` (the
gradients silently dropped), or, for ``aten``, torch.mm refused its ``out=``. ``differentiable``
runs the same forward with autograd off and records this backward, so whichever kernel the
tuner picked, a direct call is differentiable.

The backward runs torch's products (cuBLAS), not the forward's tuned kernel: grad_a = grad @ b.T
and grad_b = a.T @ grad are different problems that the forward was not tuned for. Through an
activation the pre-activation ``a @ b + bias`` is recomputed with torch.addmm rather than kept
from the forward (an M x N tensor held per call).

Example (CPU, aten)::

    >>> import torch
    >>> from gemmtune.autograd import differentiable
    >>> a, b = torch.randn(3, 4, requires_grad=True), torch.randn(4, 2)
    >>> y = differentiable(lambda: a.detach() @ b, a, b)
    >>> y.sum().backward()
    >>> torch.allclose(a.grad, torch.ones(3, 2) @ b.T)
    True
"""

from __future__ import annotations

from typing import Callable, Optional

import torch
import torch.autograd.forward_ad as _fwAD

# torch.func's transform level (None outside vmap / grad / jvp); absent from older torch builds.
_functorch_level = getattr(getattr(torch._C, "_functorch", None), "maybe_current_level", lambda: None)


def needs_grad(*tensors: Optional[torch.Tensor]) -> bool:
    """Whether autograd records a product of ``tensors`` here: grad mode on and one requires grad."""
    if not torch.is_grad_enabled():
        return False
    return any(t is not None and getattr(t, "requires_grad", False) for t in tensors)


def transformed() -> bool:
    """Whether this call runs under forward-mode AD (a ``torch.autograd.forward_ad.dual_level``) or a
    ``torch.func`` transform (``vmap``, ``grad``, ``jvp``): the products then run as ``torch_product``.
    A kernel reads its operands' memory: a dual operand's tangent was dropped without a word (the
    result came back with none), and a transform's wrapped operand, which has no storage, failed
    deep inside ("Cannot access data pointer of Tensor that doesn't have storage"). Checked in ~0.1 us
    (a patched layer and nn.BMM ask the same, gemmtune.nn._transformed)."""
    return _fwAD._current_level >= 0 or _functorch_level() is not None


def torch_product(a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor] = None, activation: str = "none",
                  residual: Optional[torch.Tensor] = None, out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """``act(a @ b + bias) + residual`` in torch's own ops, which forward-mode AD and torch.func
    transform (``transformed``): as the ``aten`` family computes it (the bias through torch.addmm,
    the rest on the rounded output), in ``out_dtype`` (the operands upcast to it first, exact).
    The arguments are checked already."""
    if out_dtype is not None and out_dtype != a.dtype:
        a, b = a.to(out_dtype), b.to(out_dtype)
    if a.dim() == 3:
        x = torch.bmm(a, b)
    else:
        x = torch.mm(a, b) if bias is None else torch.addmm(bias, a, b)
    if activation == "relu":
        x = torch.relu(x)
    elif activation == "silu":
        x = torch.nn.functional.silu(x)
    elif activation in ("gelu_tanh", "gelu_erf"):
        x = torch.nn.functional.gelu(x, approximate="tanh" if activation == "gelu_tanh" else "none")
    return x if residual is None else x + residual


def _activation_backward(grad: torch.Tensor, z: torch.Tensor, activation: str) -> torch.Tensor:
    """d act(z) / dz times grad, with aten's own backward kernels."""
    if activation == "relu":
        return torch.ops.aten.threshold_backward(grad, z, 0)
    if activation == "silu":
        if torch.is_grad_enabled() and (grad.requires_grad or z.requires_grad):
            # A backward with create_graph=True (double backward, torch.autograd.functional.hessian):
            # aten.silu_backward has no derivative of its own ("derivative for aten::silu_backward
            # is not implemented"), so write it in differentiable ops, the formula torch's own
            # silu uses there (infinitely_differentiable_silu_backward).
            s = torch.sigmoid(z)
            return grad * s * (1 + z * (1 - s))
        return torch.ops.aten.silu_backward(grad, z)
    return torch.ops.aten.gelu_backward(grad, z, approximate="tanh" if activation == "gelu_tanh" else "none")


def saved_for(a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor], activation: str,
              need_a: bool, need_b: bool, need_bias: bool) -> tuple:
    """(a, b, bias), each None where ``grads`` will not read it: what the backward keeps alive.
    As torch's mm: grad_a reads b, grad_b reads a, grad_bias and grad_residual neither, and an
    activation's backward recomputes the pre-activation from all three. Keeping every operand
    held a frozen layer's (M, K) input until the backward (activation memory torch does not
    spend), raised torch's version-counter error for an operand changed in place that no
    gradient reads, and "Inference tensors cannot be saved for backward" for inference-mode
    operands under a trainable bias or residual."""
    if activation != "none" and (need_a or need_b or need_bias):
        # An inference tensor cannot be saved: one that torch's own ops would not save (torch's
        # activation keeps the M x N pre-activation instead) is copied, so a trainable bias over
        # inference-mode operands trains as with torch (it raised "Inference tensors cannot be
        # saved for backward"). Where torch saves it too, it raises as torch's does.
        return _savable(a, need_b), _savable(b, need_a), _savable(bias, False)
    return (a if need_b else None), (b if need_a else None), None


def _savable(t: Optional[torch.Tensor], torch_saves: bool) -> Optional[torch.Tensor]:
    return t.clone() if t is not None and not torch_saves and t.is_inference() else t


def grads(grad: torch.Tensor, a: Optional[torch.Tensor], b: Optional[torch.Tensor], bias: Optional[torch.Tensor],
          activation: str, need_a: bool, need_b: bool, need_bias: bool, need_residual: bool) -> tuple:
    """(grad_a, grad_b, grad_bias, grad_residual) of ``act(a @ b + bias) + residual``, None where
    not needed. ``a``, ``b`` and ``bias`` as ``saved_for`` keeps them (None where not read). 3-D
    operands (a bmm) take no epilogue; a broadcast (expanded) operand's gradient is summed over
    the batch by expand's own backward.

    An output wider than the operands (``gemmtune.matmul(..., out_dtype=torch.float32)`` of fp16
    or bf16 operands) has a gradient of the output's dtype: the products run in that dtype on
    the operands upcast (exact), and each gradient comes back in its input's dtype (the operands
    have one dtype). torch.mm refused the mixed dtypes, so such a backward raised."""
    held = a if a is not None else b
    dt = held.dtype if held is not None else grad.dtype
    if dt != grad.dtype:
        a = None if a is None else a.to(grad.dtype)
        b = None if b is None else b.to(grad.dtype)
    if grad.dim() == 3:
        ga = torch.bmm(grad, b.transpose(1, 2)).to(dt) if need_a else None
        gb = torch.bmm(a.transpose(1, 2), grad).to(dt) if need_b else None
        return ga, gb, None, None
    g = grad  # the gradient at the pre-activation a @ b + bias
    if activation != "none" and (need_a or need_b or need_bias):
        z = torch.mm(a, b) if bias is None else torch.addmm(bias, a, b)
        g = _activation_backward(grad, z, activation)
    ga = g.mm(b.t()).to(dt) if need_a else None
    gb = a.t().mm(g).to(dt) if need_b else None
    gbias = g.sum(0) if need_bias else None  # (need_bias: there is a bias)
    return ga, gb, gbias, (grad if need_residual else None)


class _Product(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run, activation, a, b, bias, residual):
        ctx.activation = activation
        _, _, na, nb, nbias, _ = ctx.needs_input_grad
        ctx.save_for_backward(*saved_for(a, b, bias, activation, na, nb, nbias))
        return run()

    @staticmethod
    def backward(ctx, grad):
        a, b, bias = ctx.saved_tensors
        _, _, na, nb, nbias, nres = ctx.needs_input_grad
        ga, gb, gbias, gres = grads(grad, a, b, bias, ctx.activation, na, nb, nbias, nres)
        return None, None, ga, gb, gbias, gres


def no_derivative(what: str) -> RuntimeError:
    """The error a backward through ``what`` (a product with no derivative: scaled_mm) raises, eager
    (``not_differentiable``) and compiled (the ``gemmtune::scaled_mm`` op's backward) alike."""
    return RuntimeError(f"derivative for {what} is not implemented (nor is torch._scaled_mm's): run it "
                        "with autograd off (torch.no_grad()), or multiply dequantized operands with "
                        "gemmtune.matmul, which is differentiable")


class _NoDerivative(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run, what, *tensors):
        ctx.what = what
        return run()

    @staticmethod
    def backward(ctx, grad):
        raise no_derivative(ctx.what)


def not_differentiable(run: Callable[[], torch.Tensor], what: str, *tensors: Optional[torch.Tensor]) -> torch.Tensor:
    """``run()`` with autograd off, recorded with a backward that raises naming ``what``: what torch
    records for an op with no derivative (``torch._scaled_mm``), so a gradient is never dropped
    without a word. A kernel's fresh output had no ``grad_fn`` at all: a loss through it and through
    another path backpropagated the other path alone."""
    return _NoDerivative.apply(run, what, *tensors)


def differentiable(run: Callable[[], torch.Tensor], a: torch.Tensor, b: torch.Tensor,
                   bias: Optional[torch.Tensor] = None, activation: str = "none",
                   residual: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``run()`` (the product ``act(a @ b + bias) + residual`` by any kernel) with autograd off,
    recorded with this module's backward for ``a``, ``b``, ``bias`` and ``residual``."""
    return _Product.apply(run, activation, a, b, bias, residual)


__all__ = ["needs_grad", "saved_for", "grads", "differentiable", "not_differentiable", "no_derivative", "transformed",
           "torch_product"]
