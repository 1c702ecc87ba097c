"""``gemmtune.nn.Linear``, a drop-in ``nn.Linear`` whose GEMM runs on a tuned dispatcher,
and ``patch(model)``, which converts every ``nn.Linear`` of a model in place.

``Linear`` is a subclass of ``torch.nn.Linear``: the same parameters, the same
``state_dict`` keys, ``isinstance(m, nn.Linear)`` still true. ``forward`` flattens
any leading batch dims to one M dim, runs ``x @ W.T`` on the dispatcher (M dynamic,
N = out_features and K = in_features static, ``W.T`` a column-major view) with the
bias added in the same kernel's epilogue: one launch for ``x @ W.T + b``, eager or under
torch.compile (the ``gemmtune::mm`` op takes the bias). Autograd works: the backward
GEMMs run on torch.mm (see torch_ops).
When the input or weight dtype is not the dispatcher's (after ``model.double()``) it falls
back to ``F.linear`` with a one-time warning; under ``torch.autocast`` it runs ``F.linear``
(torch's forward for a Conv1D), which autocast casts as it would an unpatched layer, and so it
does for an input on a device gemmtune does not run on (``meta``: a model built or traced there).
A weight replaced by one of another shape after patching (``resize_token_embeddings``, a pruned
head) runs torch's forward too, eager and compiled, with a one-time warning; re-running ``patch``
tunes the new shape.

Eager calls (no torch.compile, no autograd) cost host time as well as device time: a
Triton launch through the dispatcher takes more Python than ``F.linear``'s one cuBLAS call,
and a decode step of a small model is bound by that host time. So on a GPU, the first eager
call of each input shape whose tuned kernel is not cuBLAS times both back to back (10 calls
each, twice, interleaved) and keeps the tuned kernel for that shape only where it is faster
and its host cost hides behind the GPU's work (``choose_eager``; ``eager_policy="measure"``, the default;
``"tuned"`` always runs the tuned kernel). The choices made are in ``eager_choices``.
Under torch.compile or CUDA graphs host time is not paid per call and the tuned kernel runs.
A layer timed alone cannot see a step bound by the host's issue rate: ``patch(example_inputs=...)``
then times each pass as a whole step against cuBLAS on every layer (``gemmtune.eager_gate``), and
gives every layer whose eager shapes all run cuBLAS back to torch's own class (``retire``; under
torch.compile its GEMM still runs on its dispatcher: ``gemmtune.compile_route``).
A shape on the cuBLAS path costs less host time than torch's own layer: it reads the weight and
bias from the module's ``_parameters`` where torch's forward goes through
``nn.Module.__getattr__`` (2-core CPU machine, 2026-11-29: 0.52 us a Linear call less, 0.66 us
a Conv1D call; ``scripts/exp_patch_overhead.py``).

A layer whose every tuned hint chose cuBLAS gains nothing from any of this: ``patch`` leaves it
as torch's own ``nn.Linear`` / ``Conv1D`` (class and forward untouched, so eager and compiled
calls cost exactly what torch's do) and only records its dispatcher on it
(``recorded_dispatcher``), for ``dispatchers(model)`` and ``save_patched``
(``convert_aten_layers=True`` converts it anyway).

``torch.save(model)`` (pickling) of a patched model writes plain torch layers: converted ones as
their torch class, without their dispatchers; re-apply with ``load_patched``. ``copy.deepcopy``
keeps them converted, the dispatchers shared.

Example::

    >>> import torch, gemmtune
    >>> model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.GELU()).cuda().half()  # doctest: +SKIP
    >>> gemmtune.patch(model, hints={"m": [16, 256, 4096]})        # doctest: +SKIP
    >>> y = torch.compile(model, dynamic=True)(x)                    # doctest: +SKIP
"""

from __future__ import annotations

import copy
import copyreg
import sys
import time
import warnings
import weakref
from typing import MutableMapping

import torch
import torch.autograd.forward_ad as _fwAD
import torch.nn.functional as F
from torch.nn.utils import parametrize

from . import dispatch
from .dispatch import Dispatcher, compile_mm
from .dispatch.common import ATEN, _any_autocast
from .problem import Problem, dtype_name
from . import torch_ops
from .torch_ops import REGISTRY, linear, mm_bias

EAGER_POLICIES = ("measure", "tuned")
_ATEN, _TUNED = "aten", "tuned"
# A patched layer's ``_gemmtune_hot`` before any shape has taken F.linear for good: no input's shape
# equals it (a dim is never negative), and a torch.Size compares with it in C.
_NO_SHAPE = torch.Size([-1])
_SIZE = torch.Size
EAGER_TRIALS = 10   # calls per timed batch when choosing the eager path of a shape
# At most this many input shapes per layer are timed (choose_eager: 42 calls and 4 syncs each);
# a layer that keeps meeting new shapes in eager mode (prompts of every length, an MoE expert's
# token counts) runs F.linear for the rest, eager's own path, instead of timing each one.
EAGER_TIMED_MAX = 32
# Bound once: the patched forwards call it first on every call (dynamo knows the function
# itself, whatever name it is reached by).
_is_compiling = torch.compiler.is_compiling
# Whether a torch.func transform (vmap, grad, jvp, jacrev...) is running, in one C call (~0.03 us).
_functorch_level = getattr(getattr(torch._C, "_functorch", None), "maybe_current_level", lambda: None)
# Whether torch.jit.trace is recording, in one C call (~0.03 us; torch.jit.is_tracing's own test).
_jit_tracing = getattr(torch._C, "_is_tracing", lambda: False)


def _parametrized(module: torch.nn.Module) -> bool:
    """Whether ``module`` has ``torch.nn.utils.parametrize`` parametrizations and no
    ``parametrize.cached()`` is on. Its parametrized weight is then computed anew at each read, and
    a patched forward reads it up to three times a call (its checks, the kernel): the forwards run
    themselves once more inside ``cached()``, so that it is computed once, as in torch's forward.
    spectral_norm in train mode ran three power iterations a call, and its outputs and ``_u`` /
    ``_v`` buffers left torch's. Asked past the cached eager paths (each reads the weight once)
    and only of a class parametrize made over the patched one: those paths pay nothing."""
    return not getattr(parametrize, "_cache_enabled", 1) and parametrize.is_parametrized(module)


def _eager_ok(x: torch.Tensor, w: torch.Tensor, bias) -> bool:
    """True for a plain eager call: not traced by torch.compile, no autograd graph to build."""
    if _is_compiling():
        return False
    if torch.is_grad_enabled() and (x.requires_grad or w.requires_grad
                                    or (bias is not None and bias.requires_grad)):
        return False
    return True


def _per_call(fn, x, calls: int) -> tuple[float, float]:
    """(host, wall) seconds per call of ``fn(x)`` issued back to back: host = until the last
    call returned (the launches are queued, not waited for), wall = until the GPU finished."""
    sync = torch.cuda.synchronize if x.is_cuda else (lambda device: None)
    sync(x.device)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(x)
    t1 = time.perf_counter()
    sync(x.device)
    t2 = time.perf_counter()
    return (t1 - t0) / calls, (t2 - t0) / calls


# The tuned kernel's host cost (Python, Triton's launcher) must hide behind the GPU's work on the
# call itself: a small model's eager decode step is bound by host time, where any extra host
# microsecond per layer is paid in full, whatever the device saves. Measured on an H200
# (benchmarks/results/2026-11-24-h200-eager): choosing by back-to-back wall time alone made
# Llama-3.2-1B's decode step 1.25x slower than eager.
HOST_FRACTION = 0.5


def choose_eager(tuned, aten, x: torch.Tensor, trials: int = EAGER_TRIALS) -> tuple[str, float, float]:
    """(``"tuned"`` or ``"aten"``, tuned s/call, aten s/call) for input ``x``: both timed back to
    back, interleaved twice (best of each). The tuned kernel is kept when its wall time per call
    is below 97% of aten's (ties go to aten, the simpler path) and its host time per call is
    under HOST_FRACTION of aten's wall time (so the call is bound by the GPU, not by launching)."""
    tuned(x)
    aten(x)
    h_tuned = t_tuned = t_aten = float("inf")
    for _ in range(2):
        h, w = _per_call(tuned, x, trials)
        h_tuned, t_tuned = min(h_tuned, h), min(t_tuned, w)
        t_aten = min(t_aten, _per_call(aten, x, trials)[1])
    keep = t_tuned < 0.97 * t_aten and h_tuned < HOST_FRACTION * t_aten
    return (_TUNED if keep else _ATEN), t_tuned, t_aten


