"""One candidate on one problem: build inputs, verify against fp64, time. No JSON, no processes.

``measure(problem, choice, timer, state=...) -> Measurement`` is what the tuner's worker
(runner.handle, a thin JSON adapter over it), the dispatcher's first-sight benchmark,
``gemmtune bench`` and scripts/bench_dispatch.py all call. ``verify`` is its first half:
it checks a choice and hands back the verified launch, for callers that time it their own
way (``gemmtune bench`` times every method together in interleaved rounds).

Inputs honour the problem's layouts and alignment: a column-major operand is a
transposed view, an unaligned one is a view at a 2-byte storage offset, a strided
one takes every second column. A bmm problem's operands are 3-D: a batch of such
matrices, or one of them expanded over the batch (stride 0) where the layout says
it is broadcast. Inputs are fresh random normals, never zeros
(zeros can run faster than real data and hide unwritten outputs).

Failures are data: every exception becomes a ``Measurement`` whose ``status`` says what
kind of failure it was. Crashes and hangs are not seen here: the worker pool observes
them from outside (workers.py) and reports ``crashed`` / ``timeout``.

    >>> Status("compile_error") is Status.COMPILE_ERROR and Status.OK == "ok"
    True
    >>> Measurement(Status.WRONG, rel_err=0.5, reason="rel 0.5 > 0.01").to_dict()
    {'status': 'wrong', 'rel_err': 0.5, 'reason': 'rel 0.5 > 0.01'}
"""

from __future__ import annotations

import math
import os
import time
import traceback
from dataclasses import dataclass
from typing import Callable

import torch

from .. import kernels
from ..configs import Choice
from ..device import DeviceInfo
from ..kernels.splitk import SplitKWorkspace
from ..problem import BCAST, Problem, operand_aligned, slice_layout
from ..epilogue import Epilogue, EpilogueArgs
from .. import scaled
from ..verify import compare, reference, tolerance
from .timing import sets_for, timer_profiles
# Status and its groups live in status.py, free of torch's kernels: the tuner's parent process
# records statuses without importing Triton (read here as before).
from .status import FAILED, RETRYABLE, Status  # noqa: F401

MAX_INPUT_BYTES = 4 * 2**30




@dataclass(frozen=True)
class Measurement:
    """One candidate's result. Times in ms; ``eager_ms`` None when not taken (a cut), NaN
    never; ``representative`` False for the CPU interpreter's timings."""

    status: Status
    device_ms: float | None = None
    eager_ms: float | None = None
    rel_err: float | None = None
    repeats: int | None = None
    spread: float | None = None
    representative: bool | None = None
    reason: str = ""
    traceback: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def to_dict(self) -> dict:
        """The worker protocol's result dict: the fields that were measured; a timed one
        always carries eager_ms (None when not taken) and its reason."""
        d: dict = {"status": self.status.value}
        timed = self.device_ms is not None
        for k in ("device_ms", "eager_ms", "rel_err", "repeats", "spread", "representative"):
            v = getattr(self, k)
            if v is not None or (timed and k == "eager_ms"):
                d[k] = v
        if self.reason or timed:
            d["reason"] = self.reason
        if self.traceback is not None:
            d["traceback"] = self.traceback
        return d


