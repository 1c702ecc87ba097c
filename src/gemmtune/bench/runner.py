"""What a worker process does with one task: build inputs, verify, time.

A task is a JSON-able dict: ``{"problem": <Problem.key>, "choice": <Choice.id>,
"seed": int}``, optionally with ``"timer": <profile name>`` (timing.TIMINGS; the
state's own timer when absent). ``handle(op, task, state)`` returns a result dict
with ``status`` (ok / compile_error / wrong / error), ``device_ms``, ``eager_ms``,
``rel_err``, ``repeats``, ``spread``, ``reason``. Crashes and hangs are not seen here: the
pool observes them from outside (workers.py).

Inputs honour the problem's layouts and alignment: a column-major operand is a
transposed view, an unaligned one is a view at a 2-byte storage offset, a strided
one takes every second column. Inputs are fresh random normals, never zeros
(zeros can run faster than real data and hide unwritten outputs). An addmm problem
also gets a bias per input set (``make_bias``), fused into the kernel's epilogue and
included in the fp64 reference.
"""

from __future__ import annotations

import math
import traceback

import torch

from .. import kernels
from ..device import DeviceInfo
from ..kernels.splitk import SplitKWorkspace
from ..problem import Problem
from ..configs import Choice
from ..epilogue import Epilogue, EpilogueArgs
from ..verify import compare, reference, tolerance
from .timing import sets_for, timer_profiles

MAX_INPUT_BYTES = 4 * 2**30


def make_operand(rows: int, cols: int, layout: str, aligned: bool, dtype: torch.dtype,
                 device: str, gen: torch.Generator | None = None) -> torch.Tensor:
    """A random (rows, cols) operand with the given layout and alignment."""
    def randn(n: int) -> torch.Tensor:
        return torch.randn(n, generator=gen, dtype=torch.float32, device=device).to(dtype)

    # Unaligned: shift the data pointer by one element (2 or 4 bytes), which
    # breaks 16-byte alignment whatever the strides are.
    off = 0 if aligned else 1
    if layout == "row":
        return randn(rows * cols + off)[off:].view(rows, cols)
    if layout == "col":
        return randn(rows * cols + off)[off:].view(cols, rows).t()
    return randn(rows * cols * 2 + off)[off:].view(rows, cols * 2)[:, ::2]


def make_inputs(problem: Problem, device: str, n_sets: int, seed: int):
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    dt = problem.torch_dtype
    return [(make_operand(problem.m, problem.k, problem.layout_a, problem.aligned_a, dt, device, gen),
             make_operand(problem.k, problem.n, problem.layout_b, problem.aligned_b, dt, device, gen))
            for _ in range(n_sets)]