class _EagerPaths:
    """Per input shape, which eager path a patched layer takes (module state, not global)."""

    def __init__(self, policy: str = "measure"):
        if policy not in EAGER_POLICIES:
            raise ValueError(f"eager_policy must be one of {EAGER_POLICIES}, got {policy!r}")
        self.policy = policy
        # shape -> path, what the forwards read: a torch.Size is the cheapest key to build and hash
        # (no tuple made per call). Only the dispatcher's dtype ever gets here (other dtypes run
        # F.linear before a path is chosen), and the forwards check the dtype before the tuned path;
        # ``paths`` adds that dtype back for eager_paths.
        self.by_shape: dict[torch.Size, str] = {}
        self.dtype: torch.dtype | None = None
        self.log: dict[tuple, tuple[str, float, float]] = {}

    def attach(self, module) -> None:
        """Make this the path table of ``module``; the forwards read ``by_shape`` through
        ``module._gemmtune_paths`` (the same dict, one attribute lookup fewer per call), after
        ``module._gemmtune_hot`` (``_hot`` says why)."""
        module._gemmtune_eager = self
        module._gemmtune_paths = self.by_shape
        module._gemmtune_hot = _NO_SHAPE

    @property
    def paths(self) -> dict[tuple, str]:
        """(shape, dtype) -> path: what ``eager_paths`` shows."""
        return {(shape, self.dtype): p for shape, p in self.by_shape.items()}

    def _set(self, module, x: torch.Tensor, path: str) -> None:
        self.dtype = x.dtype
        self.by_shape[x.shape] = path
        if path is _ATEN:
            _hot(module, x.shape)

    def first(self, module, x: torch.Tensor, tuned, aten):
        """First eager call of ``x``'s shape: run it, choosing (and remembering, in ``by_shape``)
        the path later calls of that shape take."""
        y = tuned(x)  # the dispatcher decides and verifies this shape
        if dispatch.capturing(x):
            return y  # nothing is timed inside a CUDA-graph capture; decided on a later eager call
        d = module.dispatcher.decision(m=x.shape[:-1].numel())
        if d is not None and d.choice.family == "aten" and not d.choice.pad:
            self._set(module, x, _ATEN)
        elif self.policy == "tuned" or not _timed(x):
            self._set(module, x, _TUNED)
        elif len(self.log) >= EAGER_TIMED_MAX:
            self._set(module, x, _ATEN)
            warnings.warn(f"gemmtune: a patched layer met more than {EAGER_TIMED_MAX} input shapes in eager "
                          "mode; shapes past those run F.linear, untimed (nn.EAGER_TIMED_MAX; under "
                          "torch.compile or CUDA graphs the tuned kernels run)", RuntimeWarning, stacklevel=4)
        else:
            p, t_tuned, t_aten = choose_eager(tuned, aten, x)
            self._set(module, x, p)
            self.log[(x.shape, x.dtype)] = (d.choice.id if d is not None else "?", t_tuned, t_aten)
        return y


def _hot(module, shape: torch.Size) -> None:
    """Make ``shape`` the one a patched layer's forward tests before its path table: a shape whose path
    is F.linear for good. Set where that is decided: ``_EagerPaths.first`` (a cuBLAS decision, or the
    timing's; the step gate re-decides only shapes that took the tuned path) and the step gate's verdict
    (``eager_gate._apply``).

    Why (H200 host, 2026-12-03, session 59, calls 2-4): in a 16-layer Llama decode step at batch 1
    (113 layers), reading each layer's own path dict cost 150-200 us a step more than nn.Linear's
    forward, about 1.5 us a layer, where the same read timed alone costs 0.1 us: between two calls of
    a layer the step runs everything else, and the dict, its table and its key are cold in the CPU's
    caches. One dict shared by all layers cost half as much; a shape held in the layer's own
    ``__dict__`` (which the forward reads anyway) and compared, +18 to +31 us a step against the
    floor's +48 and -47 (two copies of the same model). With it (call 5) the patched step ran +149 us
    over plain's 13.7 ms against the old path's +243 us in the same run; ~1 us a layer above the
    floor is left (benchmarks/results/2026-12-03-h200-s59)."""
    module.__dict__["_gemmtune_hot"] = shape


def _timed(x: torch.Tensor) -> bool:
    """Whether a first eager call of ``x``'s shape is timed (choose_eager): on a GPU. A CPU tensor
    runs the tuned kernel (the Triton interpreter) untimed."""
    return x.is_cuda


def _torch_state(module: torch.nn.Module) -> dict:
    return {k: v for k, v in module.__dict__.items() if k != "dispatcher" and not k.startswith("_gemmtune")}


def _reduce_as_torch(self, protocol):
    """Pickle a converted layer as its torch class (``nn.Linear``, HF ``Conv1D``) with its
    parameters, buffers and hooks, and no gemmtune state: ``torch.save(model)`` of a patched
    model writes a model that loads without gemmtune, unpatched (re-apply with ``load_patched``).
    A Dispatcher cannot be pickled, and torch truncates the file before pickling starts, so
    this used to destroy a checkpoint already at that path."""
    if parametrize.is_parametrized(self):
        # Parametrized after patch: its weight lives in ``parametrizations``, which only
        # parametrize's own class (not pickled) reads, so this wrote a torch layer with no weight
        # (it loaded, and raised AttributeError 'weight' when called). torch refuses these too.
        raise RuntimeError("Serialization of parametrized modules is only supported through state_dict() "
                           f"(a gemmtune-patched {type(self).__name__}, as torch's): save the model's "
                           "state_dict, or remove_parametrizations first")
    # copyreg's own reconstructor (object.__new__ of the torch class), not a gemmtune function:
    # the file loads where gemmtune is not installed.
    return (copyreg._reconstructor, (self._gemmtune_torch_class(), object, None), _torch_state(self))


def _deepcopy_converted(self, memo):
    """``copy.deepcopy`` keeps a converted layer converted, its dispatcher shared (pickling, which
    deepcopy would otherwise go through, writes the torch class: ``_reduce_as_torch``)."""
    new = type(self).__new__(type(self))
    memo[id(self)] = new
    for k, v in self.__dict__.items():
        new.__dict__[k] = copy.deepcopy(v, memo)
    return new


def _copy_converted(self):
    new = type(self).__new__(type(self))
    new.__dict__.update(self.__dict__)
    return new


def _forward(self, x: torch.Tensor, tuned, aten):
    """A patched layer's forward past its cached eager path (the callers look that up first,
    with no nn.Module attribute on the way: a decode step of a small model makes ~100 such
    calls, each bound by host time). Under torch.compile the op path is always taken (the
    path table is eager state)."""
    if x.dim() >= 1 and _eager_ok(x, self.weight, self.bias):  # _eager_ok: not under torch.compile
        return self._gemmtune_eager.first(self, x, tuned, aten)
    return tuned(x)


def _weight_and_bias(module: torch.nn.Module):
    """``(module.weight, module.bias)`` read from the module's ``_parameters`` / ``_buffers``
    (a fused group's layer holds its tensors as buffers), or None where either is elsewhere (a
    plain attribute, set after deleting the parameter). ``module.weight`` misses the instance
    dict and nn.Module.__getattr__ then looks there: ~0.43 us a read on the 2-core CPU machine,
    two a call in nn.Linear's own forward, ~0.05 us this way (2026-11-29). For a class with no
    ``weight`` / ``bias`` of its own (a property: parametrize's subclass), which the caller checks."""
    ps, bs = module._parameters, module._buffers
    w = ps["weight"] if "weight" in ps else bs.get("weight", _NOT_HELD)
    b = ps["bias"] if "bias" in ps else bs.get("bias", _NOT_HELD)
    if w is _NOT_HELD or b is _NOT_HELD:
        return None
    return w, b


_NOT_HELD = object()


def _odd_bias(b: torch.Tensor | None, n: int) -> bool:
    """A bias the tuned epilogue does not take but torch's forward does: one that broadcasts over
    the N outputs (shape (1,) or ()). Checked only after the dispatcher refused it (a ValueError),
    so the usual call pays nothing; under torch.compile, at trace time."""
    return b is not None and (b.dim() != 1 or b.shape[0] != n)


def _exporting() -> bool:
    """Whether torch.export is tracing (strict or not): a patched layer then traces torch's own
    forward, as a fused group's members do (``fuse_compile._exporting``, whose flag this reads). An
    exported program with the ``gemmtune::mm`` op in it could not even be loaded
    (``torch.export.load``: "failed to resolve torch.ops.gemmtune.mm.default") without gemmtune's
    op registered first, would run only where a dispatcher of the same content had the baked-in
    handle, and no AOTInductor or ExecuTorch runtime can run a Python op. Run for real at trace
    time (marked constant for dynamo, as ``fuse_compile._trace_ok``)."""
    from .fuse_compile import _exporting as flag
    return flag()


_exporting._dynamo_marked_constant = True  # type: ignore[attr-defined]


def _reshaped(d: Dispatcher, w: torch.Tensor, conv: bool) -> bool:
    """Whether weight ``w`` is no longer of the (N, K) its dispatcher was tuned for: replaced since
    ``patch`` (``layer.weight = nn.Parameter(...)``, HF ``resize_token_embeddings`` tying a larger
    vocabulary to an lm_head, a pruned head). The dispatcher's N and K are static, and such a call
    raised its "static N" / "static K" ValueError from deep inside it. ``conv``: a Conv1D's
    weight [in, out]. Asked past the cached eager paths, and under torch.compile at trace time."""
    if w.dim() != 2:
        return True
    n, k = _weight_nk(w, conv)
    dims = d.dims
    return n != dims["n"] or k != dims["k"]


def _weight_nk(w: torch.Tensor, conv: bool) -> tuple[int, int]:
    """(N, K) of a 2-D weight: a Linear's is [N, K] (``x @ W.T``), a Conv1D's [K, N]."""
    return (w.shape[1], w.shape[0]) if conv else (w.shape[0], w.shape[1])