def make_operand(rows: int, cols: int, layout: str, aligned: bool, dtype: torch.dtype,
                 device: str, gen: torch.Generator | None = None) -> torch.Tensor:
    """A random (rows, cols) operand with the given layout and alignment.

    Unaligned: the data pointer is shifted by one element (2 or 4 bytes) only where the fresh
    operand's own strides are 16-byte aligned, since that is then the only way to be unaligned.
    Where they are not (a 2-byte leading stride: a K x 1 column stored 'row', N = 4 rows of 8
    bytes, an odd K), the operand stays what ``torch.randn(rows, cols)`` gives, pointer aligned:
    the tensors a model passes for that key. A shifted pointer as well made cuBLAS slower than on
    those tensors (session 58, H200: 8192x1x4096 bf16 with B row-major took 35.5 us shifted and
    18.7 us from torch.randn), so the tuner picked Triton kernels that lose to cuBLAS when served."""
    def randn(n: int) -> torch.Tensor:
        return torch.randn(n, generator=gen, dtype=torch.float32, device=device).to(dtype)

    off = 0 if aligned or not _strides_aligned(rows, cols, layout, dtype.itemsize) else 1
    if layout == "row":
        return randn(rows * cols + off)[off:].view(rows, cols)
    if layout == "col":
        return randn(rows * cols + off)[off:].view(cols, rows).t()
    return randn(rows * cols * 2 + off)[off:].view(rows, cols * 2)[:, ::2]


def _strides_aligned(rows: int, cols: int, layout: str, elsize: int, batch: int = 1) -> bool:
    """Whether a fresh operand of ``layout`` (``make_operand``'s or ``make_batch``'s storage, pointer
    aligned) would pass ``operand_aligned``: its strides alone decide. Not problem._contiguous_aligned,
    which gives the key ``from_sizes`` assumes: there a 1 x N operand given as 'col' is read by its
    2-byte column stride, while the tensor built here, a single contiguous row, is aligned."""
    lay = slice_layout(layout)
    if lay == "strided":
        return False
    stride = (cols, 1) if lay == "row" else (1, rows)
    if batch > 1 and not layout.startswith(BCAST):
        stride = (rows * cols, *stride)
    return operand_aligned(0, rows, cols, stride, elsize)


def make_batch(batch: int, rows: int, cols: int, layout: str, aligned: bool, dtype: torch.dtype,
               device: str, gen: torch.Generator | None = None) -> torch.Tensor:
    """A random (batch, rows, cols) bmm operand: ``batch`` matrices of the slice layout
    (``make_operand``'s: row, col, strided), or one of them expanded over the batch (stride 0)
    when ``layout`` is broadcast ('bcast_row', ...). Unaligned, where the fresh batch's strides are
    aligned (``make_operand``'s rule): the storage is shifted by one element and, for more than one
    matrix, the batch stride is odd too."""
    lay = slice_layout(layout)
    if layout.startswith(BCAST):
        return make_operand(rows, cols, lay, aligned, dtype, device, gen).unsqueeze(0).expand(batch, rows, cols)
    shift = not aligned and _strides_aligned(rows, cols, layout, dtype.itemsize, batch)
    # One tensor of matrices whose batch stride is the matrix's storage (+1 element when
    # shifted, so that every matrix but the first starts unaligned as well).
    per = rows * cols * (2 if lay == "strided" else 1) + (1 if shift else 0)
    off = 1 if shift else 0
    flat = torch.randn(batch * per + off, generator=gen, dtype=torch.float32, device=device).to(dtype)
    flat = flat[off:]
    if lay == "row":
        return flat.as_strided((batch, rows, cols), (per, cols, 1))
    if lay == "col":
        return flat.as_strided((batch, rows, cols), (per, 1, rows))
    return flat.as_strided((batch, rows, cols), (per, 2 * cols, 2))


def make_inputs(problem: Problem, device: str, n_sets: int, seed: int):
    """``n_sets`` (A, B) pairs of ``problem``'s layouts and alignment, seeded; on the "meta" device
    the same sizes, strides and storage offsets with no memory (compile workers, COMPILE_ON_META)."""
    gen = None if device == "meta" else torch.Generator(device=device).manual_seed(seed)
    dt, dt_b = problem.torch_dtype, problem.torch_dtype_b  # scaled_mm: B is e4m3 whatever A is
    if problem.op == "bmm":
        return [(make_batch(problem.batch, problem.m, problem.k, problem.layout_a, problem.aligned_a, dt, device, gen),
                 make_batch(problem.batch, problem.k, problem.n, problem.layout_b, problem.aligned_b, dt, device, gen))
                for _ in range(n_sets)]
    return [(make_operand(problem.m, problem.k, problem.layout_a, problem.aligned_a, dt, device, gen),
             make_operand(problem.k, problem.n, problem.layout_b, problem.aligned_b, dt_b, device, gen))
            for _ in range(n_sets)]


