"""``Dispatcher``: ``mm(a, b)`` for any size of the dynamic dims; the first call of a shape decides
(decide.py) and builds its launch (launch.py), later calls only look it up and launch."""

from __future__ import annotations

import itertools
import json
import math
import numbers
import os
import threading
import warnings
import weakref
from pathlib import Path
from typing import Callable, Mapping, Sequence

import torch

from ..autograd import differentiable, needs_grad, torch_product, transformed
from ..epilogue import Epilogue, bind, apply_
from ..kernels.splitk import SplitKWorkspace
from .. import kernels
from ..problem import DTYPES, LAYOUTS, Problem, check_operands, dtype_name
from ..configs import Choice
from ..table import LookupTable
from .common import (ATEN, DIMS, FORMAT, MODES, SCHEMA_VERSION, SOURCES, Decision, HintChoice, _current_provenance,
                     _pkg, _random_operand, provenance_mismatches)
from .decide import Deciding
from .launch import Launching
from ..jsonio import write_atomic


# Every Dispatcher alive, by id(): how torch.compile reaches the object behind an id it traced
# (torch_ops.handle_of). Weak: a dispatcher nobody holds is freed as before.
LIVE: "weakref.WeakValueDictionary[int, Dispatcher]" = weakref.WeakValueDictionary()


def _size_ok(v) -> bool:
    # (numpy ints too; 0 is a size: nn.Linear(0, n) is a layer, its product the broadcast bias)
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0


def _sizes_ok(sizes) -> bool:
    """A hint's or a decision's key: (M, N, K) or (batch, M, N, K) sizes."""
    return isinstance(sizes, tuple) and len(sizes) in (3, 4) and all(_size_ok(v) for v in sizes)


def _check_sizes(dims: dict, hints: dict, hint_choices: tuple) -> None:
    """A static dim a size, each dynamic dim's hints sizes, each hint choice's sizes and time
    plausible: a saved dispatcher edited by hand (or written by a bug) with ``"k": "x"`` or a
    negative hint loaded without complaint and failed only at its first call, deep inside."""
    for d, v in dims.items():
        if v is not None and not _size_ok(v):
            raise ValueError(f"dims: {d} must be an int >= 0 or None (dynamic), got {v!r}")
    for d, hs in hints.items():
        if not hs or not all(_size_ok(h) for h in hs):
            raise ValueError(f"hints: {d} must list int sizes >= 0, got {list(hs)!r}")
    for h in hint_choices:
        if not isinstance(h, HintChoice):
            raise TypeError(f"hint_choices holds HintChoice entries, not {type(h).__name__}")
        if not _sizes_ok(h.sizes):
            raise ValueError(f"hint choice {h.choice}: sizes must be (M, N, K) or (batch, M, N, K) ints >= 0, "
                             f"got {h.sizes!r}")
        ms = h.device_ms
        if ms is not None and (isinstance(ms, bool) or not isinstance(ms, (int, float)) or not ms >= 0):
            raise ValueError(f"hint choice {h.choice}: device_ms must be a non-negative number or None, got {ms!r}")