def _warn_reshaped(module: torch.nn.Module, w: torch.Tensor, conv: bool, stacklevel: int) -> None:
    """The one warning per layer that its weight no longer fits its dispatcher (``_reshaped``)."""
    if module.__dict__.get("_gemmtune_shape_warned"):
        return
    module._gemmtune_shape_warned = True
    d = module.dispatcher
    name = "gemmtune.nn.Linear" if isinstance(module, Linear) else \
        f"gemmtune-patched {module._gemmtune_torch_class().__name__}"
    nk = " (N={}, K={})".format(*_weight_nk(w, conv)) if w.dim() == 2 else ""
    own = "its own forward" if conv else "F.linear"
    warnings.warn(f"{name}: its weight is now {tuple(w.shape)}{nk}, but its dispatcher was tuned for "
                  f"N={d.dims['n']}, K={d.dims['k']}: using {own}; re-run gemmtune.patch on the model "
                  "to tune the new shape", RuntimeWarning, stacklevel=stacklevel + 1)


def _torchs_own(x: torch.Tensor) -> bool:
    """Whether a patched layer leaves this call to torch's own forward: under ``torch.autocast``
    (autocast casts inside F.linear / torch.addmm, as for an unpatched layer), and for an input on
    a device gemmtune does not run on, such as ``meta`` (a model built or traced there: torch's
    forward gives the output's shape). ``torch.is_autocast_enabled('meta')`` itself raised
    ("unknown device type for autocast") from every patched layer of a meta model. And for a
    sparse input (COO, CSR, ...), which torch's F.linear takes and the tuned kernels, reading
    strided memory, cannot ("Cannot access data pointer of Tensor that doesn't have storage")."""
    if type(x) is not torch.Tensor and not isinstance(x, torch.Tensor):
        # torch.fx.symbolic_trace's Proxy: F.linear records as one call (nn.Linear is a leaf to
        # fx; a patched layer is not, and its checks raised "symbolically traced variables cannot
        # be used as inputs to control flow")
        return True
    if (x.is_cuda or x.is_cpu) and x.layout is torch.strided:  # properties, no x.device built (~0.3 us)
        return _any_autocast() and torch.is_autocast_enabled(x.device.type)
    return True


def _transformed() -> bool:
    """Whether an eager call of a patched layer runs under forward-mode AD (a
    ``torch.autograd.forward_ad.dual_level``, which ``torch.func.jvp`` enters too) or another
    ``torch.func`` transform (``vmap``, ``grad``, ``jacrev``): it is left to torch's own forward,
    which knows them. The tuned kernels read the operands' memory: a dual input's tangent was
    dropped (no error; ``torch.func.jvp`` of a patched model gave a zero tangent, and so did a dual
    input under ``no_grad`` or into frozen weights), a vmapped input has no storage to read, and
    the ``gemmtune::mm`` op has no forward-AD or functorch rule.
    Also under ``torch.jit.trace``: a traced size is a tensor, so the dispatcher raised "Problem.m
    must be a non-negative int, got tensor(8)" (under no_grad), and a trace with grad recorded the
    ``gemmtune::mm`` op, whose handle names a dispatcher of this process only (a saved TorchScript
    could not run elsewhere); torch's forward traces as the portable ``aten::linear``."""
    return _fwAD._current_level >= 0 or _functorch_level() is not None or _jit_tracing()


def _check_fits(d: Dispatcher, in_features: int, out_features: int, dtype: torch.dtype) -> None:
    """Whether ``d`` can serve a layer whose weight is ``out_features`` x ``in_features`` of
    ``dtype``: the callers pass the weight's own shape (``_check_linear_fits``), not the layer's
    ``in_features`` / ``out_features`` attributes, which a weight assigned later does not update
    (the dispatcher multiplies the weight)."""
    if not isinstance(d, Dispatcher):
        raise TypeError(f"dispatcher must be a gemmtune Dispatcher, not {type(d).__name__}")
    if d.dims["m"] is not None:
        raise ValueError(f"a Linear needs a dispatcher with a dynamic m, this one has static M={d.dims['m']}")
    if (d.dims["n"], d.dims["k"]) != (out_features, in_features):
        raise ValueError(f"dispatcher has N={d.dims['n']}, K={d.dims['k']}; this Linear needs "
                         f"N=out_features={out_features}, K=in_features={in_features}")
    if d.torch_dtype != dtype:
        raise TypeError(f"dtype: dispatcher multiplies {d.torch_dtype}, the weight is {dtype}")


def _check_linear_fits(d: Dispatcher, module: torch.nn.Linear) -> None:
    """``_check_fits`` for a Linear's weight W [out, in] (``x @ W.T``)."""
    w = module.weight
    if w.dim() != 2:
        raise ValueError(f"a Linear's weight must be 2-D [out_features, in_features], got shape {tuple(w.shape)}")
    _check_fits(d, w.shape[1], w.shape[0], w.dtype)
    if d.layout_b != "col":
        # As _check_conv1d_fits refuses a 'col' dispatcher for a Conv1D: one of another B layout
        # was taken, and served x @ W.T with choices and table entries of that layout (one of
        # compile_mm's default 'row', in table mode, found none of the table's Linear entries,
        # which are 'col', and ran cuBLAS for every shape without a word).
        raise ValueError(f"a Linear reads W.T, a column-major B: the dispatcher needs layout_b='col', this one has "
                         f"layout_b={d.layout_b!r} (compile_mm(..., layout_b='col'))")


class Linear(torch.nn.Linear):
    """``nn.Linear`` with the GEMM on a gemmtune dispatcher.

    ``dispatcher``: a Dispatcher with dynamic m, n=out_features, k=in_features and the
    weight's dtype (built with ``layout_b='col'``, as ``x @ W.T`` reads W). Without
    one, ``compile_mm(**compile_kwargs)`` tunes it here (that takes a while).

    Example::

        >>> lin = gemmtune.nn.Linear(4096, 1024, device="cuda", dtype=torch.bfloat16,
        ...                          hints={"m": [16, 256, 4096]})   # doctest: +SKIP
    """

    dispatcher: Dispatcher
    _gemmtune_handle: int
    _gemmtune_hot = _NO_SHAPE  # (a layer converted before attach set its own: read from the class)
    __reduce_ex__ = _reduce_as_torch
    __deepcopy__ = _deepcopy_converted
    __copy__ = _copy_converted

    @staticmethod
    def _gemmtune_torch_class():
        return torch.nn.Linear

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None, *, dispatcher: Dispatcher | None = None, **compile_kwargs):
        super().__init__(in_features, out_features, bias, device, dtype)
        if dispatcher is None:
            dispatcher = compile_mm(n=out_features, k=in_features, dtype=self.weight.dtype,
                                    layout_b="col", **compile_kwargs)
        self._attach(dispatcher)

    def _attach(self, dispatcher: Dispatcher) -> None:
        _check_linear_fits(dispatcher, self)
        self.dispatcher = dispatcher
        self._gemmtune_handle = REGISTRY.register(dispatcher)
        self._gemmtune_warned = False
        self._gemmtune_shape_warned = False  # a new dispatcher: _warn_reshaped warns anew
        _unrecord(self)  # was left as torch's (patch) or given back to it (retire): converted now
        if not hasattr(self, "_gemmtune_eager"):
            _EagerPaths().attach(self)

    @classmethod
    def from_linear(cls, module: torch.nn.Linear, dispatcher: Dispatcher) -> "Linear":
        """Convert ``module`` in place (its class changes; parameters, hooks and identity stay)."""
        _unretire(module)
        if type(module) is not torch.nn.Linear and not isinstance(module, Linear):
            raise TypeError(f"expected a torch.nn.Linear, got {type(module).__name__}")
        _check_linear_fits(dispatcher, module)
        # Attributes first, the class last: a model patched while other threads serve it (patch,
        # load_patched onto a live model) ran this class's forward on a module not yet given its
        # path table and raised AttributeError ('_gemmtune_paths') from those threads' calls.
        cls._attach(module, dispatcher)  # type: ignore[arg-type]
        module.__class__ = cls
        return module  # type: ignore[return-value]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not _is_compiling():
            # The eager path of a shape seen before, looked up first: F.linear is this layer's
            # own forward under any autocast, device or dtype, so nothing else is checked before
            # it. A small model's un-graphed decode step is bound by host time, ~100 such calls
            # a step: on the 2-core CPU machine a layer on its F.linear path cost 1.6-3.0 us a
            # call more than nn.Linear with the checks first, 0.1-0.9 us this way (2026-11-28).
            s = x.shape  # (an fx Proxy's shape is a Proxy: compared, it would raise; _torchs_own says)
            p = _ATEN if type(s) is _SIZE and s == self._gemmtune_hot else self._gemmtune_paths.get(s)  # _hot: why
            if p is _ATEN:
                if type(self) is Linear:  # (parametrize's subclass computes its weight in a property)
                    ps = self._parameters  # _weight_and_bias says why; its usual case inline (0.2 us less)
                    if "weight" in ps and "bias" in ps:
                        return F.linear(x, ps["weight"], ps["bias"])
                    wb = _weight_and_bias(self)
                    if wb is not None:
                        return F.linear(x, *wb)
                return F.linear(x, self.weight, self.bias)
            if _torchs_own(x) or _transformed():
                return F.linear(x, self.weight, self.bias)
            if p is _TUNED and x.dtype == self.dispatcher.torch_dtype:
                return self._tuned(x)
        # Past the paths above, each of which reads the weight once: a layer parametrized after
        # patch (parametrize's subclass) runs the rest inside cached() (_parametrized says why).
        if type(self) is not Linear and _parametrized(self):
            with parametrize.cached():
                return self.forward(x)
        w = self.weight
        if _reshaped(self.dispatcher, w, False):  # eager, or at trace time: torch's F.linear is traced
            _warn_reshaped(self, w, False, stacklevel=2)
            return F.linear(x, w, self.bias)
        if _is_compiling() and self._traced_to_torch(x):
            return F.linear(x, w, self.bias)
        dt = self.dispatcher.torch_dtype
        if x.dtype != dt or w.dtype != dt:
            if not self._gemmtune_warned:
                self._gemmtune_warned = True
                warnings.warn(f"gemmtune.nn.Linear: input {x.dtype} / weight {w.dtype} differ from the "
                              f"dispatcher's {dt}: using F.linear", RuntimeWarning, stacklevel=2)
            return F.linear(x, w, self.bias)
        return _forward(self, x, self._tuned, self._aten)

    def _traced_to_torch(self, x: torch.Tensor) -> bool:
        """Under torch.compile, whether this call is torch's own F.linear rather than the
        ``gemmtune::mm`` op (besides a dtype other than the dispatcher's, which forward warns
        about): autocast or another device, a broadcasting bias, a weight no longer of the
        dispatcher's shape (``_reshaped``; forward warns about it), a dispatcher that runs cuBLAS
        everywhere (``traces_as_torch``; Dispatcher.all_aten says why), or torch.export tracing
        (``_exporting``). A fused group's traced members ask it of the group's fused layer
        (fuse_compile). ``all_aten`` alone is not enough: a table's exact entries run before the
        hints, and a layer patched with a table naming Triton kernels over all-cuBLAS hints traced
        as F.linear, its table winners run eagerly and never in a compiled graph."""
        w = self.weight
        return (_torchs_own(x) or _odd_bias(self.bias, w.shape[0]) or _reshaped(self.dispatcher, w, False)
                or traces_as_torch(self.dispatcher) or _exporting())

    @property
    def eager_choices(self) -> dict[tuple, tuple[str, float, float]]:
        """Per measured input shape: (tuned choice id, tuned s/call, aten s/call); the path taken
        is in ``eager_paths``."""
        return dict(self._gemmtune_eager.log)

    @property
    def eager_paths(self) -> dict[tuple, str]:
        return self._gemmtune_eager.paths

    def _aten(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)

    def _tuned(self, x: torch.Tensor) -> torch.Tensor:
        """The GEMM on the dispatcher. A patched layer is a drop-in for torch's, which takes a
        negated view (``Tensor.is_neg()``, e.g. the ``.imag`` of a conjugated complex tensor) as
        its value; the dispatcher refuses one by name (its kernels read the memory, which lacks
        the sign), so the layer resolves it (a copy, as torch's kernels make) after that refusal.
        Only then: a try costs nothing in CPython 3.11+, an ``is_neg()`` first ~0.08 us a call,
        a helper's frame as much.
        ``_conv1d_tuned`` does the same."""
        w, b, h = self.weight, self.bias, self._gemmtune_handle
        try:
            nd = x.dim()
            if nd == 2:
                return linear(x, w, b, h)
            if nd == 1:
                return linear(x.unsqueeze(0), w, b, h).squeeze(0)
            if nd == 0:  # torch's own error ("need to be at least 1D"); flatten raised an IndexError
                return F.linear(x, w, b)
            return linear(x.flatten(0, -2), w, b, h).unflatten(0, x.shape[:-1])
        except ValueError:
            if _reshaped(self.dispatcher, w, False):
                # A weight replaced since this input shape's tuned path was cached (the path's key is
                # the input's shape, which a new out_features keeps): the dispatcher refused it (its
                # cache is keyed by the weight's shape too, and a new shape is checked against its
                # static N and K before any kernel runs), checked here so the hot path pays nothing.
                # The shape is decided again at its next call, past forward's check.
                self._gemmtune_paths.pop(x.shape, None)
                _warn_reshaped(self, w, False, stacklevel=3)
                return F.linear(x, w, b)
            if _odd_bias(b, w.shape[0]):
                return F.linear(x, w, b)  # a bias that broadcasts (shape (1,) or ()): torch's, as F.linear takes it
            if not x.is_neg():
                raise
        return self._tuned(x.resolve_neg())

    def extra_repr(self) -> str:
        return super().extra_repr() + f", dispatcher={self.dispatcher!r}"