def make_bias(problem: Problem, device: str, seed: int) -> torch.Tensor | None:
    """An addmm problem's bias (a scaled_mm one's, when it has one): (N,) of the output's dtype;
    None for mm.

    Scaled to the product's size: with unit-normal operands an output element has rms
    sqrt(K), so a unit bias would be 1/sqrt(K) of it, and a kernel that dropped or
    misplaced the bias would pass a bf16 tolerance (1e-2) from K = 10^4 on."""
    if problem.op != "addmm" and not problem.bias:
        return None
    # Not the operands' stream: a bias is no copy of A's first row.
    gen = None if device == "meta" else torch.Generator(device=device).manual_seed(seed + 7919)
    scale = math.sqrt(max(problem.k, 1))
    return (torch.randn(problem.n, generator=gen, dtype=torch.float32, device=device) * scale).to(
        problem.torch_out_dtype)


BIAS = Epilogue(bias=True)


def epilogue_for(bias: torch.Tensor | None) -> EpilogueArgs | None:
    """The epilogue that fuses an addmm problem's bias (None for mm)."""
    return None if bias is None else EpilogueArgs(BIAS, bias)


class WorkerState:
    """Per-process caches: the current problem's inputs, outputs and reference.

    ``timers``: timer objects by profile name, which a task picks with its
    ``"timer"`` key (default: timing.timer_profiles for this device). ``timer``:
    the timer of tasks that name none, also the 'standard' profile (default: the
    'standard' entry of ``timers``)."""

    def __init__(self, timer=None, device: str | None = None, timers: dict | None = None):
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.timers = dict(timers) if timers is not None else timer_profiles(self.device == "cuda")
        if timer is not None:
            self.timers["standard"] = timer
        self.timer = self.timers["standard"]
        self.workspace = SplitKWorkspace()
        self.key: str | None = None
        self.where: str | None = None  # the device of the prepared inputs: self.device, or "meta"
        self.not_meta: set = set()  # (family, pad) that failed to compile on meta operands here
        self.timing = False  # whether the prepared inputs are the full timing set
        self.inputs: list = []
        self.outs: list = []
        self.ref: torch.Tensor | None = None
        self.epilogue: EpilogueArgs | None = None  # an addmm problem's bias, fused; scaled_mm's scales
        self.l2 = DeviceInfo.from_torch().l2_bytes if self.device == "cuda" else 0
        # Fastest full measurement per problem key in this worker: the reference of a
        # timer's early cut (timing.should_cut), for timers that have one.
        self.best_ms: dict[str, float] = {}
        # Seconds of the last verify / measure's steps (inputs and fp64 reference, the first
        # launch with its compile or load, the check, the timing): what a worker trace records
        # (bench.worker, GEMMTUNE_WORKER_TRACE).
        self.steps: dict[str, float] = {}

    def prepare(self, problem: Problem, seed: int, timing: bool = True, meta: bool = False) -> None:
        """Inputs for ``problem``. For timing: enough sets to exceed L2, one output per set
        and the fp64 reference. Without (compile-only): one set and one output, so the
        parallel compile workers neither fill GPU memory nor compute references; ``meta``
        (compile-only): that set on the meta device, no memory at all (COMPILE_ON_META)."""
        where = "meta" if meta and not timing else self.device
        if self.key == problem.key and (self.timing or not timing) and self.where == where:
            return
        self.inputs, self.outs, self.ref, self.epilogue = [], [], None, None
        if self.device == "cuda":
            torch.cuda.empty_cache()
        bytes_per_set = problem.min_bytes
        n = sets_for(bytes_per_set, self.l2) if self.device == "cuda" and timing else 1
        n = max(1, min(n, MAX_INPUT_BYTES // max(bytes_per_set, 1)))
        self.inputs = make_inputs(problem, where, n, seed)
        self.outs = [torch.empty(problem.out_shape, dtype=problem.torch_out_dtype, device=where)
                     for _ in range(n)]
        # One bias for every input set: it is N elements, so the sets' L2-cold rotation is
        # the operands' business.
        bias = make_bias(problem, where, seed)
        self.epilogue = epilogue_for(bias)
        scales = None
        if problem.op == "scaled_mm":  # one set of scales too, as for the bias
            scales = scaled.make_scales(problem, self.device, seed)
            self.epilogue = scaled.epilogue(problem, scales, bias)
        if timing:
            a, b = self.inputs[0]
            self.ref = reference(a, b, bias) if scales is None else scaled.reference(a, b, *scales, bias)
        self.key, self.timing, self.where = problem.key, timing, where

    def release(self) -> None:
        """Free the inputs, outputs and reference now (the next prepare makes new ones)."""
        self.inputs, self.outs, self.ref, self.key, self.where = [], [], None, None, None


def classify_exception(e: BaseException) -> Status:
    """COMPILE_ERROR for resource/compilation failures, ERROR for anything else."""
    name = type(e).__name__
    text = f"{name}: {e}"
    if any(s in text for s in ("OutOfResources", "out of resource", "CompilationError",
                               "PassManager", "MLIR", "ptxas")):
        return Status.COMPILE_ERROR
    return Status.ERROR


def failure(e: BaseException) -> Measurement:
    """An exception as a Measurement: its status (classify_exception), reason and traceback."""
    return Measurement(classify_exception(e), reason=f"{type(e).__name__}: {e}"[:2000],
                       traceback=traceback.format_exc(limit=3)[-2000:])


def _as_choice(choice: Choice | str) -> Choice:
    return choice if isinstance(choice, Choice) else Choice.parse(choice)


def _unsupported(problem: Problem, choice: Choice) -> Measurement | None:
    """UNSUPPORTED when the choice's family rejects this problem, else None."""
    try:
        kernels.validate_choice(choice, problem)
        if getattr(choice.config, "pdl", False) and torch.cuda.is_available():  # (a worker times on its GPU)
            # a skinny -pdl config on a GPU before Hopper: unsupported here, not an error (its
            # launch would refuse it by the same check)
            from ..kernels.skinny import check_pdl_gpu
            check_pdl_gpu()
    except ValueError as e:
        return Measurement(Status.UNSUPPORTED, reason=f"{type(e).__name__}: {e}"[:2000])
    return None


def _launcher(problem: Problem, choice: Choice, state: WorkerState) -> Callable[[int], None]:
    def launch(i: int) -> None:
        a, b = state.inputs[i]
        kernels.run_choice_unchecked(choice, a, b, state.outs[i], allow_tf32=problem.allow_tf32,
                           workspace=state.workspace, epilogue=state.epilogue)
    return launch


def _empty(problem: Problem) -> bool:
    return problem.m == 0 or problem.n == 0 or problem.k == 0


def verify(problem: Problem, choice: Choice | str, state: WorkerState,
           seed: int = 0) -> tuple[Measurement, Callable[[int], None] | None]:
    """Check ``choice`` on ``problem`` against the fp64 reference, on a NaN-poisoned output
    (unwritten elements show). Returns (measurement, launch): an OK measurement carries
    ``rel_err`` and ``launch(i)`` runs the choice on the state's input set ``i``; on any
    failure ``launch`` is None and the measurement says why."""
    try:
        choice = _as_choice(choice)
        bad = _unsupported(problem, choice)
        if bad is not None:
            return bad, None
        t0 = time.perf_counter()
        state.steps = {}
        state.prepare(problem, seed, timing=True)
        if state.device == "cuda":
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        state.steps["inputs_s"] = t1 - t0
        if _empty(problem):
            return Measurement(Status.SKIPPED, reason="empty problem: nothing to time"), None
        launch = _launcher(problem, choice, state)
        state.outs[0].fill_(math.nan)
        launch(0)
        if state.device == "cuda":
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        state.steps["first_launch_s"] = t2 - t1
        result = compare(state.outs[0], state.ref, tolerance(problem))
        state.steps["check_s"] = time.perf_counter() - t2
        if not result.ok:
            return Measurement(Status.WRONG, rel_err=result.rel_err, reason=result.reason), None
        return Measurement(Status.OK, rel_err=result.rel_err), launch
    except Exception as e:  # failures are data
        return failure(e), None


def measure(problem: Problem, choice: Choice | str, timer, *, state: WorkerState | None = None,
            seed: int = 0) -> Measurement:
    """Verify ``choice`` on ``problem`` (``verify``), then time it with ``timer`` (a
    timing.CudaGraphTimer / WallTimer or any object with ``measure(launch, n_sets)``).

    ``state`` keeps inputs between calls on the same problem (and the best time so far per
    problem, for timers that cut early); a fresh one on the problem's device when None.
    Never raises: a failure is a Measurement with its status and reason."""
    if state is None:
        state = WorkerState(timer=timer)
    m, launch = verify(problem, choice, state, seed)
    if launch is None:
        return m
    t0 = time.perf_counter()
    try:
        if getattr(timer, "cut_factor", None):
            t = timer.measure(launch, len(state.inputs), best_ms=state.best_ms.get(problem.key))
        else:
            t = timer.measure(launch, len(state.inputs))
    except Exception as e:  # failures are data
        return failure(e)
    state.steps["timing_s"] = time.perf_counter() - t0
    if t.repeats > 1 and math.isfinite(t.device_ms):
        state.best_ms[problem.key] = min(t.device_ms, state.best_ms.get(problem.key, math.inf))
    return Measurement(Status.OK, device_ms=t.device_ms,
                       eager_ms=t.eager_ms if math.isfinite(t.eager_ms) else None,
                       rel_err=m.rel_err, repeats=t.repeats, spread=t.spread,
                       representative=t.representative,
                       reason="" if t.representative else "CPU interpreter: timing not representative")


# Compile workers compile on meta operands: the same sizes, strides and storage offsets (so the
# same Triton specialisation and cache entry as the benchmark worker's real ones) with no memory
# behind them. With real operands each of the 16 compile workers of an H100 host held one input set
# of the problem it compiled; on lm-head shapes (256000 x 3584 bf16: 1.8 GB a weight, plus pad+
# copies) they filled the GPU, and the benchmark worker's allocations failed: 475 candidates of the
# H100 collection store were recorded as CUDA out-of-memory errors, 96 of them on a 3 x 3584 x 14336
# problem timed while lm-heads compiled (2026-11-26). A choice that cannot compile this way (a
# launch path that reads its operands) compiles again on real ones. GEMMTUNE_COMPILE_ON_META=0
# (in the tuner's environment, which its workers inherit) turns it off.
# Only for problems whose input set takes at least COMPILE_ON_META_BYTES: on the public suite's
# decode, splitk and odd groups (inputs of 0.1-400 MB) --fast took 25.0 s with every problem
# compiled on meta operands against 12.5 s without (H100, same run setup, 2026-11-26); the cause
# is not profiled yet. 16 workers holding one set each stay under 16 GB below this size.
COMPILE_ON_META = os.environ.get("GEMMTUNE_COMPILE_ON_META", "1") != "0"
COMPILE_ON_META_BYTES = 1 << 30


# A shape's candidates compiled at once on threads, in the benchmark worker, before they are timed
# one by one (``precompile``). Part of each compile runs without the GIL (ptxas and the host
# compiler are subprocesses), and Triton's AsyncCompileMode (the thread pool Inductor's async
# compile uses; triton 3.6 has it) is its supported way to run several in one process. On the
# 2-core CPU machine, four tiled configs compiled for sm90 took 1.80 s one after the other and
# 1.12 s on four threads. On an H100 host a cold one-shape --fast took 0.28x max-autotune's time
# with it and 0.32-0.34x without (benchmarks/results/2026-11-26-h100-s16-precompile). It is the path
# of a run without compile workers (one-shape --fast: 3 compiles, where compile worker processes
# cost more than they save; --in-process; a warm server), where each candidate was otherwise
# compiled just before its timing.
PRECOMPILE_THREADS = 8


def async_compile_mode():
    """Triton's AsyncCompileMode class, or None when the installed triton has none."""
    try:
        from triton.runtime._async_compile import AsyncCompileMode
    except ImportError:
        return None
    return AsyncCompileMode


def precompile(problem: Problem, choices: list, state: WorkerState, seed: int = 0,
               threads: int = PRECOMPILE_THREADS) -> dict:
    """Compile ``choices`` of ``problem`` together, on up to ``threads`` threads, into this
    process's Triton kernel caches, on the timing inputs that ``measure`` then uses (so the
    same specialisations): nothing runs on the GPU. An optimisation only: a choice that fails to
    compile here is left to ``measure``, which compiles it again and records its error.
    Each compiled kernel is then loaded on the threads as well (its launcher built, its binary
    loaded), which its first launch would otherwise do on the timing thread.
    Returns ``{"status": "ok", "compiled": n, "kernels": loaded, "s": seconds, "threads": t}``, or status
    "skipped" with the reason and ``for_run``: True where the skip holds for every problem of the
    run (no GPU, a triton without AsyncCompileMode), False where it is this problem's (empty, or
    fewer than 2 compiles)."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    todo = [c for c in map(_as_choice, choices) if c.needs_compile and _unsupported(problem, c) is None]
    mode = async_compile_mode()
    never = "not on a GPU" if state.device != "cuda" else "this triton has no AsyncCompileMode" if mode is None else None
    if never is not None:
        return {"status": "skipped", "reason": never, "for_run": True}
    why = "empty problem" if _empty(problem) else "fewer than 2 candidates to compile" if len(todo) < 2 else None
    if why is not None:
        return {"status": "skipped", "reason": why, "for_run": False}
    from ..kernels.tiled import compile_only

    t0 = time.perf_counter()
    n = max(1, min(threads, len(todo)))
    state.prepare(problem, seed, timing=True)
    device = torch.cuda.current_device()

    def load(kernel) -> None:
        # What a kernel's first launch would do on the timing thread (CompiledKernel._init_handles):
        # build its launcher, a C module the host compiler makes for each new signature (0.24 s each
        # with an empty Triton cache, profiled in a cold one-shape tune on an H100, 2026-11-26), and
        # load its binary. A kernel that cannot load keeps the error for its first launch.
        try:
            with torch.cuda.device(device):
                kernel._init_handles()
        except Exception:  # noqa: BLE001 - raised again at its launch, and recorded there
            pass

    with ThreadPoolExecutor(n, thread_name_prefix="gemmtune-compile") as ex:
        compiling = mode(ex, ignore_errors=True)
        with compiling:
            for c in todo:
                try:
                    with compile_only(strict=True):  # queue the compiles; never a launch here
                        _launcher(problem, c, state)(0)
                except Exception:  # noqa: BLE001 - measure compiles it again and records why
                    pass
            futures = list(getattr(compiling, "future_kernels", {}).values())
        # Leaving the mode finished every compile (``kernel`` set where it succeeded).
        compiled = [k for k in (getattr(f, "kernel", None) for f in futures) if hasattr(k, "_init_handles")]
        list(ex.map(load, compiled))
    return {"status": "ok", "compiled": len(todo), "kernels": len(compiled), "s": time.perf_counter() - t0,
            "threads": n}


def warm(problem: Problem, state: WorkerState, seed: int = 0) -> dict:
    """Pay a worker's first-use costs before a client's candidates do, without compiling any
    candidate kernel (a later client's timings still pay each of its own compiles):
    - Triton's compile path, used the first time in this process: its backend modules, ptxas and
      the host compiler (a launcher). It compiles and runs ``pad_copy``, the kernel that pad+
      choices run anyway, on a small odd matrix;
    - the timing path: ``aten`` (cuBLAS) verified and timed on ``problem``: cuBLAS's
      handles, the fp64 reference, the timer's CUDA graph and its L2-flush buffers (``problem``: the
      server's ``WARM_SIZES``).
    A warm server (``gemmtune worker --serve``) sends this once per worker before its first client:
    on an H100 (2026-11-26) its first forwarded tune's compiles took 1.45 s against 0.43-1.16 s
    for the later shapes. Returns ``{"status": "ok", "s": seconds, "steps": {step: seconds}}``,
    "skipped" off the GPU, or "error" with the first failing step (an optimisation only: the
    same step fails again, and is recorded, when a candidate needs it)."""
    import time

    if state.device != "cuda":
        return {"status": "skipped", "reason": "not on a GPU"}
    from ..kernels.pad import pad_copy

    steps: dict[str, float] = {}
    t0 = time.perf_counter()
    try:
        g = torch.Generator(device="cuda").manual_seed(seed)
        x = torch.randn((37, 45), device="cuda", dtype=torch.bfloat16, generator=g)
        y = pad_copy(x, 37, 48)
        torch.cuda.synchronize()
        if not torch.equal(y[:, :45], x):
            raise RuntimeError("pad_copy's warm-up copy differs from its source")
        steps["triton_compile"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        m = measure(problem, "aten", state.timer, state=state, seed=seed)
        if m.status != Status.OK:
            raise RuntimeError(f"aten on {problem.key}: {m.status.value}: {m.reason}")
        steps["aten_measure"] = time.perf_counter() - t1
    except Exception as e:  # noqa: BLE001 - an optimisation only: see the docstring
        return {"status": "error", "reason": f"{type(e).__name__}: {e}"[:2000], "s": time.perf_counter() - t0,
                "steps": steps}
    return {"status": "ok", "s": time.perf_counter() - t0, "steps": steps}


def compile_choice(problem: Problem, choice: Choice | str, state: WorkerState, seed: int = 0) -> Measurement:
    """Compile ``choice`` for ``problem`` without running it (kernels.tiled.compile_only): a
    compile worker must not put work on the GPU while the benchmark worker times another
    kernel there. OK also for choices with nothing to compile (cuBLAS)."""
    try:
        choice = _as_choice(choice)
        bad = _unsupported(problem, choice)
        if bad is not None:
            return bad
        if not choice.needs_compile:
            return Measurement(Status.OK)
        if _empty(problem):
            return Measurement(Status.SKIPPED, reason="empty problem: nothing to time")
        from ..kernels.tiled import compile_only

        path = (choice.family, choice.pad)
        if (COMPILE_ON_META and state.device == "cuda" and problem.op != "scaled_mm" and path not in state.not_meta
                and problem.min_bytes >= COMPILE_ON_META_BYTES):
            try:
                state.prepare(problem, seed, timing=False, meta=True)
                with compile_only(strict=True):
                    _launcher(problem, choice, state)(0)
                return Measurement(Status.OK)
            except Exception:  # noqa: BLE001 - compiled again below on real operands, whose error counts
                state.not_meta.add(path)  # this family's launch path reads its operands: real ones from now on
        state.prepare(problem, seed, timing=False)
        with compile_only():
            _launcher(problem, choice, state)(0)
        if state.device == "cuda":
            torch.cuda.synchronize()
        return Measurement(Status.OK)
    except Exception as e:  # failures are data
        return failure(e)
