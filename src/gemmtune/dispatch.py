"""Dynamic-shape dispatch: one tuned kernel per size hint, served for any runtime size.

``compile_mm`` tunes one winner per hint combination of the dynamic dims (e.g. M in
64, 256, 4096 with N and K static) and returns a ``Dispatcher``: a callable
``mm(a, b)`` that picks a kernel the first time it sees a shape, remembers the
decision, and afterwards costs one dict lookup, the output allocation and the launch.

Modes (how a new shape is decided):

* ``similarity``: the hint kernel nearest in L1 distance of log2 (M, N, K)
  (``Problem.log2_shape``: dims of 0 and 1 both map to 0). **Ties** go to the larger
  hint: the one with the larger product M*N*K (its log2 sum), then the larger
  (M, N, K) in lexicographic order. Rounding up is what power-of-two bucketing
  does, and it picks the kernel tuned for the larger, costlier shape, whose loss
  would matter more. Distances are rounded to 1e-9 first, so float noise never
  decides a tie (log2(96/64) and log2(144/96) are equal). No timing at run time.
* ``benchmark``: the first call of a shape times every distinct hint kernel on
  fresh random inputs of that shape (the ``timer`` object; ``default_timer()``:
  CUDA graphs on a GPU, wall clock in the interpreter), verifying each against
  the fp64 reference, and keeps the fastest correct one (ties: similarity order).
  Candidates are timed in similarity order, nearest first.
* ``table``: the exact ``LookupTable`` entry for the shape (by ``Problem.key`` of the
  declared layouts), its fastest valid choice first; similarity otherwise.

Correctness: with ``verify=True`` (default) a shape's first decision runs the chosen
kernel once on fresh random inputs of that shape and layout and checks it against
the fp64 reference (``gemmtune.verify``); a kernel that fails is skipped for the
next candidate, and cuBLAS (``aten``) is the last resort. So a first call changes
speed, never results: the output it returns comes from a verified kernel.
A kernel a family cannot run at a shape (e.g. ``decompose_k:s16`` when the
runtime K is not a multiple of 16) is skipped the same way.

Fused epilogues: ``mm(a, b, bias=..., activation=..., residual=...)`` computes
``act(a @ b + bias) + residual`` in one launch of the shape's kernel (gemmtune.epilogue).
A shape is decided (and verified) once, on the plain product, whatever epilogues its
calls carry; each combination of epilogue parts gets its own cached closure. Calls with a
bias (``gemmtune.nn.Linear``'s) run the table's ``addmm:`` winner for the shape instead when
the dispatcher has a table with one (its first choice that runs and verifies with a bias;
``addmm_decisions``), and the shape's own kernel with the bias fused otherwise.

Batched products: a call with two 3-D operands (batch, M, K) @ (batch, K, N) is a bmm
(``Problem`` op 'bmm'): decided like an mm on a cache miss, by (batch, M, N, K) and the
per-matrix static dims: the table's exact ``bmm:`` entry (mode 'table'), then the hint
kernels that can run it (triton_mm's tiles; split-K and the others refuse a bmm), each
verified, cuBLAS (torch.bmm) last. ``compile_bmm`` tunes the hint kernels as bmm problems;
``lookup(table, dtype=...)`` builds one from a table alone, with no tuning. A bmm takes no epilogue.

Threads: decisions are cached per shape; a cached call reads a dict without a lock;
deciding a new shape takes the dispatcher's lock, so each shape is decided once.
The Triton CPU interpreter is not thread-safe (concurrent launches returned wrong
results and crashed with triton 3.9), so in interpreter mode every launch from a
dispatcher is serialized by one process-wide lock; on a GPU there is no lock.
Split-K kernels share one workspace per dispatcher: do not launch them
concurrently on different CUDA streams (see ``SplitKWorkspace``).

CUDA graphs: a first sight verifies (and in ``benchmark`` mode times), which cannot
run inside a graph capture; decide shapes before capturing with ``warmup`` (or one eager
call). A shape first seen inside a capture is not decided there: that call runs cuBLAS
(torch.mm / torch.addmm and the epilogue as torch ops, correct with no check), with a
one-time warning, and the shape is decided at its next call outside a capture.

Save and load: ``Dispatcher.save(path)`` writes JSON (hints, hint choices, decisions,
table, provenance) and, on a GPU, the compiled kernel binaries next to it in
``<path>.kernels/``: every variant of gemmtune's kernels this process launched, after
launching the hint shapes once so their kernels are in (``gemmtune.binaries``).
``load(path)`` restores both in a new process: zero tuning, and the kernels are
loaded from the restored binaries on first launch instead of compiled. Binaries are
a cache: on another GPU or Triton version they do not match and the kernels compile
on first launch (load warns about the provenance), never run wrong code.

Example (skipped in doctests: it tunes on a GPU, where the CPU interpreter would take hours)::

    >>> import torch, gemmtune
    >>> mm = gemmtune.compile_mm(n=4096, k=4096, dtype="bf16",
    ...                          hints={"m": [64, 256, 4096]})          # doctest: +SKIP
    >>> a = torch.randn(100, 4096, device="cuda", dtype=torch.bfloat16)   # doctest: +SKIP
    >>> b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)  # doctest: +SKIP
    >>> c = mm(a, b)                            # decided once for M=100  # doctest: +SKIP
    >>> mm.save("mm.json"); mm2 = gemmtune.load("mm.json")             # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import math
import os
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import torch

from . import kernels
from .jsonio import read_json
from .api import interpreter_enabled
from .configs import AtenConfig, Choice
from .epilogue import Epilogue, EpilogueArgs, apply_, bind
from .kernels.splitk import SplitKWorkspace
from .problem import DTYPES, LAYOUTS, Problem, check_operands, dtype_name
from .provenance import DISPATCH, Provenance
from .table import LookupTable, TableChoice
from .table import from_json as table_from_json
from .table import provenance as make_provenance
from .verify import check as verify_check

DIMS = ("m", "n", "k")
MODES = ("similarity", "benchmark", "table")
DEFAULT_HINTS = (64, 256, 4096)
SCHEMA_VERSION = 1
FORMAT = "gemmtune.dispatcher"
ATEN = Choice("aten", AtenConfig())
# Distances are rounded to this many decimals so that float noise never breaks a tie.
_TIE_DECIMALS = 9

# The Triton interpreter patches triton.language while a kernel runs: two threads
# interpreting at once corrupt each other (wrong results, "y >= grid_dim[1]").
_INTERP_LOCK = threading.RLock()


class ProvenanceWarning(UserWarning):
    """A saved dispatcher was tuned on another GPU or with another triton/torch version."""


@dataclass(frozen=True)
class HintChoice:
    """The winner tuned for one hint combination."""

    sizes: tuple[int, int, int]  # (M, N, K) of the hint problem
    choice: Choice
    device_ms: float | None = None


@dataclass(frozen=True)
class Decision:
    """What a shape runs and why. ``source``: similarity | benchmark | table | fallback | empty."""

    choice: Choice
    source: str
    hint: tuple[int, int, int] | None = None
    verified: bool = False
    times_ms: Mapping[str, float] | None = None  # benchmark mode: choice id -> device ms
    reason: str = ""


# ----------------------------------------------------------------------------- similarity
def _log2(sizes: Sequence[int]) -> tuple[float, ...]:
    return tuple(math.log2(max(1, int(d))) for d in sizes)


def rank_hints(target: Sequence[int], hints: Sequence[Sequence[int]]) -> list[int]:
    """Indices of ``hints`` ((M, N, K) each), nearest to ``target`` first.

    Distance: L1 over log2 (M, N, K), dims of 0 or 1 counting as log2 1 = 0.
    Ties: the larger hint (larger log2 M*N*K), then the larger (M, N, K) tuple.

    Example::

        >>> rank_hints((128, 64, 64), [(64, 64, 64), (256, 64, 64)])   # a tie: larger wins
        [1, 0]
    """
    t = _log2(target)

    def key(i: int):
        h = hints[i]
        lh = _log2(h)
        dist = round(sum(abs(x - y) for x, y in zip(t, lh)), _TIE_DECIMALS)
        return (dist, -round(sum(lh), _TIE_DECIMALS), tuple(-int(x) for x in h))

    return sorted(range(len(hints)), key=key)


# ----------------------------------------------------------------------------- helpers
def _current_provenance(produced_by: str) -> dict:
    return Provenance.current(produced_by).to_dict()


def provenance_mismatches(saved: Mapping[str, str], current: Mapping[str, str] | None = None) -> list[str]:
    """Why a dispatcher saved under ``saved`` may not be valid now (empty when it is).

    Checked (provenance.DISPATCH): the GPU (name and capability; one CPU is one device,
    interpreter or not) and the triton and torch major.minor versions.
    """
    cur = current or _current_provenance("tuned")
    out = []
    for what in Provenance.from_dict(saved).mismatches(Provenance.from_dict(cur), DISPATCH):
        if what == "device":
            out.append(f"tuned on {saved.get('device_name')} (capability {saved.get('capability')}), "
                       f"running on {cur['device_name']} (capability {cur['capability']})")
        else:
            out.append(f"tuned with {what} {saved.get(what)}, running {what} {cur[what]}")
    return out


@contextlib.contextmanager
def _interp_guard(on: bool):
    if on:
        with _INTERP_LOCK:
            yield
    else:
        yield


def _locked(fn: Callable) -> Callable:
    def run(*args, **kwargs):
        with _INTERP_LOCK:
            return fn(*args, **kwargs)
    return run


def _random_operand(rows: int, cols: int, layout: str, dtype: torch.dtype, device) -> torch.Tensor:
    if layout == "col":
        return torch.randn(cols, rows, dtype=dtype, device=device).t()
    if layout == "strided":
        return torch.randn(rows, 2 * cols, dtype=dtype, device=device)[:, ::2]
    return torch.randn(rows, cols, dtype=dtype, device=device)


def capturing(t: torch.Tensor) -> bool:
    """Whether ``t``'s device is capturing a CUDA graph on the current stream."""
    return t.is_cuda and torch.cuda.is_current_stream_capturing()