_CONV1D_CLASSES: dict[type, type] = {}
_CONV1D_PATCHED: set[type] = set()  # its values, for _conv1d_forward's one membership test


def _hf_conv1d_forward(base: type):
    """transformers' own ``Conv1D.forward`` where ``base`` runs exactly it (not a subclass's
    forward), else None. Imported from the module that defines ``base``: gemmtune needs no
    transformers import of its own."""
    import sys
    mod = sys.modules.get("transformers.pytorch_utils")
    hf = getattr(getattr(mod, "Conv1D", None), "forward", None)
    return hf if hf is not None and base.forward is hf else None


def _conv1d_forward(self, x: torch.Tensor) -> torch.Tensor:
    if not _is_compiling():  # as Linear.forward
        s = x.shape
        p = _ATEN if type(s) is _SIZE and s == self._gemmtune_hot else self._gemmtune_paths.get(s)
        if p is _ATEN:
            if self._gemmtune_hf_forward:
                # transformers' Conv1D.forward (its class runs exactly it, checked at patch) with the
                # weight and bias read from _parameters, not through nn.Module.__getattr__ (~0.43
                # us a read on the 2-core CPU machine: _weight_and_bias): GPT-2 makes 4 such calls
                # a block. A parametrized layer's weight is not in _parameters: its forward runs.
                ps = self._parameters
                if "weight" in ps and "bias" in ps:
                    return torch.addmm(ps["bias"], x.view(-1, x.size(-1)), ps["weight"]).view(x.shape[:-1] + (self.nf,))
            return self._gemmtune_base_forward(x)
        if _torchs_own(x) or _transformed():
            return self._gemmtune_base_forward(x)
        if p is _TUNED and x.dtype == self.dispatcher.torch_dtype:
            return self._gemmtune_tuned(x)
    if type(self) not in _CONV1D_PATCHED and _parametrized(self):  # as Linear.forward
        with parametrize.cached():
            return self.forward(x)
    w = self.weight
    if _reshaped(self.dispatcher, w, True):  # as Linear.forward
        _warn_reshaped(self, w, True, stacklevel=2)
        return self._gemmtune_base_forward(x)
    if _is_compiling() and (_torchs_own(x) or _odd_bias(self.bias, w.shape[1]) or traces_as_torch(self.dispatcher)
                            or _exporting()):
        return self._gemmtune_base_forward(x)
    dt = self.dispatcher.torch_dtype
    if x.dtype != dt or w.dtype != dt:
        if not self._gemmtune_warned:
            self._gemmtune_warned = True
            warnings.warn(f"gemmtune Conv1D: input {x.dtype} / weight {w.dtype} differ from the "
                          f"dispatcher's {dt}: using torch.addmm", RuntimeWarning, stacklevel=2)
        return self._gemmtune_base_forward(x)
    return _forward(self, x, self._gemmtune_tuned, self._gemmtune_base_forward)


def _conv1d_tuned(self, x: torch.Tensor) -> torch.Tensor:
    # x @ W + b with the bias fused into the tuned kernel's epilogue (one launch).
    w = self.weight
    try:
        y = mm_bias(x.reshape(-1, x.shape[-1]), w, self.bias, self._gemmtune_handle)
    except ValueError:
        if _reshaped(self.dispatcher, w, True):  # a weight replaced past a cached tuned path: Linear._tuned says
            self._gemmtune_paths.pop(x.shape, None)
            _warn_reshaped(self, w, True, stacklevel=3)
            return self._gemmtune_base_forward(x)
        if _odd_bias(self.bias, w.shape[1]):
            return self._gemmtune_base_forward(x)  # a broadcasting bias: the layer's own forward
        if not x.is_neg():
            raise
        y = mm_bias(x.resolve_neg().reshape(-1, x.shape[-1]), w, self.bias, self._gemmtune_handle)
    return y.view(*x.shape[:-1], w.shape[1])


def _check_conv1d_fits(d: Dispatcher, w: torch.Tensor) -> None:
    """``_check_fits`` for a Conv1D's weight W [in, out], which it reads as a row-major B."""
    _check_fits(d, w.shape[0], w.shape[1], w.dtype)
    if d.layout_b != "row":
        raise ValueError("a Conv1D reads its weight [in, out] as a row-major B: the dispatcher needs layout_b='row'")


def patch_conv1d(module: torch.nn.Module, dispatcher: Dispatcher) -> torch.nn.Module:
    """Convert one HF transformers ``Conv1D`` (``x @ W + b``, W [in, out]) in place: its class
    becomes a subclass whose forward runs the GEMM on ``dispatcher`` (dynamic m, n=out, k=in,
    layout_b='row', since W is read as it is stored)."""
    _check_conv1d_fits(dispatcher, module.weight)
    _unretire(module)
    base, cls = type(module), None
    if base not in _CONV1D_CLASSES.values():
        cls = _CONV1D_CLASSES.get(base)
        if cls is None:
            cls = type(f"Gemmtune{base.__name__}", (base,),
                       {"forward": _conv1d_forward, "_gemmtune_base_forward": base.forward,
                        "_gemmtune_tuned": _conv1d_tuned, "_gemmtune_hot": _NO_SHAPE,
                        "_gemmtune_hf_forward": _hf_conv1d_forward(base) is not None,
                        "eager_choices": Linear.eager_choices, "eager_paths": Linear.eager_paths,
                        "__reduce_ex__": _reduce_as_torch, "__deepcopy__": _deepcopy_converted,
                        "__copy__": _copy_converted,
                        "_gemmtune_torch_class": staticmethod(lambda base=base: base)})
            _CONV1D_CLASSES[base] = cls
            _CONV1D_PATCHED.add(cls)
    module.dispatcher = dispatcher
    module._gemmtune_handle = REGISTRY.register(dispatcher)
    module._gemmtune_warned = False
    module._gemmtune_shape_warned = False
    _unrecord(module)  # was left as torch's (patch) or given back to it (retire): converted now
    if not hasattr(module, "_gemmtune_eager"):
        _EagerPaths().attach(module)
    if cls is not None:  # the class last, as in Linear.from_linear (it says why)
        module.__class__ = cls
    return module


