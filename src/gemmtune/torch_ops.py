"""PyTorch integration: the ``gemmtune::mm`` custom op and the registry it calls through.

``torch.ops.gemmtune.mm(a, b, handle, bias=None, activation="none", residual=None)``
runs the dispatcher registered under the int ``handle``: ``act(a @ b + bias) + residual``
with the epilogue fused into the GEMM's kernel (gemmtune.epilogue). The op is opaque to
Inductor, which therefore could not fuse a bias, activation or residual into it; taking
them as arguments is how they stay one launch. ``gemmtune.nn.Linear`` passes its bias.
It is a ``torch.library`` op (defined with ``Library``, with CPU/CUDA kernels, a fake (meta)
kernel and ``register_autograd``), so
``torch.compile(dynamic=True)`` traces it as one opaque node with symbolic output
sizes (``256*s0``...) and no graph break, and calls the dispatcher at run time.
The handle is an int because a custom op's arguments must be tensors or plain
values; the dispatcher itself lives in a ``DispatcherRegistry``.

Backward: registered with ``register_autograd``; the two backward GEMMs
(grad_a = grad @ b.T, grad_b = a.T @ grad) run on **torch.mm (cuBLAS)**, not on the
dispatcher. They are different problems (for a Linear: M x K <- M x N . N x K, and
K x N <- K x M . M x N with the dynamic M as the reduction dim) that the forward's
tuned kernels were not tuned for; tuning them needs dispatchers of their own.
The epilogue's gradients are torch ops too: grad_bias = the row sum of the gradient at
the pre-activation, grad_residual = grad. Through an activation the backward recomputes
the pre-activation ``a @ b + bias`` with torch.addmm (one more GEMM) rather than saving it
in the forward (an M x N tensor kept alive, and a second output the fused kernel would
have to write), then applies aten's own activation backward (gelu_backward, silu_backward,
threshold_backward).

``torch.ops.gemmtune.bmm(a, b, handle)`` is the batched product: 3-D operands (batch, M, K)
and (batch, K, N) through the same registered dispatcher (which decides a bmm per (batch,
M, N, K); gemmtune.dispatch), with a fake kernel of output (batch, M, N) and a backward on
torch.bmm. ``bmm(a, b, handle)`` calls it as ``mm`` does.

Under Inductor with coordinate-descent tuning on (``mode="max-autotune"``, or
``options={"coordinate_descent_tuning": True}``), a ``gemmtune::mm`` whose M is statically 1 on
a GPU is handed back to Inductor as ``torch.mm`` plus its epilogue in torch ops
(``gemv_to_inductor``): Inductor lowers that GEMV to a reduction which it fuses with its
neighbours (an RMSNorm before it, SiLU-times-up before a down projection, the sibling GEMVs
that read the same input) and tunes. Measured on an H100 (2026-11-25, Llama-3.2-1B decode at
batch 1, CUDA graphs, interleaved): with the op opaque there, the patched model took 1.670 ms
against 1.538 ms for the same compile unpatched (0.921x), its 33 M=1 tuned kernels unable to
fuse. In a graph whose sibling layers gemmtune fused (``gemmtune.fuse_linears``, merged by
``fuse_compile``) the op stays: there the tuned GEMVs won (1.183x on the H200, the comment at
``GEMV_HANDBACK_ENV``). Without coordinate-descent tuning Inductor sends an M=1 mm to cuBLAS,
so the tuned kernel (which beat cuBLAS when the tuner picked it) stays.

Under any Inductor compile, a ``gemmtune::mm`` whose sizes are all static and whose dispatcher
expects cuBLAS there (``aten_to_inductor``) is handed back the same way: the op would only
wrap the same cuBLAS call in Python, and Inductor fuses the epilogue into its own kernels.

``mm(a, b, handle)`` is what callers use: in eager mode without autograd it calls
the dispatcher directly (the op costs ~8 us of dispatch per call on top of the dispatcher's
2.4 us, measured on the CPU; 13 us as a ``torch.library.custom_op``); under torch.compile or
when an input requires grad it goes through the op.

Example (skipped in doctests: ``dispatcher``, ``a`` and ``b`` stand for your own)::

    >>> from gemmtune.torch_ops import REGISTRY, mm
    >>> h = REGISTRY.register(dispatcher)                   # doctest: +SKIP
    >>> y = torch.compile(lambda a, b: mm(a, b, h), dynamic=True)(a, b)   # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import os
import threading
import warnings
import weakref
from typing import Optional

import torch
import torch.autograd.forward_ad as _fwAD

from .autograd import grads, needs_grad, no_derivative, saved_for, transformed
from .dispatch import Dispatcher
from .dispatch.common import ATEN
from .epilogue import check_activation


def content_key(d: Dispatcher) -> int:
    """An int64 digest of what Inductor's hand-back of a ``gemmtune::mm`` node reads from ``d``
    (``Dispatcher.expected_choice``): its sizes, dtype, layouts and mode, its hint choices, its
    table's entries in table mode (the only mode whose choice reads them, ``Deciding._listed``),
    the decisions made so far (DispatcherRegistry says why), and whether it has a ``-pdl`` twin
    (gemmtune.pdl)."""
    parts = [repr(sorted(d.dims.items())), d.dtype, d.layout_a, d.layout_b, d.mode,
             repr([(h.sizes, h.choice.id) for h in d.hint_choices]),
             repr(sorted((k, dec.choice.id) for k, dec in d.decisions.items()))]
    if d.mode == "table" and d.table is not None:
        parts.append(repr(sorted((key, [tc.choice.id for tc in tcs]) for key, tcs in d.table.entries.items())))
    if getattr(d, "pdl_twin", None) is not None:
        # A graph lowered with Inductor's PDL on names the twin instead (pdl_twin_handle): not the
        # graph of the same dispatcher without one, which Inductor's caches must not mix up.
        parts.append("pdl-twin")
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest()
    # 2**40 and up (never a small literal a test or a user might pass), below 2**62: an int64.
    return (1 << 40) + int.from_bytes(digest, "little") % (1 << 61)


class DispatcherRegistry:
    """Int handles for dispatchers, so a custom op (which takes plain values) can reach them.

    ``register`` is idempotent per dispatcher object. The registry holds strong
    references: a compiled graph may keep a handle after its module is gone, and a
    handle that vanished would fail at run time; ``unregister`` releases one.

    A handle is baked into the graphs torch.compile traces, and Inductor's on-disk caches
    (AOTAutograd's and the FX graph cache) key a graph by its text. What Inductor makes of a
    ``gemmtune::mm`` node depends on the dispatcher behind the handle: it is handed back as
    ``torch.mm`` where that dispatcher expects cuBLAS (``aten_to_inductor``). With handles counted
    from 0 in every process, a graph compiled by an earlier process whose handle 0 was another
    dispatcher (another table, before a re-tune) was loaded from the cache with that process's
    decision: a layer tuned to a Triton kernel ran cuBLAS. So a handle is a digest of what the
    decision reads (``content_key``: sizes, dtype, layouts, mode, hint choices, the table's
    entries and the decisions made so far), taken when the dispatcher is first registered: a
    later process with the same tables gets the same handles and reuses the cache; another table
    gets other handles. (Random handles, tried first, closed the hazard too, but a later run of the
    same script could then never reuse a compiled graph.) Two dispatchers of the same content in one process
    take the digest and the next free ints.
    """

    def __init__(self) -> None:
        self._by_handle: dict[int, Dispatcher] = {}
        self._by_id: dict[int, int] = {}
        self._lock = threading.Lock()

    def register(self, dispatcher: Dispatcher) -> int:
        if not isinstance(dispatcher, Dispatcher):
            raise TypeError(f"expected a gemmtune Dispatcher, got {type(dispatcher).__name__}")
        with self._lock:
            h = self._by_id.get(id(dispatcher))
            if h is not None and self._by_handle.get(h) is dispatcher:
                return h
            h = content_key(dispatcher)
            while h in self._by_handle:
                h += 1
            self._by_handle[h] = dispatcher
            self._by_id[id(dispatcher)] = h
            return h

    def get(self, handle: int) -> Dispatcher:
        try:
            return self._by_handle[handle]
        except KeyError:
            pass
        twin = self._pdl_twin_under(handle)
        if twin is not None:
            return twin
        raise KeyError(f"no gemmtune dispatcher is registered under handle {handle!r} "
                       f"({len(self._by_handle)} registered)")

    def find(self, handle) -> Dispatcher | None:
        """The dispatcher under ``handle``, or None (an unknown handle, or a SymInt one that a
        closure captured under dynamic=True: nothing to read at trace time then)."""
        return self._by_handle.get(handle) if isinstance(handle, int) else None

    def _pdl_twin_under(self, handle) -> Dispatcher | None:
        """The ``-pdl`` twin (gemmtune.pdl) of a registered dispatcher that has none yet, whose
        content digest is ``handle``, attached and registered; else None. A graph compiled with
        Inductor's PDL on names a twin's handle (pdl_twin_handle). Inductor's on-disk caches key a
        graph before that rewrite (AOTAutograd's), by its handles and the config. A handle says
        whether its dispatcher has a twin (content_key), but a twin attached after the dispatcher
        registered (``patch(pdl=True)``'s layers tuned one by one) leaves the handle as it was, so
        a later process without ``pdl=True`` can be handed that graph: it runs the twin too,
        rather than fail on an unknown handle."""
        if not isinstance(handle, int):
            return None
        from .pdl import twin_dispatcher
        for d in list(self._by_handle.values()):
            if getattr(d, "pdl_twin", None) is not None:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # (before Hopper: no twin, and no warning per miss)
                t = twin_dispatcher(d)
            if t is not d and content_key(t) == handle:
                d.pdl_twin = t
                if self.register(t) == handle:
                    return t
        return None

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


# Defined with torch.library.Library and a plain backend kernel rather than
# torch.library.custom_op: custom_op wraps the kernel in Python layers of its own (a dynamo
# guard, alias checks) that cost ~7 us per call on a CPU (measured: op 15.5 us against the
# dispatcher's 2.4 us); a compiled model calls this op once per patched layer per step.
_LIB = torch.library.Library("gemmtune", "DEF")
_LIB.define("mm(Tensor a, Tensor b, int handle, Tensor? bias=None, str activation='none', "
            "Tensor? residual=None) -> Tensor")


def _refuse_tangents(op: str, *tensors: Optional[torch.Tensor]) -> None:
    """The ops have no forward-AD rule and their kernels read the primal's memory: a dual operand's
    tangent was dropped without a word (the result had none). Raise instead, naming the way out.
    Off a ``dual_level`` this costs one int compare."""
    if _fwAD._current_level >= 0 and any(t is not None and _fwAD.unpack_dual(t).tangent is not None
                                         for t in tensors):
        raise RuntimeError(f"gemmtune::{op} has no forward-mode AD rule (an operand carries a tangent): "
                           "call the dispatcher itself, a patched layer or gemmtune.torch_ops.mm/bmm, "
                           "which run torch's ops there")


def _check_rank(op: str, a: torch.Tensor, b: torch.Tensor, rank: int) -> None:
    """The op's fake kernel's rank rule, eager too: the dispatcher runs 2-D operands as an mm and
    3-D ones as a bmm, so an eager call of the wrong rank returned a result where the same call,
    compiled, raised."""
    if a.dim() != rank or b.dim() != rank:
        raise RuntimeError(f"gemmtune::{op} takes {rank}-D operands, got {a.dim()}-D and {b.dim()}-D")


def _mm_op(a: torch.Tensor, b: torch.Tensor, handle: int, bias: Optional[torch.Tensor] = None,
           activation: str = "none", residual: Optional[torch.Tensor] = None) -> torch.Tensor:
    _check_rank("mm", a, b, 2)
    _refuse_tangents("mm", a, b, bias, residual)
    return REGISTRY.get(handle)._run(a, b, bias, activation, residual)


for _key in ("CPU", "CUDA"):
    _LIB.impl("mm", _mm_op, _key)


def _check_dispatcher(op: str, handle, dtype, m, n, k) -> None:
    """At trace time: the operands' dtype and every static dim agree with the dispatcher behind
    ``handle``. A handle captured from a closure under dynamic=True arrives as a SymInt
    (unhashable): then there is no dispatcher to check against here, and the run-time call still
    gets the int."""
    d = REGISTRY.find(handle)
    if d is None:
        return
    torch._check(dtype == d.torch_dtype,
                 lambda: f"gemmtune::{op}: dtype: dispatcher multiplies {d.torch_dtype}, got {dtype}")
    for name, size in (("m", m), ("n", n), ("k", k)):
        want = d.dims[name]
        if want is not None:
            torch._check(size == want, lambda name=name, want=want, size=size:
                         f"gemmtune::{op}: {name}: static {name.upper()}={want}, got {size}")


# Devices whose M=1 op goes back to Inductor under coordinate-descent tuning: Inductor's own
# mm decomposition makes a reduction of an M=1 mm only off the CPU (and MPS).
GEMV_DEVICES = ("cuda",)
_GEMV_REGISTERED = False


# The hand-back's default, measured on the H200 (Llama-3.2-1B decode b1, coordinate descent, one
# process per model, CUDA graphs, interleaved; scripts/exp_gemv_handback.py):
# - a fused + patched model (q/k/v and gate/up already one GEMM each): no hand-back 1.183x
#   handing every M=1 op back in session 34 (16 MiB and up handed back: 1.033x), 1.057x in
#   session 35 (the step's GEMMs at 65% of the HBM floor against 53%). Session 33's kernel
#   profile put Inductor's reductions of the 8-13 MB q+k+v and o weights at 30-45% of the floor;
# - an unfused patched model (session 35): handing every one back 1.044x none (1.189 against
#   1.241 ms). There Inductor reduces the siblings that read one input (q, k, v; gate, up) in one
#   kernel, which is what fusing them does for the tuned kernels.
# So by default an M=1 op is handed back unless its graph holds a fused group that gemmtune's
# pre-grad pass merged (fuse_compile.merge says so per graph, ``note_graph_fused``).
# ``GEMMTUNE_GEMV_HANDBACK_MIN_BYTES`` overrides that for every graph: the op is handed back only
# where B holds at least that many bytes (0: every one; inf: none), read at trace time.
GEMV_HANDBACK_ENV = "GEMMTUNE_GEMV_HANDBACK_MIN_BYTES"

# Whether the graph being compiled in this thread had fused groups merged: None, or a weak
# reference to the dynamo tracing context of the graph merge saw merged groups in. A thread-local,
# not an argument: Inductor calls a decomposition with the op's own arguments only. merge runs
# under that graph's tracing context right before AOTAutograd applies the decomposition to the
# same graph in the same thread (checked: one context object for both); matching the context,
# not a bare flag, means a later graph that the pass did not see (its slot emptied by
# ``config.patch``, another backend, a graph traced by make_fx with no context at all) never reads
# an earlier graph's answer: the first version, which let "no context" match "no context", kept
# such a graph's M=1 ops after a fused graph had been compiled in the same thread. Caching stays
# consistent: the graph AOTAutograd's cache keys on is the one the pass produced, which holds the
# merged GEMMs exactly when this was set.
_GRAPH = threading.local()


def _tracing_context():
    from torch._guards import TracingContext
    return TracingContext.try_get()


def note_graph_fused(fused: bool) -> None:
    """Record whether the graph being lowered now (this thread, this tracing context) holds
    merged fused groups (``fuse_compile.merge`` calls it for every graph; ``gemv_to_inductor``
    reads it). Outside a tracing context (a graph pass run by hand) nothing is recorded: no later
    graph could be told from it."""
    ctx = _tracing_context() if fused else None
    _GRAPH.fused_in = None if ctx is None else weakref.ref(ctx)


def _graph_fused() -> bool:
    ref = getattr(_GRAPH, "fused_in", None)
    if ref is None:
        return False
    ctx = ref()
    return ctx is not None and ctx is _tracing_context()  # (a dead context is no graph's)


def gemv_handback_min_bytes() -> Optional[int]:
    """``GEMMTUNE_GEMV_HANDBACK_MIN_BYTES`` as an int >= 0 (``inf``: never hand back), or None
    when unset (the default rule above); a bad value warns and counts as unset."""
    raw = os.environ.get(GEMV_HANDBACK_ENV, "").strip()
    if not raw:
        return None
    if raw.lower() in ("inf", "never", "none"):
        return 1 << 62
    try:
        v = int(raw)
        if v < 0:
            raise ValueError
        return v
    except ValueError:
        warnings.warn(f"{GEMV_HANDBACK_ENV}={raw!r} is not a byte count (an int >= 0, or inf): ignored",
                      RuntimeWarning, stacklevel=2)
        return None


def gemv_to_inductor(a: torch.Tensor, b: Optional[torch.Tensor] = None) -> bool:
    """True when a traced ``gemmtune::mm`` with operands ``a`` and ``b`` should be lowered back
    to ``torch.mm`` for Inductor (the module doc says why): coordinate-descent tuning is on, ``a``
    is on a GPU and its M is statically 1 (a dynamic M never is, so nothing is specialised), and
    either ``b`` holds at least ``gemv_handback_min_bytes()`` bytes or, with that unset, the graph
    holds no fused group merged by gemmtune (``note_graph_fused``)."""
    from torch._inductor import config
    from torch.fx.experimental.symbolic_shapes import statically_known_true
    if not (bool(config.coordinate_descent_tuning) and a.device.type in GEMV_DEVICES
            and statically_known_true(a.shape[0] == 1)):
        return False
    least = gemv_handback_min_bytes()
    if least is None:
        return not _graph_fused()
    if not least or b is None:
        return True
    sizes = (b.shape[-2], b.shape[-1])
    if not all(isinstance(x, int) for x in sizes):
        return True  # a dynamic N or K: as 0
    return sizes[0] * sizes[1] * b.element_size() >= least


def aten_to_inductor(a: torch.Tensor, b: torch.Tensor, handle, bias: bool = False) -> bool:
    """True when a traced ``gemmtune::mm`` of static sizes would run cuBLAS anyway: the
    dispatcher under ``handle`` expects ``aten`` (unpadded) at those sizes
    (Dispatcher.expected_choice). Handed back as ``torch.mm`` plus its epilogue, Inductor fuses
    the bias and activation and launches from its own wrapper; kept as the op, each call paid the
    custom op's Python around the same cuBLAS call. Measured on an H200 (2026-11-26,
    all-MiniLM-L6-v2, 64 sentences, 24 patched layers expecting cuBLAS): patch + compile
    3.575 ms against 1.329 ms for the same compile unpatched. A dynamic size never qualifies.
    ``bias``: the call has a bias, so it runs the table's ``addmm`` winner where the table has
    one (``Dispatcher.expected_choice(bias=True)``): a Triton addmm winner keeps the op even
    where the size's mm choice is cuBLAS, and an ``aten`` one hands it back."""
    d = REGISTRY.find(handle)
    if d is None:
        return False
    sizes = (a.shape[0], b.shape[1], a.shape[1])
    if not all(isinstance(s, int) for s in sizes):
        return False
    try:
        choice = d.expected_choice(*sizes, bias=bias)
    except (ValueError, KeyError):
        return False
    return choice == ATEN


def pdl_twin_handle(handle) -> Optional[int]:
    """The registry handle of the ``-pdl`` twin of the dispatcher under ``handle``
    (``Dispatcher.pdl_twin``, gemmtune.pdl.attach_twins) where the graph being compiled has
    Inductor's PDL on (``torch._inductor.config.triton.enable_pdl``, read as the graph is
    lowered), else None. With Inductor's PDL on, its kernels let the next kernel launch early,
    which is what a -pdl strip gains from (1.025-1.061x a compiled Llama-1B decode step on an
    H200); after kernels that do not, it is ~1 us slower than the plain strip, so eager calls
    and graphs compiled with Inductor's PDL off keep the plain dispatcher."""
    from torch._inductor import config
    if not config.triton.enable_pdl:
        return None
    d = REGISTRY.find(handle)
    twin = getattr(d, "pdl_twin", None)
    return None if twin is None else REGISTRY.register(twin)


def _gemv_decomposition(a, b, handle, bias=None, activation="none", residual=None):
    if not (gemv_to_inductor(a, b) or aten_to_inductor(a, b, handle, bias is not None)):
        twin = pdl_twin_handle(handle)
        if twin is not None:  # the same op on the twin (which has no twin: no further rewrite)
            return torch.ops.gemmtune.mm(a, b, twin, bias, activation, residual)
        return NotImplemented  # the op stays one opaque node: the tuned kernel runs
    x = torch.mm(a, b)
    if bias is not None:
        x = x + bias
    if activation == "relu":
        x = torch.relu(x)
    elif activation == "silu":
        x = torch.nn.functional.silu(x)
    elif activation != "none":
        x = torch.nn.functional.gelu(x, approximate="tanh" if activation == "gelu_tanh" else "none")
    return x if residual is None else x + residual


def register_inductor_gemv() -> bool:
    """Add ``_gemv_decomposition`` to Inductor's decomposition table, once per process (the
    op's fake kernel calls this, so it is in place before Inductor lowers the first traced
    graph; importing Inductor costs ~1.6 s, paid only by a process that compiles). False when
    this torch has no Inductor."""
    global _GEMV_REGISTERED
    if _GEMV_REGISTERED:
        return True
    try:
        from torch._inductor import decomposition as idecomp, lowering
    except ImportError:
        return False
    from .normfold import rms_pdl_decomposition
    for op, fn in ((torch.ops.gemmtune.mm.default, _gemv_decomposition),
                   (torch.ops.gemmtune.rms_mm.default, rms_pdl_decomposition)):
        if op not in lowering.lowerings:
            # Where the decomposition declines (M > 1), the op reaches Inductor's lowering, whose
            # implicit fallback for a custom op asserts that the op has no decomposition. Register
            # that same fallback (the layout constraint Inductor would derive from the op's tags)
            # up front, allowed beside the decomposition.
            try:
                from torch._library.utils import get_layout_constraint_tag
                constraint = lowering.tag_to_layout_constraint(get_layout_constraint_tag(op, with_default=True))
            except (ImportError, AttributeError):
                constraint = None
            lowering.make_fallback(op, layout_constraint=constraint, warn=False, override_decomp=True)
        if op not in idecomp.decompositions:
            idecomp.register_decomposition([op])(fn)
    cached = getattr(idecomp, "fast_random_decomps", None)
    if hasattr(cached, "cache_clear"):  # some torch versions cache the merged table
        cached.cache_clear()
    _GEMV_REGISTERED = True
    return True


def check_devices(op: str, a: torch.Tensor, **others: Optional[torch.Tensor]) -> None:
    """Every tensor argument of a ``gemmtune::*`` op on ``a``'s device. Called by the ops' fake
    kernels, which are also their Meta kernels: the backend kernel of a call is picked from all its
    tensor arguments, Meta before CPU and CUDA, so CPU operands with a B, bias or residual left on
    ``meta`` (a model built there and not fully materialised) ran the fake kernel as the op and
    returned ``new_empty``'s uninitialised memory as the product, with no error (the op is what
    ``torch.compile(dynamic=True)`` and autograd call; eager, the dispatcher refuses it by name)."""
    for name, t in others.items():
        if t is not None:
            torch._check(t.device == a.device, lambda name=name, t=t:
                         f"gemmtune::{op}: {name} must be on a's device {a.device}, got {t.device}")


@torch.library.register_fake("gemmtune::mm", lib=_LIB)
def _mm_fake(a: torch.Tensor, b: torch.Tensor, handle: int, bias: Optional[torch.Tensor] = None,
             activation: str = "none", residual: Optional[torch.Tensor] = None) -> torch.Tensor:
    register_inductor_gemv()
    check_activation(activation)
    torch._check(a.dim() == 2 and b.dim() == 2,
                 lambda: f"gemmtune::mm takes 2-D operands, got {a.dim()}-D and {b.dim()}-D")
    torch._check(a.dtype == b.dtype, lambda: f"gemmtune::mm: dtypes differ: {a.dtype} and {b.dtype}")
    check_devices("mm", a, b=b, bias=bias, residual=residual)
    # The epilogue's dtype as the dispatcher checks it (epilogue.bind): a static size expecting
    # cuBLAS is handed back to Inductor as torch.mm + bias (aten_to_inductor), which promoted an
    # fp64 bias of an fp32 product to an fp64 output where eager and dynamic=True raised.
    for name, t in (("bias", bias), ("residual", residual)):
        if t is not None:
            torch._check(t.dtype == a.dtype, lambda name=name, t=t:
                         f"gemmtune::mm: {name} must have the output's dtype {a.dtype}, got {t.dtype}")
    torch._check(a.shape[1] == b.shape[0],
                 lambda: f"gemmtune::mm: inner dimensions differ: {a.shape[1]} and {b.shape[0]}")
    _check_dispatcher("mm", handle, a.dtype, a.shape[0], b.shape[1], a.shape[1])
    if bias is not None:
        torch._check(bias.dim() == 1 and bias.shape[0] == b.shape[1],
                     lambda: f"gemmtune::mm: bias must have shape (N,) = ({b.shape[1]},), got {tuple(bias.shape)}")
    if residual is not None:
        torch._check(residual.dim() == 2 and residual.shape[0] == a.shape[0] and residual.shape[1] == b.shape[1],
                     lambda: f"gemmtune::mm: residual must have shape (M, N) = ({a.shape[0]}, {b.shape[1]}), "
                             f"got {tuple(residual.shape)}")
    return a.new_empty((a.shape[0], b.shape[1]))


def _register_epilogue_autograd(op: str, n_args: int, bias_at: int, activation_at: int, residual_at: int) -> None:
    """The autograd of an op taking (a, b, ..., bias, ..., activation, ..., residual, ...), the
    epilogue arguments at those positions of its ``n_args``: ``act(a @ b + bias) + residual``'s
    gradients (gemmtune.autograd.grads), None for every other argument."""
    def setup_context(ctx, inputs, output) -> None:
        ctx.activation = inputs[activation_at]
        # needs_input_grad lists only the arguments the call passed. What no gradient reads is not
        # kept (gemmtune.autograd.saved_for): a frozen layer's input among them.
        needs = tuple(ctx.needs_input_grad) + (False,) * n_args
        ctx.save_for_backward(*saved_for(inputs[0], inputs[1], inputs[bias_at], ctx.activation,
                                         needs[0], needs[1], needs[bias_at]))

    def backward(ctx, grad):
        # torch ops on purpose: see the module doc (gemmtune.autograd.grads).
        a, b, bias = ctx.saved_tensors
        # needs_input_grad lists only the arguments the call passed.
        needs = tuple(ctx.needs_input_grad) + (False,) * n_args
        ga, gb, gbias, gres = grads(grad, a, b, bias, ctx.activation, needs[0], needs[1], needs[bias_at],
                                    needs[residual_at])
        out = [None] * n_args
        out[0], out[1], out[bias_at], out[residual_at] = ga, gb, gbias, gres
        return tuple(out)

    torch.library.register_autograd(op, backward, setup_context=setup_context, lib=_LIB)


# (a, b, handle, bias, activation, residual)
_register_epilogue_autograd("gemmtune::mm", 6, bias_at=3, activation_at=4, residual_at=5)


_LIB.define("bmm(Tensor a, Tensor b, int handle) -> Tensor")


def _bmm_op(a: torch.Tensor, b: torch.Tensor, handle: int) -> torch.Tensor:
    _check_rank("bmm", a, b, 3)
    _refuse_tangents("bmm", a, b)
    return REGISTRY.get(handle)._run(a, b)


for _key in ("CPU", "CUDA"):
    _LIB.impl("bmm", _bmm_op, _key)


@torch.library.register_fake("gemmtune::bmm", lib=_LIB)
def _bmm_fake(a: torch.Tensor, b: torch.Tensor, handle: int) -> torch.Tensor:
    torch._check(a.dim() == 3 and b.dim() == 3,
                 lambda: f"gemmtune::bmm takes 3-D operands, got {a.dim()}-D and {b.dim()}-D")
    torch._check(a.dtype == b.dtype, lambda: f"gemmtune::bmm: dtypes differ: {a.dtype} and {b.dtype}")
    check_devices("bmm", a, b=b)
    torch._check(a.shape[0] == b.shape[0],
                 lambda: f"gemmtune::bmm: batch sizes differ: {a.shape[0]} and {b.shape[0]}")
    torch._check(a.shape[2] == b.shape[1],
                 lambda: f"gemmtune::bmm: inner dimensions differ: {a.shape[2]} and {b.shape[1]}")
    _check_dispatcher("bmm", handle, a.dtype, a.shape[1], b.shape[2], a.shape[2])
    return a.new_empty((a.shape[0], a.shape[1], b.shape[2]))


def _bmm_setup_context(ctx, inputs, output) -> None:
    a, b, _handle = inputs
    needs = tuple(ctx.needs_input_grad) + (False,) * 3
    ctx.save_for_backward(*saved_for(a, b, None, "none", needs[0], needs[1], False)[:2])


def _bmm_backward(ctx, grad):
    # torch.bmm, as mm's backward runs torch.mm (module doc; gemmtune.autograd.grads).
    a, b = ctx.saved_tensors
    needs = tuple(ctx.needs_input_grad) + (False,) * 3
    ga, gb, _, _ = grads(grad, a, b, None, "none", needs[0], needs[1], False, False)
    return ga, gb, None


torch.library.register_autograd("gemmtune::bmm", _bmm_backward, setup_context=_bmm_setup_context, lib=_LIB)


_LIB.define("matmul(Tensor a, Tensor b, str? choice=None, ScalarType? out_dtype=None, bool allow_tf32=False, "
            "Tensor? bias=None, str activation='none', Tensor? residual=None) -> Tensor")


def _matmul_op(a, b, choice=None, out_dtype=None, allow_tf32=False, bias=None, activation="none", residual=None):
    from .api import matmul
    _refuse_tangents("matmul", a, b, bias, residual)  # (matmul's own torch path runs below autograd here)
    with torch.no_grad():  # the op's autograd is registered below; none is recorded in its kernel
        return matmul(a, b, choice=choice, out_dtype=out_dtype, allow_tf32=allow_tf32, bias=bias,
                      activation=activation, residual=residual)


for _key in ("CPU", "CUDA"):
    _LIB.impl("matmul", _matmul_op, _key)


@torch.library.register_fake("gemmtune::matmul", lib=_LIB)
def _matmul_fake(a, b, choice=None, out_dtype=None, allow_tf32=False, bias=None, activation="none",
                 residual=None):
    check_activation(activation)
    torch._check(a.dim() in (2, 3) and b.dim() == a.dim(),
                 lambda: f"gemmtune::matmul takes 2-D or 3-D operands of one rank, got {a.dim()}-D and {b.dim()}-D")
    torch._check(a.dtype == b.dtype, lambda: f"gemmtune::matmul: dtypes differ: {a.dtype} and {b.dtype}")
    check_devices("matmul", a, b=b, bias=bias, residual=residual)
    torch._check(a.shape[-1] == b.shape[-2],
                 lambda: f"gemmtune::matmul: inner dimensions differ: {a.shape[-1]} and {b.shape[-2]}")
    torch._check(out_dtype is None or out_dtype in (a.dtype, torch.float32),
                 lambda: f"gemmtune::matmul: out_dtype {out_dtype} is not supported for {a.dtype} inputs")
    if a.dim() == 3:
        torch._check(a.shape[0] == b.shape[0],
                     lambda: f"gemmtune::matmul: batch sizes differ: {a.shape[0]} and {b.shape[0]}")
    return a.new_empty((*a.shape[:-1], b.shape[-1]), dtype=out_dtype or a.dtype)


# (a, b, choice, out_dtype, allow_tf32, bias, activation, residual)
_register_epilogue_autograd("gemmtune::matmul", 8, bias_at=5, activation_at=6, residual_at=7)


def traced_matmul(a, b, choice=None, out_dtype=None, allow_tf32: bool = False, bias=None,
                  activation: str = "none", residual=None) -> torch.Tensor:
    """``gemmtune.matmul(...)`` under torch.compile (matmul sends it here): the ``gemmtune::matmul``
    op, with ``choice`` as its id and ``out_dtype`` as a torch dtype."""
    choice, out_dtype = _op_args(choice, out_dtype)
    return torch.ops.gemmtune.matmul(a, b, choice, out_dtype, allow_tf32, bias, activation, residual)


def _op_args(choice, out_dtype):
    """(``choice`` as its id, ``out_dtype`` as a torch dtype or None): what the ops take, from what
    gemmtune.matmul and gemmtune.scaled_mm accept (a Choice or its id; a dtype or its name)."""
    if choice is not None and not isinstance(choice, str):
        choice = choice.id  # a str made with the Choice (configs.Choice), a constant to dynamo
    if isinstance(out_dtype, str):
        from .problem import DTYPES, dtype_name
        out_dtype = DTYPES[dtype_name(out_dtype)]
    return choice, out_dtype


_LIB.define("scaled_mm(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, Tensor? bias=None, "
            "ScalarType out_dtype=bfloat16, str? choice=None, bool check_finite=True) -> Tensor")


def _scaled_mm_op(a, b, scale_a, scale_b, bias=None, out_dtype=torch.bfloat16, choice=None, check_finite=True):
    from .scaled import scaled_mm
    with torch.no_grad():  # not differentiable (scaled_mm says why); the op records no autograd either
        return scaled_mm(a, b, scale_a, scale_b, bias, out_dtype, choice=choice, check_finite=check_finite)


for _key in ("CPU", "CUDA"):
    _LIB.impl("scaled_mm", _scaled_mm_op, _key)


@torch.library.register_fake("gemmtune::scaled_mm", lib=_LIB)
def _scaled_mm_fake(a, b, scale_a, scale_b, bias=None, out_dtype=torch.bfloat16, choice=None, check_finite=True):
    # The output's shape and dtype; the scales' and bias's checks (gemmtune.scaled.bind_scales) run
    # in the op's kernel, by name, as eager.
    torch._check(a.dim() == 2 and b.dim() == 2,
                 lambda: f"gemmtune::scaled_mm takes 2-D operands, got {a.dim()}-D and {b.dim()}-D")
    check_devices("scaled_mm", a, b=b, scale_a=scale_a, scale_b=scale_b, bias=bias)
    torch._check(a.shape[1] == b.shape[0],
                 lambda: f"gemmtune::scaled_mm: inner dimensions differ: {a.shape[1]} and {b.shape[0]}")
    torch._check(out_dtype in (torch.bfloat16, torch.float32),
                 lambda: f"gemmtune::scaled_mm: out_dtype must be bfloat16 or float32, got {out_dtype}")
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype)


def _scaled_mm_backward(ctx, grad):
    # As eager (gemmtune.autograd.not_differentiable): a trainable bias or scale under scaled_mm gets
    # this error, never a gradient dropped without a word (with no autograd registered, the compiled
    # backward ran and left bias.grad None).
    raise no_derivative("gemmtune.scaled_mm")


torch.library.register_autograd("gemmtune::scaled_mm", _scaled_mm_backward, lib=_LIB)


def traced_scaled_mm(a, b, scale_a, scale_b, bias=None, out_dtype=None, choice=None,
                     check_finite: bool = True) -> torch.Tensor:
    """``gemmtune.scaled_mm(...)`` under torch.compile (scaled_mm sends it here without a ``table``):
    the ``gemmtune::scaled_mm`` op, with ``choice`` as its id and ``out_dtype`` as a torch dtype.
    Traced through, the Triton launch failed in dynamo ("Dynamo failed to run FX node with fake
    tensors"), and even choice='aten' broke the graph (``is_neg``, the scales' NaN check)."""
    choice, out_dtype = _op_args(choice, out_dtype)
    return torch.ops.gemmtune.scaled_mm(a, b, scale_a, scale_b, bias,
                                        torch.bfloat16 if out_dtype is None else out_dtype, choice, check_finite)


def handle_of(dispatcher: Dispatcher) -> int:
    """``REGISTRY.register(dispatcher)`` for torch.compile, which must not trace the registry (its
    lock is a context manager dynamo cannot enter: a graph break) but run it once and bake its
    int into the graph. dynamo traces ``id(dispatcher)`` as a constant, guarded on the
    dispatcher's identity, and runs ``_handle_by_id`` on that int. The dispatcher itself cannot be
    the argument of such a function: torch 2.11's dynamo converts the arguments of one to Python
    constants, and a Dispatcher is none (InternalTorchDynamoError; torch 2.13 passes objects)."""
    return _handle_by_id(id(dispatcher))


def _handle_by_id(ident: int) -> int:
    from .dispatch.core import LIVE
    d = LIVE.get(ident)
    if d is None:  # made without Dispatcher.__init__
        raise RuntimeError("gemmtune: this Dispatcher was not made by Dispatcher.__init__, so "
                           "torch.compile cannot reach it; build it with compile_mm or Dispatcher.load")
    return REGISTRY.register(d)


# What torch._dynamo.assume_constant_result sets (importing torch._dynamo here would cost every
# process that imports gemmtune.nn ~2 s).
_handle_by_id._dynamo_marked_constant = True  # type: ignore[attr-defined]


def traced_call(dispatcher: Dispatcher, a: torch.Tensor, b: torch.Tensor, bias: Optional[torch.Tensor] = None,
                activation: str = "none", residual: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``dispatcher(a, b, ...)`` under torch.compile (Dispatcher.__call__ sends it here): the
    ``gemmtune::bmm`` op for 3-D operands without an epilogue, else the ``gemmtune::mm`` op, whose
    fake kernel checks the operands as the dispatcher would (2-D, dtype, static dims)."""
    h = handle_of(dispatcher)
    if a.dim() == 3:
        if bias is None and residual is None and activation == "none":
            return torch.ops.gemmtune.bmm(a, b, h)
        # Eager's error (Dispatcher._first_sight), not gemmtune::mm's fake kernel's "takes 2-D
        # operands, got 3-D and 3-D", which named the op but not the epilogue it was sent for.
        raise ValueError("a bmm (3-D operands) takes no fused epilogue (bias, activation, residual)")
    return torch.ops.gemmtune.mm(a, b, h, bias, activation, residual)


def _use_op(*tensors) -> bool:
    return torch.compiler.is_compiling() or needs_grad(*tensors)


def mm(a: torch.Tensor, b: torch.Tensor, handle: int) -> torch.Tensor:
    """``a @ b`` through the dispatcher registered under ``handle``; differentiable, compilable.
    Under forward-mode AD or a torch.func transform: torch's own product (``transformed``), as a
    dispatcher called directly does (a kernel dropped the tangent without a word)."""
    return _call("mm", a, b, handle, 2)


def bmm(a: torch.Tensor, b: torch.Tensor, handle: int) -> torch.Tensor:
    """``torch.bmm(a, b)`` (3-D operands) through the dispatcher under ``handle``; differentiable,
    compilable (the ``gemmtune::bmm`` op). Under forward-mode AD or a torch.func transform:
    torch.bmm (``mm`` says why)."""
    return _call("bmm", a, b, handle, 3)


def _call(op: str, a: torch.Tensor, b: torch.Tensor, handle: int, rank: int) -> torch.Tensor:
    if torch.compiler.is_compiling():
        return getattr(torch.ops.gemmtune, op)(a, b, handle)
    # The op's rank, whether or not it is called: a wrong rank ran as the other product until an
    # operand required grad (the op refuses it, as its fake kernel does).
    _check_rank(op, a, b, rank)
    if transformed():
        return REGISTRY.get(handle)._torch_call(a, b, None, "none", None)
    if needs_grad(a, b):
        return getattr(torch.ops.gemmtune, op)(a, b, handle)
    return REGISTRY.get(handle)._run(a, b)


def linear(x2d: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, handle: int,
           activation: str = "none", residual: torch.Tensor | None = None) -> torch.Tensor:
    """``act(x2d @ weight.T + bias) + residual`` in one launch of the dispatcher under ``handle``
    (the epilogue fused into its kernel)."""
    if _use_op(x2d, weight, bias, residual):
        return torch.ops.gemmtune.mm(x2d, weight.t(), handle, bias, activation, residual)
    return REGISTRY.get(handle)._run(x2d, weight.t(), bias, activation, residual)


def mm_bias(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, handle: int) -> torch.Tensor:
    """``a @ b + bias`` in one launch (HF Conv1D: ``x @ W + b``, W read as stored)."""
    if _use_op(a, b, bias):
        return torch.ops.gemmtune.mm(a, b, handle, bias)
    return REGISTRY.get(handle)._run(a, b, bias)


# gemmtune::rms_mm (the norm fold, gemmtune.normfold) is defined with this library: a graph compiled
# with the fold, given back by Inductor's on-disk caches to a later process, names it before that
# process has folded anything.
from . import normfold  # noqa: E402,F401

__all__ = ["DispatcherRegistry", "REGISTRY", "mm", "bmm", "mm_bias", "linear", "gemv_to_inductor", "handle_of",
           "traced_call", "traced_matmul", "traced_scaled_mm", "register_inductor_gemv", "GEMV_DEVICES", "GEMV_HANDBACK_ENV",
           "gemv_handback_min_bytes", "note_graph_fused"]