def make_bias(problem: Problem, device: str, seed: int) -> torch.Tensor | None:
    """An addmm problem's bias: (N,) of the output's dtype; None for mm.

    Scaled to the product's size: with unit-normal operands an output element has rms
    sqrt(K), so a unit bias would be 1/sqrt(K) of it, and a kernel that dropped or
    misplaced the bias would pass a bf16 tolerance (1e-2) from K = 10^4 on."""
    if problem.op != "addmm":
        return None
    gen = torch.Generator(device=device)
    gen.manual_seed(seed + 7919)  # not the operands' stream: a bias is no copy of A's first row
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
        self.timing = False  # whether the prepared inputs are the full timing set
        self.inputs: list = []
        self.outs: list = []
        self.ref: torch.Tensor | None = None
        self.epilogue: EpilogueArgs | None = None  # an addmm problem's bias, fused
        self.l2 = DeviceInfo.from_torch().l2_bytes if self.device == "cuda" else 0
        # Fastest full measurement per problem key in this worker: the reference of a
        # timer's early cut (timing.should_cut), for timers that have one.
        self.best_ms: dict[str, float] = {}

    def prepare(self, problem: Problem, seed: int, timing: bool = True) -> None:
        """Inputs for ``problem``. For timing: enough sets to exceed L2, one output per set
        and the fp64 reference. Without (compile-only): one set and one output, so the
        parallel compile workers neither fill GPU memory nor compute references."""
        if self.key == problem.key and (self.timing or not timing):
            return
        self.inputs, self.outs, self.ref, self.epilogue = [], [], None, None
        if self.device == "cuda":
            torch.cuda.empty_cache()
        bytes_per_set = problem.min_bytes
        n = sets_for(bytes_per_set, self.l2) if self.device == "cuda" and timing else 1
        n = max(1, min(n, MAX_INPUT_BYTES // max(bytes_per_set, 1)))
        self.inputs = make_inputs(problem, self.device, n, seed)
        self.outs = [torch.empty(problem.m, problem.n, dtype=problem.torch_out_dtype, device=self.device)
                     for _ in range(n)]
        # One bias for every input set: it is N elements, so the sets' L2-cold rotation is
        # the operands' business.
        bias = make_bias(problem, self.device, seed)
        self.epilogue = epilogue_for(bias)
        if timing:
            a, b = self.inputs[0]
            self.ref = reference(a, b, bias)
        self.key, self.timing = problem.key, timing


def _run(choice: Choice, problem: Problem, state: WorkerState, i: int) -> None:
    a, b = state.inputs[i]
    kernels.run_choice(choice, a, b, state.outs[i], allow_tf32=problem.allow_tf32,
                       workspace=state.workspace, epilogue=state.epilogue)


def classify_exception(e: BaseException) -> str:
    """compile_error for resource/compilation failures, error for anything else."""
    name = type(e).__name__
    text = f"{name}: {e}"
    if any(s in text for s in ("OutOfResources", "out of resource", "CompilationError",
                               "PassManager", "MLIR", "ptxas")):
        return "compile_error"
    return "error"


def _timer(task: dict, state: WorkerState):
    """The timer the task names (its "timer" profile), else the state's own."""
    name = task.get("timer")
    if name is None:
        return state.timer
    if name not in state.timers:
        raise ValueError(f"unknown timer profile {name!r}; this worker has {', '.join(map(repr, state.timers))}")
    return state.timers[name]


def handle(op: str, task: dict, state: WorkerState) -> dict:
    """Run one task. ``op`` is 'bench' (verify, then time) or 'compile' (run once)."""
    problem = Problem.from_key(task["problem"])
    try:
        timer = _timer(task, state) if op != "compile" else None
        choice = Choice.parse(task["choice"])
        kernels.get(choice.family).validate(problem.padded() if choice.pad else problem, choice.config)
        if op == "compile" and not choice.needs_compile:
            return {"status": "ok"}  # cuBLAS: nothing to compile
        state.prepare(problem, int(task.get("seed", 0)), timing=op != "compile")
        if problem.m == 0 or problem.n == 0 or problem.k == 0:
            return {"status": "skipped", "reason": "empty problem: nothing to time"}
        if op == "compile":
            # Compile without running (kernels.tiled.compile_only): a compile worker must not
            # put work on the GPU while the benchmark worker times another kernel there.
            from ..kernels.tiled import compile_only

            with compile_only():
                _run(choice, problem, state, 0)
            if state.device == "cuda":
                torch.cuda.synchronize()
            return {"status": "ok"}
        # Verify first on poisoned outputs, so unwritten elements show as NaN.
        state.outs[0].fill_(math.nan)
        _run(choice, problem, state, 0)
        if state.device == "cuda":
            torch.cuda.synchronize()
        a, b = state.inputs[0]

        result = compare(state.outs[0], state.ref, tolerance(problem))
        if not result.ok:
            return {"status": "wrong", "rel_err": result.rel_err, "reason": result.reason}
        run = lambda i: _run(choice, problem, state, i)  # noqa: E731
        if getattr(timer, "cut_factor", None):
            t = timer.measure(run, len(state.inputs), best_ms=state.best_ms.get(problem.key))
        else:
            t = timer.measure(run, len(state.inputs))
        if t.repeats > 1 and math.isfinite(t.device_ms):
            state.best_ms[problem.key] = min(t.device_ms, state.best_ms.get(problem.key, math.inf))
        return {"status": "ok", "device_ms": t.device_ms,
                "eager_ms": t.eager_ms if math.isfinite(t.eager_ms) else None,
                "rel_err": result.rel_err, "repeats": t.repeats, "spread": t.spread,
                "representative": t.representative,
                "reason": "" if t.representative else "CPU interpreter: timing not representative"}
    except Exception as e:  # failures are data: the worker survives and reports
        tb = traceback.format_exc(limit=3)
        return {"status": classify_exception(e), "reason": f"{type(e).__name__}: {e}"[:2000],
                "traceback": tb[-2000:]}


def info(state: WorkerState) -> dict:
    import triton

    import gemmtune
    from ..api import interpreter_enabled

    if state.device == "cuda":
        dev = DeviceInfo.from_torch()
        name, cap, facts = dev.name, dev.capability_str, dev.to_dict()
    else:
        name, cap, facts = "cpu (Triton interpreter)", "interp", None
    return {"device_name": name, "capability": cap, "device": facts, "torch": torch.__version__,
            "triton": triton.__version__, "gemmtune": gemmtune.__version__,
            "interpreter": interpreter_enabled(), "representative": state.timer.representative}