def check_decision(where: str, sizes: tuple, *, source, verified, hint, times_ms, reason) -> dict | None:
    """A decision's fields read strictly, the same for a saved file's (persist.load, ``where`` naming
    the file's entry) and the constructor's ``decisions``: a ValueError names ``where`` and the
    field. Returns ``times_ms`` as floats (or None). What decides whether a first call verifies the
    decision is read strictly: bool() of a hand-edited "verified": "false" (meaning: check it again)
    was True, and a decision whose "source" read "empty" at a size with no 0 was never verified
    (_first_sight skips an empty product's), so either left its kernel running unchecked for good.
    A benchmark decision's times (choice id -> device ms, None: not timed) taken as they were: a
    list failed only at the next save, and a NaN, a negative time or a string was kept as if
    measured and written back by the next save; so was a key that is no choice id (each key must
    read back through Choice.parse as itself). ``reason`` is text (why the candidates before the
    choice were rejected)."""
    if not isinstance(verified, bool):
        raise ValueError(f"{where}: 'verified' must be true or false, got {verified!r}")
    if source not in SOURCES:
        raise ValueError(f"{where}: 'source' must be one of {SOURCES}, got {source!r}")
    if (source == "empty") != (0 in sizes):
        raise ValueError(f"{where}: source 'empty' is an empty product's (a size of 0), and only its: "
                         f"got source {source!r}")
    if hint is not None and not _sizes_ok(hint):
        raise ValueError(f"{where}: 'hint' must be (M, N, K) or (batch, M, N, K) ints >= 0, or None, got {hint!r}")
    if not isinstance(reason, str):
        raise ValueError(f"{where}: 'reason' must be a string, got {type(reason).__name__} {reason!r:.100}")
    if times_ms is None:
        return None
    if not isinstance(times_ms, Mapping):
        raise ValueError(f"{where}: 'times_ms' must be an object of choice id -> device ms, or null, "
                         f"got {type(times_ms).__name__}")
    for cid, ms in times_ms.items():
        if not isinstance(cid, str):
            raise ValueError(f"{where}: 'times_ms' is keyed by choice ids (strings), got {cid!r}")
        # a key that is no choice id (a typo, an edited file's 'cublas') was kept and written back
        # by the next save as if that choice had been timed
        try:
            canonical = Choice.parse(cid).id
        except (ValueError, TypeError) as e:
            raise ValueError(f"{where}: 'times_ms' is keyed by choice ids; key {cid!r} is none: {e}") from None
        if canonical != cid:
            raise ValueError(f"{where}: 'times_ms' key {cid!r} is not a choice id as written; did you mean "
                             f"{canonical!r}?")
        if isinstance(ms, bool) or not isinstance(ms, numbers.Real) or not math.isfinite(ms) or ms < 0:
            raise ValueError(f"{where}: 'times_ms' of {cid!r} must be a finite number >= 0 (device ms), "
                             f"got {ms!r}")
    return {cid: float(ms) for cid, ms in times_ms.items()}


def _named(sizes: tuple) -> str:
    return ", ".join(f"{d}={v}" for d, v in zip(("batch", "M", "N", "K")[-len(sizes):], sizes))


def _check_choices(dtype: str, layout_a: str, layout_b: str, hint_choices: tuple,
                   decisions: Mapping[tuple, Decision]) -> None:
    """Each hint's choice one its family can run at that hint's sizes, and each decision's at its
    shape's: the family's own ``validate``, the pure check a launch makes (``Deciding._runnable``).
    A saved dispatcher edited by hand to ``triton_mm:BM12-...`` loaded without complaint; as a hint
    it was then skipped at every first sight (the nearest hint silently never ran), and as a
    verified decision it failed at the shape's first call, deep inside the kernel launch
    (interpreter: "arange's range must be a power of 2"). 3-D sizes (a bmm's) are checked as a
    bmm of that batch, whose refusals (split-K's, ...) the families state."""
    def problem(sizes: tuple) -> Problem:
        # (a batch of 0 is a decision too, "empty": no kernel runs, and a Problem's batch is >= 1)
        bmm = {"op": "bmm", "batch": max(1, sizes[0])} if len(sizes) == 4 else {}
        return Problem.from_sizes(*sizes[-3:], dtype, layout_a=layout_a, layout_b=layout_b, **bmm)

    def check(what: str, choice, sizes: tuple) -> None:
        if not isinstance(choice, Choice):
            raise TypeError(f"{what}: choice must be a gemmtune Choice, not {type(choice).__name__}")
        try:
            kernels.validate_choice(choice, problem(sizes))
        except (ValueError, TypeError) as e:
            raise ValueError(f"{what}: choice {choice.id} cannot run there: {e}") from None

    for i, h in enumerate(hint_choices):
        check(f"hint_choices[{i}] ({_named(h.sizes)})", h.choice, h.sizes)
    for sizes, d in decisions.items():
        # The constructor's decisions are read as a saved file's are (check_decision), each error a
        # ValueError naming the decision and the field: they were taken as they came (a NaN or
        # negative time, a source or reason of any type, "verified": "no"), and a choice that was
        # no Choice was a TypeError.
        if not _sizes_ok(sizes):
            raise ValueError(f"decisions are keyed (M, N, K) or (batch, M, N, K) ints >= 0, got {sizes!r}")
        where = f"the decision for {_named(sizes)}"
        if not isinstance(d, Decision):
            raise ValueError(f"{where}: decisions holds Decision entries, not {type(d).__name__}")
        if not isinstance(d.choice, Choice):
            raise ValueError(f"{where}: 'choice' must be a gemmtune Choice, not {type(d.choice).__name__} "
                             f"{d.choice!r:.100}")
        check_decision(where, sizes, source=d.source, verified=d.verified, hint=d.hint, times_ms=d.times_ms,
                       reason=d.reason)
        check(where, d.choice, sizes)