def _table_names_another(d: Dispatcher) -> bool:
    """Whether ``d``'s table has an entry (mm or addmm) of its N and K naming a kernel other than
    cuBLAS (a table's exact entry for a shape is tried before the hints, and its addmm winner
    serves calls with a bias)."""
    if d.table is None:
        return False
    nk = (d.dims["n"], d.dims["k"])

    def names_another(key: str, tcs) -> bool:
        p = Problem.from_key(key)
        return p.op in ("mm", "addmm") and (p.n, p.k) == nk and any(tc.choice != ATEN for tc in tcs)
    return any(names_another(key, tcs) for key, tcs in d.table.entries.items())


def runs_as_torch(d: Dispatcher) -> bool:
    """Whether a layer on ``d`` would run cuBLAS for every call, exactly what torch's own forward
    runs: every tuned hint chose unpadded cuBLAS (``Dispatcher.all_aten``), no decision made or
    loaded so far names another kernel, and no table entry of its N and K names one
    (``_table_names_another``). ``patch`` leaves such layers as torch's."""
    if not d.all_aten or any(dec.choice != ATEN for dec in d.decisions.values()):
        return False
    return not _table_names_another(d)


def traces_as_torch(d: Dispatcher) -> bool:
    """``runs_as_torch`` as a patched layer asks it under torch.compile: without the decisions made
    so far. dynamo guards on what traced code reads, and the decisions fill in on the layers'
    first calls, so reading them recompiled every patched model on its second call (a guard on
    ``len(dispatcher._decisions)``; seen on a tiny Llama on the CPU, 2026-11-30). The hints and the
    table do not change after patch."""
    return d.all_aten and not _table_names_another(d)


class _Recorded:
    """The dispatcher recorded on a layer ``patch`` left as torch's. It pickles as None, so that
    ``torch.save(model)`` of a patched model writes a plain torch model: a Dispatcher cannot be
    pickled, and torch truncates the file before pickling starts (a checkpoint already at that
    path was lost). Shared by ``copy.deepcopy``, as dispatchers are.

    A layer ``retire`` gave back to torch also keeps its eager record (``eager``: ``{"paths": ...,
    "choices": ...}``, what ``eager_paths`` and ``eager_choices`` showed) and its weight, which ``compile_route`` routes to the dispatcher
    under torch.compile; a deep copy registers the copy's weight the same way."""
    __slots__ = ("dispatcher", "eager", "weight")

    def __init__(self, dispatcher: Dispatcher, eager: dict | None = None, weight=None) -> None:
        self.dispatcher = dispatcher
        self.eager = eager
        self.weight = weight  # a weakref to the retired layer's weight, or None

    def __reduce__(self):
        return (type(None), ())

    def __deepcopy__(self, memo):
        w = self.weight() if self.weight is not None else None
        if w is None:
            return self
        # The module's __dict__ is copied in order, its _parameters (set in Module.__init__) before
        # this attribute (set at retire): the copy's weight is in the memo by now.
        new_w = memo.get(id(w))
        if new_w is None:
            return self
        from . import compile_route
        compile_route.register(new_w, self.dispatcher)
        return _Recorded(self.dispatcher, self.eager, weakref.ref(new_w))


def _unrecord(module: torch.nn.Module) -> None:
    """Drop the dispatcher recorded on a layer about to be converted, and the compiled-graph route
    of a retired one's weight (its converted forward traces the op itself)."""
    rec = module.__dict__.pop("_gemmtune_dispatcher", None)
    w = rec.weight() if isinstance(rec, _Recorded) and rec.weight is not None else None
    if w is not None:
        from . import compile_route
        compile_route.unregister(w)


def recorded_dispatcher(module: torch.nn.Module) -> Dispatcher | None:
    """The dispatcher ``patch`` recorded on a layer it left as torch's, or None."""
    rec = module.__dict__.get("_gemmtune_dispatcher")
    return rec.dispatcher if isinstance(rec, _Recorded) else None


def _leave_as_torch(module: torch.nn.Module, dispatcher: Dispatcher, conv: bool) -> None:
    """Record ``dispatcher`` on ``module`` (checked as a conversion would check it) and change
    nothing else: its class, forward and eager cost stay torch's."""
    if conv:
        _check_conv1d_fits(dispatcher, module.weight)
    else:
        _check_linear_fits(dispatcher, module)
    _unrecord(module)  # a retired layer's route, where patch gives it a dispatcher that runs cuBLAS only
    _unretire(module)
    module._gemmtune_dispatcher = _Recorded(dispatcher)


_RETIRED_CLASSES: dict[type, type] = {}


def _retired_class(base: type) -> type:
    """The class of a retired layer of torch class ``base``: a subclass of the same name with nothing
    of its own but pickling and copying (``forward`` is ``base``'s, found through the MRO as for any
    layer). Not ``base`` itself: dynamo guards on a module's class, and with ``base`` a model compiled
    after an unpatched one of the same architecture reused its graph (no route: the H200, session 61,
    call 2), and an unpatched model compiled after a retired one would run the retired one's routes."""
    cls = _RETIRED_CLASSES.get(base)
    if cls is None:
        cls = type(base.__name__, (base,), {
            "__module__": base.__module__, "__reduce_ex__": _reduce_as_torch,
            "__deepcopy__": _deepcopy_converted, "__copy__": _copy_converted,
            "_gemmtune_torch_class": staticmethod(lambda base=base: base)})
        cls.__qualname__ = base.__qualname__
        _RETIRED_CLASSES[base] = cls
    return cls


def _unretire(module: torch.nn.Module) -> None:
    """A retired layer about to be converted again: its torch class first (the conversions subclass
    the class they find)."""
    if type(module) in _RETIRED_CLASSES.values():
        module.__class__ = module._gemmtune_torch_class()


# What a conversion (Linear._attach, patch_conv1d, _EagerPaths.attach) puts in a layer's __dict__:
# ``retire`` takes it out again, so that the layer is torch's, attribute for attribute.
_CONVERSION_STATE = ("dispatcher", "_gemmtune_handle", "_gemmtune_warned", "_gemmtune_shape_warned",
                     "_gemmtune_eager", "_gemmtune_paths", "_gemmtune_hot")


def retire(model: torch.nn.Module) -> list[str]:
    """Give back to torch every converted layer of ``model`` whose eager calls all run cuBLAS: each
    input shape it has met took ``F.linear`` (its own timing, or the step gate's verdict). Its
    forward becomes torch's ``nn.Linear`` / ``Conv1D`` one again (its class a subclass of the same
    name with no method of its own but pickling and copying: ``_retired_class`` says why), so its
    eager calls cost exactly what torch's do; its dispatcher stays recorded on it (``recorded_dispatcher``, ``dispatchers``,
    ``save_patched``), and under torch.compile with Inductor its GEMM still runs on that
    dispatcher: ``compile_route``'s pre-grad pass puts the ``gemmtune::mm`` op where torch's forward
    traced ``F.linear`` (``torch.addmm`` for a Conv1D).

    Why (issue 17): on the H200 such a layer cost 2-4 us of host time per un-graphed call more
    than torch's own, in whole decode steps (session 60, bench-model against an unpatched deep
    copy: Llama-1B decode b16 0.983x, GPT-2 decode 0.971x), with the same kernels in the same GPU
    time; they were converted because some M hint of their dispatcher chose a Triton kernel that
    the steps never ran in eager mode.

    The price: a new eager input shape of a retired layer runs cuBLAS untimed (torch's own forward),
    where a converted layer would have timed its tuned kernel against cuBLAS. Under CUDA graphs a
    retired layer runs cuBLAS too; patch with ``eager_policy="tuned"`` for graph capture (such
    layers are never retired). Left converted: layers that met no shape yet, any with a tuned eager
    path, ``eager_policy="tuned"`` layers, a fused group's layer, a parametrized one, and one whose
    weight no longer fits its dispatcher. Returns the names of the layers retired.

    ``gate_eager(retire=True)`` and ``patch(example_inputs=...)`` call this after their verdicts."""
    from . import compile_route

    compile_route.policy()  # a bad $GEMMTUNE_COMPILE_ROUTE: its error before any layer changes
    fused = {id(m._gemmtune_group.fused) for m in model.modules() if "_gemmtune_group" in m.__dict__}
    done = []
    for name, mod in model.named_modules():
        t = mod.__dict__.get("_gemmtune_eager")
        if t is None or id(mod) in fused or t.policy != "measure" or not t.by_shape:
            continue
        if type(mod) is not Linear and type(mod) not in _CONV1D_PATCHED:  # parametrize's subclass, say
            continue
        if any(p is not _ATEN for p in t.by_shape.values()):
            continue
        conv = type(mod) is not Linear
        w = mod._parameters.get("weight")
        d = mod.dispatcher
        if not isinstance(w, torch.Tensor) or _reshaped(d, w, conv):
            continue
        # first: torch's forward, which the retired class inherits, reads none of the state below
        mod.__class__ = _retired_class(mod._gemmtune_torch_class())
        for k in _CONVERSION_STATE:
            mod.__dict__.pop(k, None)
        # what eager_paths and eager_choices showed, kept for a look afterwards
        mod._gemmtune_dispatcher = _Recorded(d, {"paths": t.paths, "choices": dict(t.log)}, weakref.ref(w))
        compile_route.register(w, d)
        done.append(name or "<model>")
    if done:
        compile_route.install()
    return done


