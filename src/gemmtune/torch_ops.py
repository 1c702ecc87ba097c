"""PyTorch integration: the ``gemmtune::mm`` custom op and the registry it calls through.

``torch.ops.gemmtune.mm(a, b, handle)`` runs the dispatcher registered under the
int ``handle``. It is a ``torch.library.custom_op`` with a fake (meta) kernel, so
``torch.compile(dynamic=True)`` traces it as one opaque node with symbolic output
sizes (``256*s0``...) and no graph break, and calls the dispatcher at run time.
The handle is an int because a custom op's arguments must be tensors or plain
values; the dispatcher itself lives in a ``DispatcherRegistry``.

Backward: registered with ``register_autograd``; the two backward GEMMs
(grad_a = grad @ b.T, grad_b = a.T @ grad) run on **torch.mm (cuBLAS)**, not on the
dispatcher. They are different problems (for a Linear: M x K <- M x N . N x K, and
K x N <- K x M . M x N with the dynamic M as the reduction dim) that the forward's
tuned kernels were not tuned for; tuning them needs dispatchers of their own.

``mm(a, b, handle)`` is what callers use: in eager mode without autograd it calls
the dispatcher directly (a custom op costs ~7 us of dispatch per call in eager
mode, measured on the CPU); under torch.compile or when an input requires grad it
goes through the op.

Example::

    >>> from gemmtune.torch_ops import REGISTRY, mm
    >>> h = REGISTRY.register(dispatcher)                   # doctest: +SKIP
    >>> y = torch.compile(lambda a, b: mm(a, b, h), dynamic=True)(a, b)   # doctest: +SKIP
"""

from __future__ import annotations

import threading

import torch

from .dispatch import Dispatcher


class DispatcherRegistry:
    """Int handles for dispatchers, so a custom op (which takes plain values) can reach them.

    ``register`` is idempotent per dispatcher object. The registry holds strong
    references: a compiled graph may keep a handle after its module is gone, and a
    handle that vanished would fail at run time; ``unregister`` releases one.
    """

    def __init__(self) -> None:
        self._by_handle: dict[int, Dispatcher] = {}
        self._by_id: dict[int, int] = {}
        self._next = 0
        self._lock = threading.Lock()

    def register(self, dispatcher: Dispatcher) -> int:
        if not isinstance(dispatcher, Dispatcher):
            raise TypeError(f"expected a gemmtune Dispatcher, got {type(dispatcher).__name__}")
        with self._lock:
            h = self._by_id.get(id(dispatcher))
            if h is not None and self._by_handle.get(h) is dispatcher:
                return h
            h = self._next
            self._next += 1
            self._by_handle[h] = dispatcher
            self._by_id[id(dispatcher)] = h
            return h

    def get(self, handle: int) -> Dispatcher:
        try:
            return self._by_handle[handle]
        except KeyError:
            raise KeyError(f"no gemmtune dispatcher is registered under handle {handle!r} "
                           f"({len(self._by_handle)} registered)") from None

    def unregister(self, handle: int) -> None:
        with self._lock:
            d = self._by_handle.pop(handle, None)
            if d is not None:
                self._by_id.pop(id(d), None)

    def __len__(self) -> int:
        return len(self._by_handle)

    def __contains__(self, handle: int) -> bool:
        return handle in self._by_handle


# The one registry the op consults. torch.library ops are process-wide, so the
# table they read from is too; everything else takes dispatchers explicitly.
REGISTRY = DispatcherRegistry()


@torch.library.custom_op("gemmtune::mm", mutates_args=())
def _mm_op(a: torch.Tensor, b: torch.Tensor, handle: int) -> torch.Tensor:
    return REGISTRY.get(handle)(a, b)


@_mm_op.register_fake
def _mm_fake(a: torch.Tensor, b: torch.Tensor, handle: int) -> torch.Tensor:
    torch._check(a.dim() == 2 and b.dim() == 2,
                 lambda: f"gemmtune::mm takes 2-D operands, got {a.dim()}-D and {b.dim()}-D")
    torch._check(a.dtype == b.dtype, lambda: f"gemmtune::mm: dtypes differ: {a.dtype} and {b.dtype}")
    torch._check(a.shape[1] == b.shape[0],
                 lambda: f"gemmtune::mm: inner dimensions differ: {a.shape[1]} and {b.shape[0]}")
    d = REGISTRY._by_handle.get(handle)
    if d is not None:
        torch._check(a.dtype == d.torch_dtype,
                     lambda: f"gemmtune::mm: dtype: dispatcher multiplies {d.torch_dtype}, got {a.dtype}")
        for name, size in (("m", a.shape[0]), ("n", b.shape[1]), ("k", a.shape[1])):
            want = d.dims[name]
            if want is not None:
                torch._check(size == want, lambda name=name, want=want, size=size:
                             f"gemmtune::mm: {name}: static {name.upper()}={want}, got {size}")
    return a.new_empty((a.shape[0], b.shape[1]))


def _setup_context(ctx, inputs, output) -> None:
    a, b, _handle = inputs
    ctx.save_for_backward(a, b)


def _backward(ctx, grad):
    # torch.mm on purpose: see the module doc.
    a, b = ctx.saved_tensors
    ga = grad.mm(b.t()) if ctx.needs_input_grad[0] else None
    gb = a.t().mm(grad) if ctx.needs_input_grad[1] else None
    return ga, gb, None


_mm_op.register_autograd(_backward, setup_context=_setup_context)


def _use_op(*tensors) -> bool:
    if torch.compiler.is_compiling():
        return True
    if torch.is_grad_enabled():
        for t in tensors:
            if t is not None and t.requires_grad:
                return True
    return False


def mm(a: torch.Tensor, b: torch.Tensor, handle: int) -> torch.Tensor:
    """``a @ b`` through the dispatcher registered under ``handle``; differentiable, compilable."""
    if _use_op(a, b):
        return torch.ops.gemmtune.mm(a, b, handle)
    return REGISTRY.get(handle)(a, b)


def linear(x2d: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, handle: int) -> torch.Tensor:
    """``x2d @ weight.T + bias`` with the GEMM on the dispatcher under ``handle``."""
    if _use_op(x2d, weight, bias):
        y = torch.ops.gemmtune.mm(x2d, weight.t(), handle)
        return y if bias is None else y + bias
    y = REGISTRY.get(handle)(x2d, weight.t())
    return y if bias is None else y.add_(bias)  # y is ours and fresh: no second allocation


__all__ = ["DispatcherRegistry", "REGISTRY", "mm", "linear"]