def _check_static(dims: dict, hint_choices: tuple, decisions: Mapping[tuple, Decision]) -> None:
    """Each hint's and decision's sizes agree with the static dims: a saved dispatcher edited by
    hand to a hint at K=0 in a K=32 dispatcher loaded, and that hint (measured at another shape)
    then ranked among the real ones; a decision of another N was never looked up."""
    def check(what: str, sizes: tuple) -> None:
        for d, v in zip(DIMS, sizes[-3:]):
            if dims.get(d) is not None and v != dims[d]:
                raise ValueError(f"{what}: {d}={v} where this dispatcher has static {d.upper()}={dims[d]}")

    for i, h in enumerate(hint_choices):
        check(f"hint_choices[{i}] ({_named(h.sizes)})", h.sizes)
    for sizes in decisions:
        check(f"the decision for {_named(sizes)}", sizes)


class Dispatcher(Deciding, Launching):
    """``mm(a, b)`` for any size of the dynamic dims; build one with ``compile_mm`` or ``load``.

    ``dims`` maps 'm', 'n', 'k' to a static size or None (dynamic). ``hint_choices``
    holds one tuned winner per hint combination. Decisions made so far are in
    ``decisions``; ``n_decisions`` counts the shapes decided in this process.

    A call launches on its operands' GPU (``launch.on_device``) and the current stream. The
    split-K and skinny choices' scratch (``SplitKWorkspace``) is one per GPU and stream, so calls
    on concurrent streams do not share it.

    Example::

        >>> import torch, gemmtune
        >>> mm = gemmtune.compile_mm(n=24, k=64, dtype="fp16", hints={"m": [8, 128]},
        ...                          tune_fn=lambda ps, **kw: {p.key: "aten" for p in ps})
        >>> _ = mm(torch.randn(20, 64, dtype=torch.float16), torch.randn(64, 24, dtype=torch.float16))
        >>> mm.decision(m=20).source, mm.decision(m=20).hint
        ('similarity', (8, 24, 64))
    """

    def __init__(self, *, dims: Mapping[str, int | None], dtype, hints: Mapping[str, Sequence[int]],
                 hint_choices: Sequence[HintChoice], mode: str = "similarity",
                 table: LookupTable | None = None, timer=None, verify: bool = True,
                 layout_a: str = "row", layout_b: str = "row", provenance: dict | None = None,
                 decisions: Mapping[tuple[int, int, int], Decision] | None = None, batch: int | None = None):
        LIVE[id(self)] = self  # a Dispatcher is never copied or unpickled (__deepcopy__, __reduce__)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        for name, lay in (("layout_a", layout_a), ("layout_b", layout_b)):
            if lay not in LAYOUTS:
                raise ValueError(f"{name} must be one of {LAYOUTS}, got {lay!r}")
        if not hint_choices:
            raise ValueError("a dispatcher needs at least one hint choice")
        self.dims = {d: dims.get(d) for d in DIMS}
        self.dynamic = tuple(d for d in DIMS if self.dims[d] is None)
        self.dtype = dtype_name(dtype)
        self.torch_dtype = DTYPES[self.dtype]
        self.hints = {d: tuple(hints[d]) for d in self.dynamic}
        self.hint_choices = tuple(hint_choices)
        _check_sizes(self.dims, self.hints, self.hint_choices)
        self.layout_a, self.layout_b = layout_a, layout_b
        self._decisions: dict[tuple[int, int, int], Decision] = dict(decisions or {})
        _check_choices(self.dtype, layout_a, layout_b, self.hint_choices, self._decisions)
        _check_static(self.dims, self.hint_choices, self._decisions)
        self.mode = mode
        self.table = table
        self.timer = timer
        self.verify = verify
        self.provenance = dict(provenance) if provenance else _current_provenance("by-hand")
        if batch is not None and not (_size_ok(batch) and batch >= 1):
            raise ValueError(f"batch must be an int >= 1 (the bmm batch the hints were tuned at) or None, "
                             f"got {batch!r}")
        # compile_bmm's: the hints were tuned as bmm problems of this batch, and warmup warms bmm calls
        # at it (None: a dispatcher of 2-D products).
        self.batch = batch
        self.n_decisions = 0
        # Hot-path cache: (a.shape, b.shape, a.dtype, b.dtype, a.device, b.device, a.is_neg(),
        # b.is_neg()) -> run(a, b).
        # Only keys that passed validation get in, so a hit needs no checks. The devices, not
        # get_device(): that is -1 for the CPU and the meta device alike, so meta operands of a
        # shape first run on the CPU hit its closure and failed deep in the Triton interpreter
        # ("Cannot copy out of meta tensor") instead of being refused by name. ``is_neg()``: a
        # negated view (the .imag of a conjugated complex tensor) holds its values without the
        # sign, which the Triton kernels do not apply; it misses here and is refused at first sight
        # (problem.check_not_negated) instead of running a shape's cached kernel.
        self._fast: dict[tuple, Callable] = {}
        # The same for calls with a fused epilogue: that key plus the activation and the bias's
        # and residual's (shape, dtype, device) -> run(a, b, bias, residual).
        self._fast_fused: dict[tuple, Callable] = {}
        self._lock = threading.Lock()
        self._workspace = SplitKWorkspace()
        self._hint_sizes = [h.sizes for h in self.hint_choices]
        # (M, N, K) -> the table's addmm winner for calls with a bias (None: the table has none
        # that runs here), decided once per shape at its first call with a bias.
        self._addmm: dict[tuple[int, int, int], Decision | None] = {}
        self.binaries_note = ""  # what load() did with saved kernel binaries
        # gemmtune.pdl.attach_twins: the dispatcher a graph compiled with Inductor's PDL on calls
        # in this one's place (its GEMV strips as -pdl configs); None: this one everywhere.
        self.pdl_twin: Dispatcher | None = None

    def __call__(self, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None,
                 activation: str = "none", residual: torch.Tensor | None = None) -> torch.Tensor:
        """``a @ b``; the first call of a shape decides (and verifies), later ones only launch.

        With ``bias`` (N,), ``activation`` or ``residual`` (M, N): ``act(a @ b + bias) + residual``
        in one launch of the decided kernel, the epilogue fused into its store
        (gemmtune.epilogue). The decision is the shape's, whatever the epilogue: verification
        checks the plain product.

        Differentiable: where autograd records (grad mode on, an operand requires grad) the
        result has a ``grad_fn`` whichever kernel runs, with the backward on torch's products
        (gemmtune.autograd). Under forward-mode AD or a ``torch.func`` transform the call runs as
        torch's own ops (``gemmtune.autograd.transformed``).

        Under torch.compile the call is traced as the ``gemmtune::mm`` op (``gemmtune::bmm`` for
        3-D operands; ``gemmtune.torch_ops.traced_call``): one opaque node, no graph break, this
        dispatcher run at run time. Traced through, its cache lookup broke the graph on every call
        and its first sight (deciding, verifying) ran inside the trace."""
        if torch.compiler.is_compiling():
            from ..torch_ops import traced_call
            return traced_call(self, a, b, bias, activation, residual)
        if transformed():
            return self._torch_call(a, b, bias, activation, residual)
        if needs_grad(a, b, bias, residual):
            return differentiable(lambda: self._run(a, b, bias, activation, residual),
                                  a, b, bias, activation, residual)
        return self._run(a, b, bias, activation, residual)

    def _torch_call(self, a, b, bias, activation: str, residual) -> torch.Tensor:
        """A call under forward-mode AD or a torch.func transform (gemmtune.autograd.transformed):
        checked as any call, then run as torch's own ops, which carry the tangents (the cached
        kernel, reading the primal's memory, returned a result with none, without a word)."""
        sizes = self.check(a, b)
        fused = bias is not None or residual is not None or activation != "none"
        if fused:
            if len(sizes) == 4:
                raise ValueError("a bmm (3-D operands) takes no fused epilogue (bias, activation, residual)")
            bind(sizes[0], sizes[1], self.torch_dtype, a.device, bias=bias, activation=activation, residual=residual)
        return torch_product(a, b, bias, activation, residual)

    def _run(self, a, b, bias=None, activation: str = "none", residual=None) -> torch.Tensor:
        """``__call__`` without autograd: the ops' kernels (torch_ops) call this."""
        if bias is not None or residual is not None or activation != "none":
            return self._call_fused(a, b, bias, activation, residual)
        try:
            key = (a.shape, b.shape, a.dtype, b.dtype, a.device, b.device, a.is_neg(), b.is_neg())
        except AttributeError:  # not tensors: the slow path says which
            key = None
        run = self._fast.get(key)
        if run is not None:
            try:  # (free unless it raises: the hot path pays no check)
                return run(a, b)
            except RuntimeError:
                # The key has no layout: a sparse operand of a shape first seen dense arrives here,
                # and raised from the launcher ("Cannot access data pointer of Tensor that doesn't
                # have storage"). check_operands names it.
                check_operands(a, b)
                raise
        return self._first_sight(a, b, key)

    def _call_fused(self, a, b, bias, activation, residual) -> torch.Tensor:
        try:
            key = (a.shape, b.shape, a.dtype, b.dtype, a.device, b.device, a.is_neg(), b.is_neg(), activation,
                   None if bias is None else (bias.shape, bias.dtype, bias.device, bias.is_neg()),
                   None if residual is None else (residual.shape, residual.dtype, residual.device, residual.is_neg()))
            run = self._fast_fused.get(key)
        except (AttributeError, TypeError):  # not tensors, an unhashable activation: the slow path says
            key, run = None, None
        if run is not None:
            try:
                return run(a, b, bias, residual)
            except RuntimeError:  # a sparse operand (see _run), bias or residual: the checks name it
                check_operands(a, b)
                bind(a.shape[0], b.shape[1], self.torch_dtype, a.device, bias=bias, activation=activation,
                     residual=residual)
                raise
        return self._first_sight(a, b, key, fused=True, bias=bias, activation=activation, residual=residual)

    def check(self, a, b) -> tuple[int, ...]:
        """Validate operands, raising TypeError/ValueError naming what is wrong; return (M, N, K),
        or (batch, M, N, K) for 3-D operands (a bmm; the static dims are each matrix's)."""
        check_operands(a, b)
        if a.dtype != self.torch_dtype:
            raise TypeError(f"dtype: this dispatcher multiplies {self.torch_dtype}, got {a.dtype}")
        m, k = a.shape[-2:]
        n = b.shape[-1]
        for name, got in (("m", m), ("n", n), ("k", k)):
            want = self.dims[name]
            if want is not None and got != want:
                raise ValueError(f"{name}: this dispatcher has static {name.upper()}={want}, got "
                                 f"{name.upper()}={got} (a is {tuple(a.shape)}, b is {tuple(b.shape)})")
        dev = a.device.type
        if dev not in ("cuda", "cpu"):
            raise ValueError(f"device: gemmtune runs on CUDA (or the CPU), not {a.device}")
        return (a.shape[0], m, n, k) if a.dim() == 3 else (m, n, k)

    def _first_sight(self, a, b, key, *, fused: bool = False, bias=None, activation: str = "none",
                     residual=None) -> torch.Tensor:
        sizes = self.check(a, b)
        if len(sizes) == 4:
            if fused:
                raise ValueError("a bmm (3-D operands) takes no fused epilogue (bias, activation, residual)")
            return self._first_sight_bmm(a, b, key, sizes)
        m, n, k = sizes
        epilogue = (bind(m, n, self.torch_dtype, a.device, bias=bias, activation=activation, residual=residual)
                    if fused else None)
        if _pkg().capturing(a):
            return self._in_capture(a, b, m, n, k, epilogue)
        cache = self._fast_fused if fused else self._fast
        with self._lock:
            run = cache.get(key)
            if run is None:
                decision = self._decision_for(a, b, (m, n, k))
                choice = decision.choice
                if epilogue is not None and epilogue.bias is not None and self.table is not None:
                    choice = self._addmm_choice(m, n, k, a, b, choice)
                run = self._make_run(choice, m, n, k, a.device, a, b, epilogue)
                cache[key] = run
        return run(a, b, bias, residual) if fused else run(a, b)

    def _first_sight_bmm(self, a, b, key, sizes: tuple[int, int, int, int]) -> torch.Tensor:
        """A bmm shape's first call: decided (and verified) once per (batch, M, N, K), as mm's."""
        batch, m, n, k = sizes
        if _pkg().capturing(a):
            self._warn_capture(f"bmm batch={batch}, M={m}, N={n}, K={k}", "torch.bmm")
            return torch.bmm(a, b)
        with self._lock:
            run = self._fast.get(key)
            if run is None:
                decision = self._decision_for(a, b, sizes)
                run = self._make_run(decision.choice, m, n, k, a.device, a, b, batch=batch)
                self._fast[key] = run
        return run(a, b)

    def _decision_for(self, a, b, sizes: tuple) -> Decision:
        """The decision a first call of ``sizes`` builds its closure from (under ``self._lock``):
        the one made, else a new one (also for a loaded one to verify again). A decision whose
        kernel these operands' device cannot run (decided on a GPU or in the interpreter, called
        on a CPU without it) is kept for the device it was made on, and this call gets its own:
        before, it launched Triton on CPU tensors ("0 active drivers") where a new shape ran cuBLAS."""
        m, n, k = sizes[-3:]
        batch = sizes[0] if len(sizes) == 4 else None
        decision = self._decisions.get(sizes)
        misfit = decision is not None and decision.source != "empty" and self._runnable(
            decision.choice, Problem.from_tensors(a, b), a.device) is not None
        if misfit and decision.verified:
            self.n_decisions += 1
            return self._decide(a, b, m, n, k, batch=batch)
        if decision is None or misfit or (self.verify and not decision.verified and decision.source != "empty"):
            decision = self._decide(a, b, m, n, k, previous=decision, batch=batch)
            self._decisions[sizes] = decision
            self.n_decisions += 1
        return decision

    def _warn_capture(self, what: str, runs: str) -> None:
        if not getattr(self, "_warned_capture", False):
            self._warned_capture = True
            warnings.warn(f"gemmtune: shape {what} first seen inside a CUDA-graph capture: this call runs "
                          f"{runs} (cuBLAS) and is captured as such; decide shapes before capturing "
                          "(Dispatcher.warmup, or one eager call)", RuntimeWarning, stacklevel=5)

    def _in_capture(self, a, b, m, n, k, epilogue) -> torch.Tensor:
        """A first sight inside a CUDA-graph capture: nothing may be verified, timed or
        synchronised there, so this call runs cuBLAS (the reference itself) and nothing is
        cached; the shape is decided at its next call outside a capture."""
        if not getattr(self, "_warned_capture", False):
            self._warned_capture = True
            warnings.warn(f"gemmtune: shape M={m}, N={n}, K={k} first seen inside a CUDA-graph capture: "
                          "this call runs torch.mm (cuBLAS) and is captured as such; decide shapes "
                          "before capturing (Dispatcher.warmup, or one eager call)", RuntimeWarning, stacklevel=4)
        out = torch.mm(a, b)
        return out if epilogue is None else apply_(out, epilogue)

    @property
    def all_aten(self) -> bool:
        """Whether every tuned hint chose cuBLAS (unpadded). Where no decision and no table
        entry names another kernel either (``gemmtune.nn.runs_as_torch``), the patched layers
        hand the GEMM to torch itself under torch.compile (Inductor sees an ordinary mm it can
        fuse into) instead of the opaque gemmtune::mm op, whose per-call Python would only add
        host time around the same cuBLAS call, and ``patch`` leaves such layers unconverted."""
        return all(h.choice == ATEN for h in self.hint_choices)

    @property
    def decisions(self) -> dict[tuple[int, ...], Decision]:
        """A copy of the decisions so far, by (M, N, K); a bmm's by (batch, M, N, K)."""
        return dict(self._decisions)

    def decision(self, m: int | None = None, n: int | None = None, k: int | None = None, *,
                 batch: int | None = None) -> Decision | None:
        """The decision for a size (static dims may be left out), or None if not decided yet;
        with ``batch``: that of a bmm call (3-D operands)."""
        sizes = self._sizes(m, n, k)
        return self._decisions.get(sizes if batch is None else (int(batch), *sizes))

    def expected_choice(self, m: int | None = None, n: int | None = None, k: int | None = None, *,
                        bias: bool = False) -> Choice | None:
        """The choice a call of this size will run, as far as it is known without running
        anything: the decision if made, else the table's exact entry (table mode), else the
        nearest hint's choice; None in benchmark mode before the decision (the first call times
        the hints' choices, so no one of them is expected). First-call checks may still turn a
        table or hint choice into cuBLAS. ``bias``: for a call with a bias, which runs the
        table's ``addmm`` winner for the size where the table has one (``_addmm_choice``): that
        winner (as decided, else the entry's first choice) before the mm rules above."""
        sizes = self._sizes(m, n, k)
        if bias and self.table is not None:
            if sizes in self._addmm:
                hit = self._addmm[sizes]
                if hit is not None:
                    return hit.choice
            else:
                entry = self._addmm_entry(*sizes)
                if entry:
                    return entry[0].choice
        done = self._decisions.get(sizes)
        if done is not None:
            return done.choice
        if self.mode == "benchmark":
            return None
        listed = self._listed(*sizes)
        return listed[0][0] if listed else None

    def _sizes(self, m, n, k) -> tuple[int, int, int]:
        given = {"m": m, "n": n, "k": k}
        out = []
        for d in DIMS:
            v = given[d] if given[d] is not None else self.dims[d]
            if v is None:
                raise ValueError(f"{d} is dynamic: give its size")
            if self.dims[d] is not None and v != self.dims[d]:
                # a call of that size raises (check): expected_choice named a kernel for it
                raise ValueError(f"{d}: this dispatcher has static {d.upper()}={self.dims[d]}, got {v!r}")
            out.append(int(v))
        return tuple(out)  # type: ignore[return-value]

    def warmup(self, device: str | torch.device | None = None, *, epilogues: Sequence[Epilogue | str] = (),
               batch: Sequence[int] | None = None, **sizes: Sequence[int]) -> None:
        """Decide shapes ahead of time (e.g. before CUDA-graph capture) on random inputs.

        ``epilogues``: also build the cached closures of calls with these epilogues (e.g.
        ``["bias"]`` for a Linear with a bias): a closure's first call prepares its launch,
        which synchronizes and so cannot happen inside a capture. The prepared launch fits
        a contiguous bias and residual; others take Triton's ordinary launch.

        ``batch``: the batch sizes of bmm calls (3-D operands) to decide; None: the batch a
        ``compile_bmm`` dispatcher was tuned at (``self.batch``), 2-D calls for any other; ``()``:
        2-D calls. Before, warmup made 2-D operands whatever the dispatcher, so a bmm dispatcher's
        warmup (and ``save``'s, which bundles the kernels it launches) decided none of its shapes.

        Example: ``mm.warmup(m=[1, 2, 4, 8, 16], epilogues=["bias"])`` (static dims are filled in).
        """
        unknown = set(sizes) - set(self.dynamic)
        if unknown:
            raise ValueError(f"warmup takes the dynamic dims {self.dynamic}, not {sorted(unknown)}")
        if batch is None:
            batches = [self.batch] if self.batch is not None else []
        else:
            try:
                batches = None if isinstance(batch, (str, bytes)) else list(batch)
            except TypeError:  # a bare int
                batches = None
            if batches is None or not all(_size_ok(v) for v in batches):
                raise ValueError(f"warmup: batch must be a list of int sizes >= 0 (or None), got {batch!r}")
        if isinstance(epilogues, (str, Epilogue)):
            # One epilogue given bare (``epilogues="bias"``): iterated, a string raised "bad epilogue
            # id 'b'" and an Epilogue "'Epilogue' object is not iterable", neither naming the mistake.
            epilogues = [epilogues]
        specs = [Epilogue.parse(e) if isinstance(e, str) else e for e in epilogues]
        for e in specs:
            if not isinstance(e, Epilogue):
                raise TypeError(f"warmup: epilogues must be Epilogue objects or ids such as 'bias+relu', "
                                f"not {type(e).__name__}")
            if e.scale != "none":  # (warmed as a plain call before: a dispatcher runs no scaled_mm)
                raise ValueError(f"warmup: a dispatcher serves no scaled_mm, so no {e.id!r} epilogue; "
                                 "scales are gemmtune.scaled_mm's")
        if batches and specs:
            raise ValueError("warmup: a bmm (batch given, or a compile_bmm dispatcher) takes no fused epilogue; "
                             "pass batch=() to warm 2-D calls with epilogues")
        dev = torch.device(device) if device is not None else torch.device(
            "cuda" if torch.cuda.is_available() else "cpu")
        for d, given in sizes.items():  # else torch.randn raised ("negative dimension", "invalid combination")
            try:
                vs = None if isinstance(given, (str, bytes)) else list(given)
            except TypeError:  # not iterable: a bare int
                vs = None
            if vs is None or not all(_size_ok(v) for v in vs):
                raise ValueError(f"warmup: {d} must be a list of int sizes >= 0, got {given!r}")
            sizes[d] = vs  # (an iterator is read once)
        lists = [list(sizes.get(d, self.hints[d])) if d in self.dynamic else [self.dims[d]] for d in DIMS]
        for m, n, k in itertools.product(*lists):
            if batches:
                for bt in batches:
                    self(_random_operand(m, k, self.layout_a, self.torch_dtype, dev, bt),
                         _random_operand(k, n, self.layout_b, self.torch_dtype, dev, bt))
                continue
            a = _random_operand(m, k, self.layout_a, self.torch_dtype, dev)
            b = _random_operand(k, n, self.layout_b, self.torch_dtype, dev)
            self(a, b)
            for e in specs:
                self(a, b, bias=torch.randn(n, dtype=self.torch_dtype, device=dev) if e.bias else None,
                     activation=e.activation,
                     residual=torch.randn(m, n, dtype=self.torch_dtype, device=dev) if e.residual else None)

    def __repr__(self) -> str:
        dims = ", ".join(f"{d}={self.dims[d]}" if self.dims[d] is not None else f"{d}=dyn{list(self.hints[d])}"
                         for d in DIMS)
        return (f"Dispatcher({dims}, dtype={self.dtype}, mode={self.mode}, "
                f"{len(self.hint_choices)} hint kernels, {len(self._decisions)} decisions)")

    def __deepcopy__(self, memo):
        return self  # shared, like a compiled kernel: deepcopy(model) keeps its dispatchers

    def __reduce__(self):
        raise TypeError("a Dispatcher cannot be pickled (it holds a lock and launch closures); "
                        "use dispatcher.save(path) and gemmtune.load(path)")

    def to_json(self) -> dict:
        def sizes(s):
            if s is None:
                return None
            return dict(zip(DIMS, s)) if len(s) == 3 else {"batch": s[0], **dict(zip(DIMS, s[1:]))}

        with self._lock:
            decisions = sorted(self._decisions.items(), key=lambda kv: (len(kv[0]), kv[0]))
        # Verified here, on another GPU or software than the provenance names (a dispatcher loaded
        # from one): the file would claim them verified on the provenance's machine. Written as
        # unverified, they are verified again where the file is next loaded.
        here = not provenance_mismatches(self.provenance)
        return {
            "format": FORMAT,
            "schema_version": SCHEMA_VERSION,
            "provenance": dict(sorted(self.provenance.items())),
            "dims": self.dims,
            "dtype": self.dtype,
            "layout_a": self.layout_a,
            "layout_b": self.layout_b,
            "mode": self.mode,
            "verify": self.verify,
            **({"batch": self.batch} if self.batch is not None else {}),
            "hints": {d: list(v) for d, v in self.hints.items()},
            "hint_choices": [{"sizes": sizes(h.sizes), "choice": h.choice.id,
                              **({"device_ms": h.device_ms} if h.device_ms is not None else {})}
                             for h in self.hint_choices],
            "decisions": [{"sizes": sizes(s), "choice": d.choice.id, "source": d.source,
                           "hint": sizes(d.hint), "verified": d.verified and here,
                           "times_ms": dict(d.times_ms) if d.times_ms else None, "reason": d.reason}
                          for s, d in decisions],
            "table": self.table.to_json() if self.table is not None else None,
        }

    def save(self, path: str | os.PathLike, *, binaries: bool = True) -> Path:
        """Write the dispatcher as JSON (atomically) and, on a GPU with ``binaries``, its compiled
        kernels in ``<path>.kernels/``. Saving the binaries first launches the hint shapes
        once (``warmup()``), so their kernels are among them; the decisions that adds are
        ordinary, verified ones."""
        path = Path(path)
        doc = self.to_json()
        if binaries and torch.cuda.is_available() and not _pkg().interpreter_enabled():
            from .. import binaries as bins

            self.warmup()
            doc = self.to_json()  # with the hint decisions warmup made
            kdir = path.with_name(path.name + ".kernels")
            names = bins.bundle(kdir)
            doc["binaries"] = {"dir": kdir.name, "kernels": names}
        return write_atomic(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