def retired(module: torch.nn.Module) -> bool:
    """Whether ``module`` is a layer ``retire`` gave back to torch (its GEMM routed to its dispatcher
    under torch.compile)."""
    rec = module.__dict__.get("_gemmtune_dispatcher")
    return isinstance(rec, _Recorded) and rec.eager is not None


def patch(model: torch.nn.Module, table=None, *,
          dispatchers: MutableMapping[tuple, Dispatcher] | None = None, example_inputs=None,
          tune_missing: bool | None = None, eager_policy: str = "measure", convert_aten_layers: bool = False,
          fuse: bool = False, pdl: bool = False, eager_gate: bool = True, retire: bool = True,
          **compile_kwargs) -> torch.nn.Module:
    """Convert every ``torch.nn.Linear`` of ``model`` (the model itself included) in place,
    and every HF transformers ``Conv1D`` (GPT-2's ``x @ W + b``).

    ``example_inputs``: a list of example inputs, one per pass: tuples of positional arguments
    (``[(x_prefill,), (x_decode,)]``), dicts of keyword arguments (an encoder-decoder's
    ``[dict(input_ids=..., decoder_input_ids=...)]``) or tensors: the model is
    run on them under ``gemmtune.capture``, and every layer shape is tuned for the M values
    those passes produced, all in ONE tuning call (``gemmtune.tune_model``; ``compile_kwargs``
    then go to ``tune``, e.g. ``fast=True``). A layer whose forward none of the passes ran (an
    unused head; Mamba's dt_proj, whose weight its mixer multiplies directly) is left as it is,
    named in a warning, rather than tuned in a second call at M values nothing measured
    (``tune_missing=True`` tunes it so). Save the result with
    ``gemmtune.save_patched(path, gemmtune.nn.dispatchers(model))`` and re-apply it in a new
    process with ``gemmtune.load_patched(model, path)``.

    Layers with the same (out_features, in_features, dtype) share one dispatcher,
    tuned once by ``compile_mm(n=out, k=in, dtype=..., layout_b='col', **compile_kwargs)``;
    with a ``table`` the mode defaults to 'table'. ``dispatchers`` (keyed
    ``(n, k, dtype_name)``) supplies ready ones, e.g. loaded with ``gemmtune.load``,
    and receives the new ones, so they can be saved; a layer with none is tuned here
    (``tune_missing``, default True without ``example_inputs``) or left as it is, with a warning. Only modules whose type is
    exactly ``nn.Linear`` are converted (subclasses may override forward; e.g.
    MultiheadAttention's out_proj is used through its weight, not its forward); a subclass
    with a forward of its own (Falcon's ``FalconLinear``) is left as it is, with a warning that
    names its class, since its forward may compute something else than ``x @ W.T + b``.
    Layers of a dtype gemmtune does not multiply (float64) stay and are warned about.
    Parameters are shared, so optimizers and state_dicts are unaffected.
    ``eager_policy``: ``"measure"`` (default) lets each layer time its tuned kernel against
    ``F.linear`` on the first eager call of a shape and keep the faster (module docstring);
    ``"tuned"`` always runs the tuned kernel.
    ``eager_gate`` (with ``example_inputs``, on a GPU, ``eager_policy="measure"``): after the layers
    choose, each example pass is timed as a whole eager step against cuBLAS on every layer, and
    the tuned eager paths of its shapes are kept only where the step is faster with them
    (``gemmtune.eager_gate``; a layer timed alone cannot see a step bound by the host's issue
    rate). The passes run again 18 to 152 times each under ``no_grad``; an input a pass mutates
    (a KV cache) must take that, or pass ``eager_gate=False`` and call
    ``gemmtune.nn.gate_eager(model, {name: step})`` with steps that reset their state.
    ``retire`` (with the gate): then every converted layer whose eager shapes all run cuBLAS goes
    back to torch's own class, with no eager cost, its GEMM still on its dispatcher under
    torch.compile (``retire``); pass ``retire=False`` to gate more steps later
    (``gate_eager(model, steps, retire=True)`` last).
    ``fuse=True`` (with ``example_inputs``) first runs ``gemmtune.fuse_linears`` on them: sibling
    layers that read one input (q/k/v, gate/up) become one GEMM each, and the fused shapes are
    what is tuned (``gemmtune.fuse``; ``save_patched(path, model)`` records the groups, which
    ``load_patched`` re-fuses in a new process).

    Layers whose dispatcher runs cuBLAS for every shape (every tuned hint chose ``aten``:
    ``runs_as_torch``) are left as they are, torch's own ``nn.Linear`` / ``Conv1D``: a converted
    layer would run the same cuBLAS call behind a few µs of Python per eager call (issue 17),
    and under torch.compile it traces as ``F.linear`` anyway. Their dispatcher is recorded on
    them (``_gemmtune_dispatcher``), so ``dispatchers(model)``, ``save_patched`` and
    ``load_patched`` keep it, and a later ``patch`` reuses it; with ``progress`` the count is
    printed. ``convert_aten_layers=True`` converts them too.

    ``pdl=True`` (Hopper+, inference): in graphs that torch.compile builds with Inductor's PDL on
    (``torch._inductor.config.triton.enable_pdl = True``), each layer whose winners include a
    one-slice GEMV strip (tuned here, or in ``dispatchers`` given) serves it as its ``-pdl`` twin
    (``gemmtune.pdl``); eager calls and other compiles serve the plain strips, where the twins
    were measured to cost ~1 us a GEMM.

    Example::

        >>> dispatchers = {}
        >>> gemmtune.patch(model, dispatchers=dispatchers, hints={"m": [1, 64, 2048]})  # doctest: +SKIP
        >>> for (n, k, dt), d in dispatchers.items(): d.save(f"mm_{n}x{k}_{dt}.json")  # doctest: +SKIP
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
    if eager_policy not in EAGER_POLICIES:
        raise ValueError(f"eager_policy must be one of {EAGER_POLICIES}, got {eager_policy!r}")
    for fixed in ("n", "k", "dtype", "layout_b"):  # compile_mm's own: they came out as "got multiple values"
        if fixed in compile_kwargs:
            raise TypeError(f"patch takes no {fixed}=: each layer's N, K, dtype and B layout come from its "
                            "weight (convert the model's dtype first, e.g. model.to(torch.bfloat16))")
    if pdl:
        from .pdl import attach_twins, warn_if_training
        warn_if_training(model, "patch")
        if dispatchers:  # before the layers register them: a handle says whether it has a twin
            attach_twins(dispatchers)
    if fuse and example_inputs is None:
        raise ValueError("patch(fuse=True) needs example_inputs: the sibling layers are found by running the model")
    if example_inputs is not None:
        from .capture import example_passes
        from .modeltune import tune_model
        # (a generator is read once, for fuse_linears, tune_model and the eager gate)
        example_inputs = example_passes(example_inputs)
        if fuse:
            from .fuse import fuse_linears
            fuse_linears(model, inputs=example_inputs)
        if pdl and "tune_fn" not in compile_kwargs:  # gemmtune.tune's call: the twins' credit (pdl.PDL_CREDIT)
            from .pdl import credit_kwargs
            tuned = tune_model(model, example_inputs, **credit_kwargs(compile_kwargs))
        else:
            tuned = tune_model(model, example_inputs, **compile_kwargs)
        if pdl:  # before the layers register them (and without tune_model's own warning again)
            attach_twins(tuned)
        out = _patch_layers(model, table, tuned, bool(tune_missing), eager_policy, convert_aten_layers,
                            "did not run in the example passes (no GEMM of their shape was captured)",
                            _missing_kwargs(compile_kwargs))
        if dispatchers is not None:  # after: with tune_missing=True, _patch_layers adds to ``tuned``
            dispatchers.update(tuned)
        if eager_gate and eager_policy == "measure":
            from .eager_gate import gate_eager
            gate_eager(model, example_inputs, progress=_says(compile_kwargs), retire=retire)
    else:
        out = _patch_layers(model, table, dispatchers, tune_missing is None or tune_missing, eager_policy,
                            convert_aten_layers, "had no dispatcher given", compile_kwargs)
    if pdl:  # and those tuned layer by layer above, which registered before they could get one
        attach_twins(_dispatchers_of(model).values())
    return out


def _says(kwargs: dict) -> bool:
    """Whether patch prints its progress: ``progress=`` where given, else when someone is
    watching (``dispatch.interactive``)."""
    say = kwargs.get("progress")
    return dispatch.interactive() if say is None else bool(say)


# compile_mm's own keywords among tune_model's (the others go to the tuner through its tune_kwargs).
_COMPILE_MM_KEYS = ("mode", "tune_fn", "verify", "families", "space", "store", "device", "progress", "deterministic")


def _missing_kwargs(tune_model_kwargs: dict) -> dict:
    """compile_mm's keywords for the layers ``tune_missing=True`` tunes after patch's one tuning
    call (``tune_model``'s): the same tuner, families, store and tuning options. Only ``progress``
    was passed on, so such a layer was tuned by the real tuner over every family into
    ./gemmtune.sqlite, whatever ``tune_fn``, ``families``, ``store`` or ``fast`` the call gave."""
    kw = {k: v for k, v in tune_model_kwargs.items() if k in _COMPILE_MM_KEYS}
    rest = {k: v for k, v in tune_model_kwargs.items()
            if k not in _COMPILE_MM_KEYS and k not in ("extra_m", "prestart")}  # tune_model's own
    if rest:
        kw["tune_kwargs"] = rest
    return kw


def _patch_layers(model: torch.nn.Module, table, dispatchers, tune_missing: bool, eager_policy: str,
                  convert_aten_layers: bool, missing: str, compile_kwargs: dict, *,
                  who: str = "gemmtune.patch") -> torch.nn.Module:
    """``patch`` past its example passes: convert (or leave, or tune) every layer; ``missing``
    says, in the warning, why the layers left untuned had no dispatcher, each named with its
    shape (the key a dispatcher is looked up by). ``who`` is the public function the warnings
    name (``load_patched`` calls this too); they point at the line that called it (stacklevel 3)."""
    if table is not None:
        compile_kwargs.setdefault("mode", "table")
        compile_kwargs["table"] = table
    compile_kwargs.setdefault("layout_b", "col")
    cache = dispatchers if dispatchers is not None else {}
    skipped, untuned, as_torch, unconvertible = [], [], [], []
    own_forward: dict[str, int] = {}  # class name -> count: nn.Linear subclasses left as they are
    torch_only: dict[int, bool] = {}  # id(dispatcher) -> runs_as_torch, once per shared dispatcher
    from .modeltune import is_conv1d
    say = _says(compile_kwargs)
    reset = False  # whether a converted layer got another dispatcher, and a fresh eager-path table
    for name, mod in list(model.named_modules()):
        converted = isinstance(mod, Linear) or hasattr(mod, "_gemmtune_handle")  # by an earlier patch
        if converted:
            conv = not isinstance(mod, Linear)
            w = mod.weight
            if w.dim() != 2 or not _reshaped(mod.dispatcher, w, conv):
                reset |= _reattach(mod, cache, eager_policy)
                continue
            # Its weight was replaced by one of another shape since (resize_token_embeddings, a
            # pruned head): looked up or tuned below as a new layer, as its warning advises
            # (_reattach looked up no dispatcher for it, and it kept the one it no longer fits).
        else:
            conv = is_conv1d(mod)
        if type(mod) is not torch.nn.Linear and not conv and not converted and not retired(mod):
            # (a member of a fuse_linears group computes nothing of its own: its group's fused
            # layer, a plain nn.Linear, is converted instead)
            if isinstance(mod, torch.nn.Linear) and not isinstance(mod, Linear) and "_gemmtune_group" not in mod.__dict__:
                if type(mod).forward is not torch.nn.Linear.forward:
                    own_forward[type(mod).__name__] = own_forward.get(type(mod).__name__, 0) + 1
                elif isinstance(mod, torch.nn.modules.lazy.LazyModuleMixin) and mod.has_uninitialized_params():
                    # A LazyLinear before its first call: no in_features, nothing to tune yet. It
                    # becomes a plain nn.Linear at that call, unpatched: it was left with no word.
                    unconvertible.append(f"{name or '<model>'} (a LazyLinear not yet called: call the model once "
                                         "before patch)")
                elif parametrize.is_parametrized(mod):
                    # weight_norm, spectral_norm, orthogonal... made before patch: parametrize's own
                    # class over nn.Linear (a parametrization added after patch is kept, nn.Linear's
                    # forward is not changed by it). Was left with no word too.
                    unconvertible.append(f"{name or '<model>'} (parametrized: patch before parametrizing)")
            continue
        try:
            dt = dtype_name(mod.weight.dtype)
        except TypeError:
            skipped.append(f"{name or '<model>'} ({mod.weight.dtype})")
            continue
        if conv:
            n, k = mod.weight.shape[1], mod.weight.shape[0]
            keys = [(n, k, dt, "row")]
        else:
            # The weight's shape, not out_features / in_features: a weight assigned later does not update them
            n, k = mod.weight.shape
            keys = [(n, k, dt), (n, k, dt, "col")]  # 3-tuples: the keys before Conv1D existed
        # A dispatcher given for the layer's shape wins over one an earlier patch recorded on it
        # (load_patched onto a patched model applies the loaded ones).
        d = next((cache[key] for key in keys if key in cache), None)
        if d is None:
            d = recorded_dispatcher(mod)  # left as torch's by an earlier patch
            if d is not None and (d.dims["n"], d.dims["k"], d.dtype) != (n, k, dt):
                d = None  # recorded before the layer's dtype changed: looked up or tuned anew
        if d is None:
            if not tune_missing:
                untuned.append(f"{name or '<model>'} (N={n}, K={k}, {dt})")
                continue
            kw = dict(compile_kwargs, layout_b="row") if conv else compile_kwargs
            if say:
                hints = (kw.get("hints") or {}).get("m", "default hints")
                print(f"gemmtune.patch: tuning {name or '<model>'} (N={n}, K={k}, {dt}; M hints {hints})",
                      file=sys.stderr, flush=True)
            d = compile_mm(n=n, k=k, dtype=dt, **kw)
            cache[keys[0]] = d
        # (a converted layer stays converted, whatever its new dispatcher runs: its class is not undone)
        if not convert_aten_layers and not converted:
            if id(d) not in torch_only:
                torch_only[id(d)] = isinstance(d, Dispatcher) and runs_as_torch(d)
            if torch_only[id(d)]:
                _leave_as_torch(mod, d, conv)
                as_torch.append(name or "<model>")
                continue
        # A layer the step gate gave back to torch (retire), converted again: its gate verdicts go too
        reset |= retired(mod)
        if conv:
            patch_conv1d(mod, d)
        else:
            Linear.from_linear(mod, d)
        _EagerPaths(eager_policy).attach(mod)
    if reset:
        # The step gate's verdicts (eager_gate) named shapes of the eager-path tables just replaced:
        # load_patched onto a gated model kept them, saying a step ran cuBLAS while its layers
        # would now choose alone. Dropped; a gate over this call's example inputs records anew.
        model.__dict__.pop("_gemmtune_gate", None)
    if say and as_torch:
        print(f"gemmtune.patch: left {len(as_torch)} layer(s) as torch's own (every tuned hint chose cuBLAS; "
              "convert_aten_layers=True converts them): " + ", ".join(as_torch[:8])
              + (" ..." if len(as_torch) > 8 else ""), file=sys.stderr, flush=True)
    # ``who``, not "gemmtune.patch": load_patched into a float64 model named patch, which its caller never called.
    if skipped:
        warnings.warn(f"{who} left {len(skipped)} Linear layer(s) as they were: "
                      + ", ".join(skipped), RuntimeWarning, stacklevel=3)
    if own_forward:
        warnings.warn(f"{who} left {sum(own_forward.values())} layer(s) of nn.Linear subclasses with a "
                      "forward of their own as they were ("
                      + ", ".join(f"{cls} x{n}" for cls, n in sorted(own_forward.items()))
                      + "): patch converts exact nn.Linear only, whose forward it knows to be x @ W.T + b",
                      RuntimeWarning, stacklevel=3)
    if unconvertible:
        warnings.warn(f"{who} left {len(unconvertible)} nn.Linear layer(s) as they were: "
                      + ", ".join(unconvertible[:8]) + (" ..." if len(unconvertible) > 8 else ""),
                      RuntimeWarning, stacklevel=3)
    if untuned:
        warnings.warn(f"{who}: {len(untuned)} layer(s) {missing}, left as they were: "
                      + ", ".join(untuned[:8]) + (" ..." if len(untuned) > 8 else ""), RuntimeWarning, stacklevel=3)
    return model


def _reattach(mod: torch.nn.Module, given: MutableMapping, eager_policy: str) -> bool:
    """A layer an earlier ``patch`` converted: put it on the dispatcher ``given`` for its shape
    and dtype, when that is another one, with a fresh eager-path table (the old one timed the old
    kernels). Returns whether it changed. Before, such layers were skipped, and ``load_patched``
    onto a patched model silently kept the old dispatchers."""
    try:
        dt = dtype_name(mod.weight.dtype)
    except TypeError:
        return False
    if mod.weight.dim() != 2:  # not a product this layer can run on any dispatcher: its forward warns
        return False
    if isinstance(mod, Linear):
        n, k = mod.weight.shape  # not out_features / in_features (_patch_layers says why)
        keys = [(n, k, dt), (n, k, dt, "col")]
    else:
        keys = [(mod.weight.shape[1], mod.weight.shape[0], dt, "row")]
    d = next((given[key] for key in keys if key in given), None)
    if d is not None and d is mod.dispatcher and mod._gemmtune_eager.policy != eager_policy:
        # Its own dispatcher given again with another eager_policy (patch(model, dispatchers=ds,
        # eager_policy="tuned") after a "measure" patch): the policy was silently kept, and the
        # layer still timed its shapes and went through the step gate.
        _EagerPaths(eager_policy).attach(mod)
        return True
    if d is None or d is mod.dispatcher:
        return False
    if isinstance(mod, Linear):
        Linear.from_linear(mod, d)
    else:
        patch_conv1d(mod, d)
    _EagerPaths(eager_policy).attach(mod)
    return True


def dispatchers(model: torch.nn.Module, *, with_layout: bool = False) -> dict[tuple, Dispatcher]:
    """The dispatchers a patched model uses, keyed (n, k, dtype_name) for Linear layers, and
    (n, k, dtype_name, 'row') for Conv1D; ``with_layout=True`` keys every one with its
    layout of B (what ``save_patched`` takes). Layers ``patch`` left as torch's (every hint
    chose cuBLAS) are included: their dispatcher is recorded on them."""
    out = {}
    for mod in model.modules():
        d = getattr(mod, "dispatcher", None)
        if not (isinstance(mod, Linear) or (d is not None and hasattr(mod, "_gemmtune_handle"))):
            d = recorded_dispatcher(mod)  # a layer patch left as torch's
            if d is None:
                continue
        key = (d.dims["n"], d.dims["k"], d.dtype)
        out[key + (d.layout_b,) if with_layout or d.layout_b != "col" else key] = d
    return out


_dispatchers_of = dispatchers  # for patch, whose argument of that name hides this function


# ---------------------------------------------------------------------------- bmm
class BMM(torch.nn.Module):
    """``torch.bmm(a, b)`` on a gemmtune dispatcher, as a module: ``forward(a, b)`` takes 3-D
    operands (batch, M, K) @ (batch, K, N) and runs the ``gemmtune::bmm`` op (eager, autograd
    through torch.bmm, and torch.compile, where it is one opaque node). ``dispatcher``: a
    Dispatcher (``gemmtune.dispatch.compile_bmm``, ``lookup(table)``), or a table (a path or
    LookupTable) with ``dtype``, served by ``gemmtune.dispatch.lookup``.

    Example::

        >>> import torch, gemmtune
        >>> bmm = gemmtune.nn.BMM(None, dtype="fp32")      # no table: cuBLAS (torch.bmm) for every shape
        >>> bmm(torch.randn(2, 3, 4), torch.randn(2, 4, 5)).shape
        torch.Size([2, 3, 5])
    """

    def __init__(self, dispatcher=None, *, dtype=None):
        super().__init__()
        self.dispatcher = _bmm_dispatcher(dispatcher, dtype)
        self.handle = REGISTRY.register(self.dispatcher)

    def __reduce_ex__(self, protocol):
        """Pickled (``torch.save(model)``) without its dispatcher, which cannot be pickled: it
        loads as a BMM that runs torch.bmm (cuBLAS) for every shape, as a patched Linear loads
        unpatched. Refusing raised only after torch.save had truncated the file: an existing
        checkpoint at that path was destroyed."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("dispatcher", "handle")}
        return (_untuned_bmm, (dtype_name(self.dispatcher.torch_dtype),), state)

    __deepcopy__ = _deepcopy_converted  # (a copy keeps the dispatcher, shared, as before: not the pickle)
    __copy__ = _copy_converted

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if not _is_compiling() and _transformed():
            return torch.bmm(a, b)  # forward-mode AD or a torch.func transform: torch's (_transformed says why)
        if _autocast_on(a):
            return torch.bmm(a, b)  # autocast casts inside torch.bmm (the dispatcher kept fp32: _autocast_on)
        if a.dim() != 3 or b.dim() != 3:
            # torch.bmm's own rule: the dispatcher would run 2-D operands as an mm, so a call that
            # torch refuses returned a result here (a drop-in must not accept more than torch.bmm)
            raise RuntimeError(f"gemmtune.nn.BMM takes 3-D operands as torch.bmm does, got {a.dim()}-D and "
                               f"{b.dim()}-D (use gemmtune.matmul or a patched Linear for a 2-D product)")
        try:
            return torch_ops.bmm(a, b, self.handle)
        except (TypeError, ValueError, NotImplementedError):
            # A negated view (Tensor.is_neg()), a sparse or meta operand: torch.bmm takes them (route_bmm
            # leaves them to it, a patched Linear resolves the sign), the dispatcher refuses them by
            # name, and the op has no sparse kernel (NotImplementedError with grad). Asked only after
            # that refusal, so the hot path pays nothing.
            if _torchs_operand(a) or _torchs_operand(b):
                return torch.bmm(a, b)
            raise