# ----------------------------------------------------------------------------- dispatcher
class Dispatcher:
    """``mm(a, b)`` for any size of the dynamic dims; build one with ``compile_mm`` or ``load``.

    ``dims`` maps 'm', 'n', 'k' to a static size or None (dynamic). ``hint_choices``
    holds one tuned winner per hint combination. Decisions made so far are in
    ``decisions``; ``n_decisions`` counts the shapes decided in this process.

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
                 decisions: Mapping[tuple[int, int, int], Decision] | None = None):
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
        self.mode = mode
        self.table = table
        self.timer = timer
        self.verify = verify
        self.layout_a, self.layout_b = layout_a, layout_b
        self.provenance = dict(provenance) if provenance else _current_provenance("by-hand")
        self.n_decisions = 0
        self._decisions: dict[tuple[int, int, int], Decision] = dict(decisions or {})
        # Hot-path cache: (a.shape, b.shape, a.dtype, b.dtype, a.get_device(), b.get_device())
        # -> run(a, b). Only keys that passed validation get in, so a hit needs no checks.
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

    # ------------------------------------------------------------------ hot path
    def __call__(self, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None,
                 activation: str = "none", residual: torch.Tensor | None = None) -> torch.Tensor:
        """``a @ b``; the first call of a shape decides (and verifies), later ones only launch.

        With ``bias`` (N,), ``activation`` or ``residual`` (M, N): ``act(a @ b + bias) + residual``
        in one launch of the decided kernel, the epilogue fused into its store
        (gemmtune.epilogue). The decision is the shape's, whatever the epilogue: verification
        checks the plain product."""
        if bias is not None or residual is not None or activation != "none":
            return self._call_fused(a, b, bias, activation, residual)
        try:
            key = (a.shape, b.shape, a.dtype, b.dtype, a.get_device(), b.get_device())
        except AttributeError:  # not tensors: the slow path says which
            key = None
        run = self._fast.get(key)
        if run is not None:
            return run(a, b)
        return self._first_sight(a, b, key)

    def _call_fused(self, a, b, bias, activation, residual) -> torch.Tensor:
        try:
            key = (a.shape, b.shape, a.dtype, b.dtype, a.get_device(), b.get_device(), activation,
                   None if bias is None else (bias.shape, bias.dtype, bias.get_device()),
                   None if residual is None else (residual.shape, residual.dtype, residual.get_device()))
            run = self._fast_fused.get(key)
        except (AttributeError, TypeError):  # not tensors, an unhashable activation: the slow path says
            key, run = None, None
        if run is not None:
            return run(a, b, bias, residual)
        return self._first_sight(a, b, key, fused=True, bias=bias, activation=activation, residual=residual)

    # ------------------------------------------------------------------ first sight
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
        if capturing(a):
            return self._in_capture(a, b, m, n, k, epilogue)
        cache = self._fast_fused if fused else self._fast
        with self._lock:
            run = cache.get(key)
            if run is None:
                decision = self._decisions.get((m, n, k))
                if decision is None or (self.verify and not decision.verified
                                        and decision.source != "empty"):
                    decision = self._decide(a, b, m, n, k, previous=decision)
                    self._decisions[(m, n, k)] = decision
                    self.n_decisions += 1
                choice = decision.choice
                if epilogue is not None and epilogue.bias is not None and self.table is not None:
                    choice = self._addmm_choice(m, n, k, a, b, choice)
                run = self._make_run(choice, m, n, k, a.device, a, b, epilogue)
                cache[key] = run
        return run(a, b, bias, residual) if fused else run(a, b)

    def _first_sight_bmm(self, a, b, key, sizes: tuple[int, int, int, int]) -> torch.Tensor:
        """A bmm shape's first call: decided (and verified) once per (batch, M, N, K), as mm's."""
        batch, m, n, k = sizes
        if capturing(a):
            self._warn_capture(f"bmm batch={batch}, M={m}, N={n}, K={k}", "torch.bmm")
            return torch.bmm(a, b)
        with self._lock:
            run = self._fast.get(key)
            if run is None:
                decision = self._decisions.get(sizes)
                if decision is None or (self.verify and not decision.verified and decision.source != "empty"):
                    decision = self._decide(a, b, m, n, k, previous=decision, batch=batch)
                    self._decisions[sizes] = decision
                    self.n_decisions += 1
                run = self._make_run(decision.choice, m, n, k, a.device, a, b, batch=batch)
                self._fast[key] = run
        return run(a, b)

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

    def _interp(self, device: torch.device) -> bool:
        return device.type == "cpu" and interpreter_enabled()

    def _runnable(self, choice: Choice, problem: Problem, device: torch.device) -> str | None:
        """Why ``choice`` cannot run ``problem`` here (None when it can)."""
        if choice.family in kernels.TRITON_FAMILIES and device.type == "cpu" and not interpreter_enabled():
            return "Triton kernels need CUDA (or TRITON_INTERPRET=1) and these tensors are on the CPU"
        try:
            kernels.get(choice.family).validate(problem.padded() if choice.pad else problem, choice.config)
        except (ValueError, TypeError) as e:
            return str(e)
        return None

    def _verify(self, choice: Choice, problem: Problem, device: torch.device) -> str | None:
        """Run ``choice`` on fresh random inputs of ``problem`` (an addmm problem's with a bias);
        the reason it is wrong, or None."""
        from .bench.measure import epilogue_for, make_bias, make_inputs

        if choice == ATEN:
            return None  # torch.mm (torch.addmm) is the reference itself
        try:
            ((a, b),) = make_inputs(problem, str(device), 1, seed=0)
            bias = make_bias(problem, str(device), seed=0)
            out = torch.full(problem.out_shape, math.nan, dtype=problem.torch_out_dtype, device=device)
            kernels.run_choice(choice, a, b, out, allow_tf32=problem.allow_tf32, workspace=self._workspace,
                               epilogue=epilogue_for(bias))
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            res = verify_check(out, a, b, problem, bias)
        except Exception as e:  # failures are data: try the next candidate
            return f"{type(e).__name__}: {e}"[:500]
        return None if res.ok else res.reason

    def _addmm_choice(self, m: int, n: int, k: int, a, b, mm_choice: Choice) -> Choice:
        """The kernel of a call with a bias: the table's addmm winner for the shape (the first
        of its entry's choices that runs and verifies here, bias included), else ``mm_choice``
        (the shape's decision, the bias fused in its epilogue). Decided once per shape, at its
        first call with a bias: never on the cached path."""
        if (m, n, k) not in self._addmm:
            self._addmm[(m, n, k)] = self._decide_addmm(m, n, k, a, b)
        hit = self._addmm[(m, n, k)]
        return mm_choice if hit is None else hit.choice

    def _decide_addmm(self, m: int, n: int, k: int, a, b) -> Decision | None:
        if 0 in (m, n, k):
            return None
        declared = Problem.from_sizes(m, n, k, self.dtype, layout_a=self.layout_a, layout_b=self.layout_b,
                                      op="addmm")
        entry = self.table.entries.get(declared.key, []) if self.table is not None else []
        if not entry:
            return None
        problem = Problem.from_tensors(a, b, op="addmm")  # the layouts and alignment actually seen
        rejected = []
        with _interp_guard(self._interp(a.device)), (torch.cuda.device(a.device) if a.device.type == "cuda"
                                                     else contextlib.nullcontext()):
            for tc in entry:
                why = self._runnable(tc.choice, problem, a.device)
                if why is None and self.verify:
                    why = self._verify(tc.choice, problem, a.device)
                if why is None:
                    return Decision(tc.choice, "table", verified=self.verify, reason="; ".join(rejected))
                rejected.append(f"{tc.choice.id}: {why}")
        warnings.warn(f"gemmtune: no choice of the table's {declared.key} entry ran correctly here "
                      f"({'; '.join(rejected)[:500]}); calls with a bias use the shape's mm kernel",
                      RuntimeWarning, stacklevel=5)
        return None

    @property
    def addmm_decisions(self) -> dict[tuple[int, int, int], Decision]:
        """The table's addmm winners that calls with a bias run, by (M, N, K), decided so far."""
        return {s: d for s, d in self._addmm.items() if d is not None}

    def _ranked(self, m: int, n: int, k: int) -> list[HintChoice]:
        """The hints' choices, nearest hint first. A choice compiled for its exact sizes
        (a family with ``PER_SHAPE``: triton_static) serves only its own hint's shape: on any
        other it would compile again at the first call."""
        return [self.hint_choices[i] for i in rank_hints((m, n, k), self._hint_sizes)
                if self._hint_sizes[i] == (m, n, k)
                or not getattr(kernels.get(self.hint_choices[i].choice.family), "PER_SHAPE", False)]

    def _decide(self, a, b, m, n, k, previous: Decision | None = None, batch: int | None = None) -> Decision:
        device = a.device
        if m == 0 or n == 0 or k == 0 or batch == 0:
            return Decision(ATEN, "empty", verified=True, reason="empty product: no kernel runs")
        problem = Problem.from_tensors(a, b)  # the layouts and alignment actually seen (3-D: a bmm)
        # Candidates, best first: (choice, source, hint).
        cands: list[tuple[Choice, str, tuple | None]] = []
        if previous is not None:
            cands.append((previous.choice, previous.source, previous.hint))
        if self.mode == "table" and self.table is not None:
            exact = self.table.entries.get(self._declared(m, n, k, batch).key, [])
            cands += [(tc.choice, "table", None) for tc in exact]
        cands += [(h.choice, "similarity", h.sizes) for h in self._ranked(m, n, k)]
        rejected: list[str] = []
        seen, runnable = set(), []
        for c, src, hint in cands:
            if c.id in seen:
                continue
            seen.add(c.id)
            why = self._runnable(c, problem, device)
            if why is None:
                runnable.append((c, src, hint))
            else:
                rejected.append(f"{c.id}: {why}")
        with _interp_guard(self._interp(device)), (torch.cuda.device(device) if device.type == "cuda"
                                                   else contextlib.nullcontext()):
            # A loaded decision is re-verified, not re-timed: loading never benchmarks anew.
            if self.mode == "benchmark" and previous is None:
                return self._benchmark(problem, device, runnable, rejected)
            for c, src, hint in runnable:
                why = self._verify(c, problem, device) if self.verify else None
                if why is None:
                    return Decision(c, src, hint, verified=self.verify, reason="; ".join(rejected))
                rejected.append(f"{c.id}: {why}")
        return Decision(ATEN, "fallback", verified=True,
                        reason="no hint kernel ran correctly: " + "; ".join(rejected))

    def _benchmark(self, problem: Problem, device: torch.device, runnable, rejected) -> Decision:
        from .bench.measure import WorkerState, measure
        from .bench.timing import default_timer

        if self.timer is None:
            self.timer = default_timer()
        state = WorkerState(timer=self.timer, device=device.type)
        times: dict[str, float] = {}
        best = None
        try:
            for c, src, hint in runnable:
                res = measure(problem, c, self.timer, state=state)
                ms = res.device_ms
                if res.ok and ms is not None and math.isfinite(ms):
                    times[c.id] = float(ms)
                    if best is None or ms < times[best[0].id]:
                        best = (c, hint)
                else:
                    rejected.append(f"{c.id}: {res.status}: {res.reason}"[:500])
        finally:
            state.release()  # free the inputs now
        if best is None:
            return Decision(ATEN, "fallback", verified=True, times_ms=times,
                            reason="no hint kernel ran correctly: " + "; ".join(rejected))
        return Decision(best[0], "benchmark", best[1], verified=True, times_ms=times,
                        reason="; ".join(rejected))

    def _declared(self, m: int, n: int, k: int, batch: int | None = None) -> Problem:
        """The problem with the declared layouts (a bmm's: each matrix's, none broadcast)."""
        if batch is not None:
            return Problem.from_sizes(m, n, k, self.dtype, layout_a=self.layout_a, layout_b=self.layout_b,
                                      op="bmm", batch=batch)
        return Problem.from_sizes(m, n, k, self.dtype, layout_a=self.layout_a, layout_b=self.layout_b)

    def _make_run(self, choice: Choice, m: int, n: int, k: int, device: torch.device,
                  a: torch.Tensor | None = None, b: torch.Tensor | None = None,
                  epilogue: EpilogueArgs | None = None, batch: int | None = None) -> Callable:
        """The prebuilt closure a cached call runs: allocate the output, launch.

        On a GPU, triton_mm and split-K launch through a prepared launcher
        (``kernels.tiled.prepare_direct``) that skips Triton's per-call argument
        binding, while the operands keep the strides and alignment of the first call
        (``a``, ``b``); anything else takes the ordinary launch. With an ``epilogue``
        (the first call's) the closure is ``run(a, b, bias, residual)``."""
        if epilogue is not None:
            return self._make_fused_run(choice, m, n, k, device, a, b, epilogue)
        shape, dt, empty = (m, n) if batch is None else (batch, m, n), self.torch_dtype, torch.empty
        if m == 0 or n == 0 or batch == 0:
            return lambda a, b: empty(shape, dtype=dt, device=device)
        if k == 0:
            return lambda a, b: torch.zeros(shape, dtype=dt, device=device)
        if choice == ATEN:
            return torch.mm if batch is None else torch.bmm  # allocates its own output; nothing else
        if choice.pad:
            launch = functools.partial(kernels.run_choice, choice, allow_tf32=False,
                                       workspace=self._workspace)
        else:
            launch = functools.partial(kernels.get(choice.family).run, cfg=choice.config,
                                       allow_tf32=False, workspace=self._workspace)
        if self._interp(device) and choice.family in kernels.TRITON_FAMILIES:
            launch = _locked(launch)
        prepared = self._prepare(choice, a, b, shape) if a is not None and device.type == "cuda" else None
        if prepared is not None:
            matches, fast = prepared

            def run(a, b):
                out = empty(shape, dtype=dt, device=device)
                if matches(a, b):
                    fast(a, b, out)
                else:
                    launch(a, b, out)
                return out
            return run

        def run(a, b):
            out = empty(shape, dtype=dt, device=device)
            launch(a, b, out)
            return out
        return run

    def _make_fused_run(self, choice: Choice, m: int, n: int, k: int, device: torch.device,
                        a: torch.Tensor | None, b: torch.Tensor | None, epilogue: EpilogueArgs) -> Callable:
        """``_make_run`` for calls with an epilogue: ``run(a, b, bias, residual)``, whose parts
        (``epilogue.spec``) are fixed by the cache key; every family, aten included, fuses it."""
        shape, dt, empty, spec = (m, n), self.torch_dtype, torch.empty, epilogue.spec
        if m == 0 or n == 0:
            return lambda a, b, bias, residual: empty(shape, dtype=dt, device=device)
        if k == 0:  # act(0 + bias) + residual: no product to fuse into
            return lambda a, b, bias, residual: apply_(torch.zeros(shape, dtype=dt, device=device),
                                                       EpilogueArgs(spec, bias, residual))
        if choice.pad:
            launch = functools.partial(kernels.run_choice, choice, allow_tf32=False, workspace=self._workspace)
        else:
            launch = functools.partial(kernels.get(choice.family).run, cfg=choice.config,
                                       allow_tf32=False, workspace=self._workspace)
        if self._interp(device) and choice.family in kernels.TRITON_FAMILIES:
            launch = _locked(launch)
        prepared = self._prepare(choice, a, b, shape, epilogue) if a is not None and device.type == "cuda" else None
        if prepared is not None:
            matches, fast = prepared

            def run(a, b, bias, residual):
                out = empty(shape, dtype=dt, device=device)
                e = EpilogueArgs(spec, bias, residual)
                if matches(a, b, epilogue=e):
                    fast(a, b, out, epilogue=e)
                else:
                    launch(a, b, out, epilogue=e)
                return out
            return run

        def run(a, b, bias, residual):
            out = empty(shape, dtype=dt, device=device)
            launch(a, b, out, epilogue=EpilogueArgs(spec, bias, residual))
            return out
        return run

    def _prepare(self, choice: Choice, a, b, shape, epilogue: EpilogueArgs | None = None):
        """(matches, launch) of a prepared launcher for ``choice`` at this problem, checked
        once against Triton's ordinary launch on these very operands; None when the family
        has none, or when the check fails (then the ordinary launch serves, and we say so).
        Both take the ``epilogue`` as a keyword."""
        if choice.pad:
            return None
        prep = kernels.get(choice.family).prepare  # every registered family has one (kernels.base)
        try:
            want = torch.empty(shape, dtype=self.torch_dtype, device=a.device)
            got = prep(a, b, want, choice.config, allow_tf32=False, workspace=self._workspace, epilogue=epilogue)
            if got is None:
                return None
            matches, fast = got
            out = torch.full(shape, math.nan, dtype=self.torch_dtype, device=a.device)
            fast(a, b, out, epilogue=epilogue)
            torch.cuda.synchronize(a.device)
            # Atomic reductions (splitk's and skinny's) add in a varying order.
            det = getattr(choice.config, "deterministic", True)
            same = torch.equal(out, want) if det else bool(torch.allclose(out.float(), want.float(),
                                                                             rtol=2e-2, atol=2e-2))
            if same and matches(a, b, epilogue=epilogue):
                return matches, fast
            reason = "its output differed from Triton's ordinary launch"
        except Exception as e:  # a launcher this triton does not support: the ordinary path serves
            reason = f"{type(e).__name__}: {e}"[:300]
        warnings.warn(f"gemmtune: prepared launch of {choice.id} not used ({reason}); "
                      "launching through Triton's ordinary path", RuntimeWarning, stacklevel=4)
        return None

    # ------------------------------------------------------------------ utilities
    @property
    def all_aten(self) -> bool:
        """Whether every tuned hint chose cuBLAS (unpadded): the patched layers then hand the
        GEMM to torch itself under torch.compile (Inductor sees an ordinary mm it can fuse
        into) instead of the opaque gemmtune::mm op, whose per-call Python would only add
        host time around the same cuBLAS call."""
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

    def _sizes(self, m, n, k) -> tuple[int, int, int]:
        given = {"m": m, "n": n, "k": k}
        out = []
        for d in DIMS:
            v = given[d] if given[d] is not None else self.dims[d]
            if v is None:
                raise ValueError(f"{d} is dynamic: give its size")
            out.append(int(v))
        return tuple(out)  # type: ignore[return-value]

    def warmup(self, device: str | torch.device | None = None, *, epilogues: Sequence[Epilogue | str] = (),
               **sizes: Sequence[int]) -> None:
        """Decide shapes ahead of time (e.g. before CUDA-graph capture) on random inputs.

        ``epilogues``: also build the cached closures of calls with these epilogues (e.g.
        ``["bias"]`` for a Linear with a bias): a closure's first call prepares its launch,
        which synchronizes and so cannot happen inside a capture. The prepared launch fits
        a contiguous bias and residual; others take Triton's ordinary launch.

        Example: ``mm.warmup(m=[1, 2, 4, 8, 16], epilogues=["bias"])`` (static dims are filled in).
        """
        unknown = set(sizes) - set(self.dynamic)
        if unknown:
            raise ValueError(f"warmup takes the dynamic dims {self.dynamic}, not {sorted(unknown)}")
        specs = [Epilogue.parse(e) if isinstance(e, str) else e for e in epilogues]
        dev = torch.device(device) if device is not None else torch.device(
            "cuda" if torch.cuda.is_available() else "cpu")
        lists = [list(sizes.get(d, self.hints[d])) if d in self.dynamic else [self.dims[d]] for d in DIMS]
        for m, n, k in itertools.product(*lists):
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

    # ------------------------------------------------------------------ save / load
    def to_json(self) -> dict:
        def sizes(s):
            if s is None:
                return None
            return dict(zip(DIMS, s)) if len(s) == 3 else {"batch": s[0], **dict(zip(DIMS, s[1:]))}

        with self._lock:
            decisions = sorted(self._decisions.items(), key=lambda kv: (len(kv[0]), kv[0]))
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
            "hints": {d: list(v) for d, v in self.hints.items()},
            "hint_choices": [{"sizes": sizes(h.sizes), "choice": h.choice.id,
                              **({"device_ms": h.device_ms} if h.device_ms is not None else {})}
                             for h in self.hint_choices],
            "decisions": [{"sizes": sizes(s), "choice": d.choice.id, "source": d.source,
                           "hint": sizes(d.hint), "verified": d.verified,
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
        if binaries and torch.cuda.is_available() and not interpreter_enabled():
            from . import binaries as bins

            self.warmup()
            doc = self.to_json()  # with the hint decisions warmup made
            kdir = path.with_name(path.name + ".kernels")
            names = bins.bundle(kdir)
            doc["binaries"] = {"dir": kdir.name, "kernels": names}
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, path)
        return path


def load(path: str | os.PathLike, *, timer=None, strict: bool = False) -> Dispatcher:
    """Restore a saved dispatcher: hints, hint choices, decisions, table; no tuning.

    Provenance is checked: another GPU (name or capability) or another triton or
    torch major.minor gives a ``ProvenanceWarning`` (``strict=True``: ValueError), and
    the saved decisions are then re-verified on their first call.

    Example::

        >>> mm = gemmtune.load("mm.json")    # doctest: +SKIP
    """
    path = Path(path)
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"{path}: not a saved gemmtune dispatcher (format != {FORMAT!r})")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path}: schema_version {doc.get('schema_version')!r}, expected {SCHEMA_VERSION}")
    prov = doc["provenance"]
    problems = provenance_mismatches(prov)
    if problems:
        msg = f"{path}: " + "; ".join(problems) + (
            ": the saved choices may be slower here; decisions will be re-verified on first use")
        if strict:
            raise ValueError(msg)
        warnings.warn(msg, ProvenanceWarning, stacklevel=2)

    def sizes(d):
        if d is None:
            return None
        mnk = tuple(int(d[x]) for x in DIMS)
        return (int(d["batch"]), *mnk) if "batch" in d else mnk

    try:
        hint_choices = [HintChoice(sizes(h["sizes"]), Choice.parse(h["choice"]), h.get("device_ms"))
                        for h in doc["hint_choices"]]
        decisions = {sizes(d["sizes"]): Decision(Choice.parse(d["choice"]), d["source"], sizes(d["hint"]),
                                                 bool(d["verified"]) and not problems,
                                                 d.get("times_ms"), d.get("reason", ""))
                     for d in doc["decisions"]}
        table = table_from_json(doc["table"], str(path)) if doc.get("table") is not None else None
        note = _restore_binaries(path, doc.get("binaries"), skip=bool(problems))
        d = Dispatcher(dims=doc["dims"], dtype=doc["dtype"], hints=doc["hints"],
                          hint_choices=hint_choices, mode=doc["mode"], table=table, timer=timer,
                          verify=bool(doc.get("verify", True)), layout_a=doc["layout_a"],
                          layout_b=doc["layout_b"], provenance=prov, decisions=decisions)
    except (KeyError, TypeError) as e:
        raise ValueError(f"{path}: malformed dispatcher file: {type(e).__name__}: {e}") from None
    d.binaries_note = note
    return d


def _restore_binaries(path: Path, spec, *, skip: bool) -> str:
    """Put the saved kernel binaries into Triton's cache; a one-line note of what happened."""
    if spec is None:
        return "no kernel binaries saved: kernels compile on first launch"
    if not isinstance(spec, dict) or not isinstance(spec.get("dir"), str) or not isinstance(
            spec.get("kernels"), list) or not all(isinstance(n, str) for n in spec["kernels"]):
        raise ValueError(f"{path}: malformed 'binaries' field: expected {{'dir': str, 'kernels': [str]}}")
    if skip:
        return "kernel binaries not restored: saved on another GPU or software version"
    for name in (spec["dir"], *spec["kernels"]):
        if not name or "/" in name or "\\" in name or name in (".", ".."):
            raise ValueError(f"{path}: 'binaries' names must be plain folder names, got {name!r}")
    from . import binaries as bins

    _n, note = bins.restore(path.with_name(spec["dir"]), spec["kernels"])
    return note


# ----------------------------------------------------------------------------- compile_mm
def interactive() -> bool:
    """Whether someone is watching: stderr is a terminal, or Python runs interactively."""
    import sys
    return bool(getattr(sys, "ps1", None)) or sys.flags.interactive or (
        hasattr(sys.stderr, "isatty") and sys.stderr.isatty())


def _winners(result, problems: list[Problem]) -> tuple[list[tuple[Choice, float | None]], dict | None,
                                                        LookupTable | None]:
    """Winners per problem from a TuneResult (``.shapes``) or a mapping problem/key -> choice."""
    if hasattr(result, "shapes"):
        by_key = {s.problem.key: (s.best, getattr(s, "best_ms", None)) for s in result.shapes}
        ctx = getattr(result, "context", None)
        prov = None
        if ctx is not None:
            from . import __version__
            prov = make_provenance(ctx.device_name, ctx.capability, ctx.torch_version,
                                   ctx.triton_version, __version__, "tuned")
        table = getattr(result, "table", None)
    elif isinstance(result, Mapping):
        by_key = {}
        for p, c in result.items():
            by_key[p.key if isinstance(p, Problem) else str(p)] = (c, None)
        prov, table = None, None
    else:
        raise TypeError("tune_fn must return a TuneResult (with .shapes) or a mapping "
                        f"problem (or key) -> choice, not {type(result).__name__}")
    out = []
    for p in problems:
        best, ms = by_key.get(p.key, (None, None))
        if best is None:
            warnings.warn(f"tuning found no working kernel for {p.key}; using aten (torch.mm) there",
                          RuntimeWarning, stacklevel=3)
            out.append((ATEN, None))
        else:
            out.append((best if isinstance(best, Choice) else Choice.parse(str(best)), ms))
    return out, prov, table


def compile_mm(*, n: int | None = None, k: int | None = None, m: int | None = None, dtype,
               hints: Mapping[str, Sequence[int]] | None = None, mode: str = "similarity",
               table: LookupTable | str | os.PathLike | None = None,
               families: Sequence[str] | None = None, space: str = "default", store=None,
               device: str | None = None, tune_fn: Callable | None = None, timer=None,
               verify: bool = True, layout_a: str = "row", layout_b: str = "row",
               progress: bool | None = None, tune_kwargs: Mapping | None = None,
               batch: int | None = None) -> Dispatcher:
    """Tune one kernel per size hint and return ``mm(a, b)`` for any size of the dynamic dims.

    ``batch``: tune the hints as bmm problems of this batch size (``compile_bmm``); the
    dispatcher then serves 3-D calls of any batch (and 2-D ones) with those kernels.

    ``m``, ``n``, ``k``: static sizes; a dim left as None is dynamic and takes its
    hints from ``hints`` (default: 64, 256, 4096 for every dynamic dim; given hints
    must cover every dynamic dim). One problem is tuned per combination of hints.
    ``mode``: 'similarity', 'benchmark' or 'table' (see the module doc). ``table``: a
    LookupTable or its JSON path, for mode='table' (the tuned hint winners are added
    to it). ``families``, ``space``, ``store``, ``device``, ``progress`` and
    ``tune_kwargs`` go to the tuner. ``tune_fn``: the tuner, default ``gemmtune.tune``;
    it is called once as ``tune_fn(problems, families=..., space=..., [store=...,
    device=...,] progress=..., **tune_kwargs)`` and returns a TuneResult or a mapping
    problem (or its key) -> choice (or its id). ``timer``: used by mode='benchmark'.
    ``layout_a``/``layout_b``: the layouts the caller passes ('col' for ``x @ W.t()``):
    the hint problems are tuned with them and table keys use them.
    ``verify``: check each shape's first kernel against fp64 (see the module doc).
    ``progress``: the tuner's progress (a bar on a terminal, plain lines otherwise); default
    ``None``: on in interactive use (stderr is a terminal or Python is interactive).
    Outputs have the inputs' dtype; float32 runs exact fp32 dots (no tf32).

    Example (skipped in doctests: it tunes on a GPU)::

        >>> mm = gemmtune.compile_mm(n=4096, k=4096, dtype="bf16",
        ...                          hints={"m": [64, 256, 4096]})   # doctest: +SKIP
        >>> mm(torch.randn(100, 4096, device="cuda", dtype=torch.bfloat16),
        ...    torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16))  # doctest: +SKIP
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if table is not None and mode != "table":
        raise ValueError(f"table= is only used by mode='table' (mode is {mode!r})")
    dims = {"m": m, "n": n, "k": k}
    for d, v in dims.items():
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise ValueError(f"{d} must be a non-negative int (static) or None (dynamic), got {v!r}")
    dynamic = [d for d in DIMS if dims[d] is None]
    if hints is None:
        hints = {d: DEFAULT_HINTS for d in dynamic}
    hints = dict(hints)
    static_hinted = sorted(set(hints) - set(dynamic))
    if static_hinted:
        raise ValueError(f"hints given for {static_hinted}, which are static (or not m/n/k); "
                         f"dynamic dims: {dynamic}")
    missing = [d for d in dynamic if d not in hints]
    if missing:
        raise ValueError(f"dynamic dim(s) {missing} need hints, e.g. hints={{{missing[0]!r}: [64, 256, 4096]}}")
    clean = {}
    for d in dynamic:
        vals = hints[d]
        if isinstance(vals, int) or not vals or any(
                not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in vals):
            raise ValueError(f"hints[{d!r}] must be a non-empty list of positive ints, got {vals!r}")
        clean[d] = tuple(sorted(set(vals)))
    dtype = dtype_name(dtype)
    if isinstance(table, (str, os.PathLike)):
        # The dispatch path never fails on a bad table: it warns once and goes on with
        # the tuned hint kernels (exact entries for the hints, similarity elsewhere).
        from .table import load_or_none
        table = load_or_none(table)

    if progress is None:
        progress = interactive()
    if batch is not None and (not isinstance(batch, int) or isinstance(batch, bool) or batch < 1):
        raise ValueError(f"batch must be an int >= 1 (the bmm batch the hints are tuned at), got {batch!r}")
    combos = list(itertools.product(*[clean[d] if d in clean else (dims[d],) for d in DIMS]))
    bmm = {} if batch is None else {"op": "bmm", "batch": batch}
    problems = [Problem.from_sizes(cm, cn, ck, dtype, layout_a=layout_a, layout_b=layout_b, **bmm)
                for cm, cn, ck in combos]
    if tune_fn is None:
        from .tune import tune as tune_fn
    kw = {"families": families, "space": space, "progress": progress, **(tune_kwargs or {})}
    if store is not None:
        kw["store"] = store
    if device is not None:
        kw["device"] = device
    winners, prov, tuned_table = _winners(tune_fn(problems, **kw), problems)
    hint_choices = [HintChoice(tuple(c), ch, ms) for c, (ch, ms) in zip(combos, winners)]
    if mode == "table":
        merged = LookupTable(dict(table.provenance) if table is not None else (
            prov or _current_provenance("by-hand")))
        if table is not None:
            merged.entries.update(table.entries)
        if tuned_table is not None:
            merged.entries.update(tuned_table.entries)
        for p, h in zip(problems, hint_choices):
            merged.entries.setdefault(p.key, [TableChoice(h.choice, h.device_ms)])
        table = merged
    return Dispatcher(dims=dims, dtype=dtype, hints=clean, hint_choices=hint_choices, mode=mode,
                      table=table, timer=timer, verify=verify, layout_a=layout_a, layout_b=layout_b,
                      provenance=prov or _current_provenance("by-hand"))


def compile_bmm(*, batch: int, n: int | None = None, k: int | None = None, m: int | None = None, dtype,
                **kwargs) -> Dispatcher:
    """``compile_mm`` for batched products: the hint problems are bmm problems of ``batch``
    matrices (static ``m``/``n``/``k`` and ``hints`` as in compile_mm, per matrix), and the
    dispatcher returned serves ``d(a, b)`` for 3-D operands of any batch.

    Example (skipped in doctests: it tunes on a GPU)::

        >>> bmm = gemmtune.compile_bmm(batch=32, k=64, dtype="bf16", layout_b="col",
        ...                            hints={"m": [128, 1024], "n": [128, 1024]})   # doctest: +SKIP
        >>> s = bmm(q, k.transpose(1, 2))                                          # doctest: +SKIP
    """
    return compile_mm(m=m, n=n, k=k, dtype=dtype, batch=batch, **kwargs)


def lookup(table: LookupTable | str | os.PathLike | None, *, dtype, layout_a: str = "row", layout_b: str = "row",
           verify: bool = True) -> Dispatcher:
    """A dispatcher that tunes nothing: each shape (mm, or bmm for 3-D calls) runs the table's
    exact entry for it (its first choice that runs and verifies here) and cuBLAS otherwise.
    ``table``: a LookupTable, its JSON path (a bad file warns once and serves cuBLAS), or None.

    Example::

        >>> import torch, gemmtune
        >>> d = gemmtune.dispatch.lookup(None, dtype="fp32")
        >>> d(torch.randn(2, 3, 4), torch.randn(2, 4, 5)).shape
        torch.Size([2, 3, 5])
    """
    if isinstance(table, (str, os.PathLike)):
        from .table import load_or_none
        table = load_or_none(table)
    if table is None:
        table = LookupTable(_current_provenance("by-hand"))
    return Dispatcher(dims={}, dtype=dtype, hints={d: (1,) for d in DIMS},
                      hint_choices=[HintChoice((1, 1, 1), ATEN)], mode="table", table=table, verify=verify,
                      layout_a=layout_a, layout_b=layout_b)


__all__ = ["compile_mm", "compile_bmm", "lookup", "load", "Dispatcher", "Decision", "HintChoice", "rank_hints",
           "ProvenanceWarning", "provenance_mismatches", "MODES", "DEFAULT_HINTS"]