def _torchs_operand(t: torch.Tensor) -> bool:
    """A bmm operand torch.bmm takes and the dispatcher refuses: sparse, negated, or on a device
    gemmtune does not run on (``meta``: a model built there, as a patched Linear's _torchs_own)."""
    return isinstance(t, torch.Tensor) and (t.layout is not torch.strided or t.is_neg() or not (t.is_cpu or t.is_cuda))


def _autocast_on(a: torch.Tensor) -> bool:
    """Whether autocast is on for ``a``'s device: then a bmm is torch's, which autocast casts (a patched
    Linear leaves such calls to F.linear: _torchs_own). The dispatcher kept its dtype, so under
    ``torch.autocast(dtype=torch.bfloat16)`` a routed or BMM product of fp32 operands came back fp32
    at fp32 precision, where torch.bmm gives bf16."""
    return isinstance(a, torch.Tensor) and _any_autocast() and torch.is_autocast_enabled(a.device.type)


def _untuned_bmm(dtype: str) -> BMM:
    return BMM(None, dtype=dtype)


def _bmm_dispatcher(target, dtype) -> Dispatcher:
    if isinstance(target, Dispatcher):
        return target
    if dtype is None:
        raise ValueError("a bmm route from a table (or none) needs dtype=, e.g. dtype='bf16'")
    return dispatch.lookup(target, dtype=dtype)


class _RouteBmm(torch.overrides.TorchFunctionMode):
    FUNCS = frozenset((torch.bmm, torch.matmul, torch.Tensor.bmm, torch.Tensor.matmul, torch.Tensor.__matmul__))

    def __init__(self, dispatcher: Dispatcher):
        super().__init__()
        self.dispatcher = dispatcher
        # Entered inside a compiled function: the registry's lock is a context manager dynamo cannot
        # trace (a graph break; an error under fullgraph=True), so take the handle as a constant.
        self.handle = torch_ops.handle_of(dispatcher) if _is_compiling() else REGISTRY.register(dispatcher)
        self.routed = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in self.FUNCS and not kwargs and len(args) == 2 and self._takes(*args):
            self.routed += 1
            return torch_ops.bmm(args[0], args[1], self.handle)
        return func(*args, **(kwargs or {}))

    def _takes(self, a, b) -> bool:
        # Every size the dispatcher fixes must match too: another bmm of the model (attention with
        # another head size) used to reach the dispatcher and raise there instead of running as usual.
        # ``== size``, not ``in (None, size)``: traced by torch.compile(dynamic=True), where a size is
        # a symbol, ``in`` compared by identity, and no call was routed.
        # Eager, a sparse or negated operand (``Tensor.is_neg()``, the .imag of a conjugated complex
        # tensor) is torch's too: torch.bmm takes them, and the dispatcher refused them by name, so a
        # bmm that ran outside the mode raised inside it. (Not asked in a trace: is_neg broke the graph.)
        dims = self.dispatcher.dims
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() == 3 and b.dim() == 3
                and (_is_compiling() or not (_transformed()  # torch's bmm under forward AD / torch.func
                                             or a.layout is not torch.strided or b.layout is not torch.strided
                                             or a.is_neg() or b.is_neg()))
                and a.shape[0] == b.shape[0] and a.shape[2] == b.shape[1]
                and a.dtype == b.dtype == self.dispatcher.torch_dtype and a.device == b.device
                and a.device.type in ("cpu", "cuda") and not _autocast_on(a)
                and all(dims[d] is None or dims[d] == size
                        for d, size in (("m", a.shape[1]), ("n", b.shape[2]), ("k", a.shape[2]))))


def route_bmm(target=None, *, dtype=None) -> _RouteBmm:
    """Opt-in routing of batched products, as a context manager: inside ``with route_bmm(...)``,
    ``torch.bmm``, ``torch.matmul``, ``Tensor.bmm`` and ``@`` on two 3-D operands of one batch
    size and the dispatcher's dtype run on gemmtune's dispatcher (the ``gemmtune::bmm`` op); every
    other call (2-D, broadcasting batch sizes, other dtypes, keyword arguments) runs as usual.
    ``target``: a Dispatcher, or a lookup table (path or LookupTable; None: none) with ``dtype``,
    served by ``gemmtune.dispatch.lookup`` (the table's bmm winner per shape, cuBLAS otherwise).
    The mode counts the calls it took (``.routed``, compiled calls included). A
    compiled function called inside the mode (or entering it) traces it: the calls it takes become
    the ``gemmtune::bmm`` op, with dynamic=True too, and leaving the mode recompiles. A ``BMM``
    module (or ``torch.ops.gemmtune.bmm``) is the explicit route.

    Example::

        >>> import torch, gemmtune
        >>> with gemmtune.nn.route_bmm(None, dtype="fp32") as r:
        ...     y = torch.randn(2, 3, 4) @ torch.randn(2, 4, 5)
        >>> r.routed, y.shape
        (1, torch.Size([2, 3, 5]))
    """
    return _RouteBmm(_bmm_dispatcher(target, dtype))


from .eager_gate import GateResult, gate_eager  # noqa: E402 - after the names it imports from here

__all__ = ["Linear", "patch", "patch_conv1d", "dispatchers", "runs_as_torch", "BMM", "route_bmm", "gate_eager",
           "GateResult", "retire", "retired", "recorded_dispatcher"]
