"""What a worker process does with one task: a thin JSON adapter over measure.py.

A task is a JSON-able dict: ``{"problem": <Problem.key>, "choice": <Choice.id>,
"seed": int}``, optionally with ``"timer": <profile name>`` (timing.TIMINGS; the
state's own timer when absent). ``handle(op, task, state)`` returns
``Measurement.to_dict()``: ``status`` (a measure.Status value), ``device_ms``,
``eager_ms``, ``rel_err``, ``repeats``, ``spread``, ``reason``. Crashes and hangs are
not seen here: the pool observes them from outside (workers.py).
"""

from __future__ import annotations

import torch

from ..device import DeviceInfo
from ..problem import Problem
from .measure import (  # noqa: F401  (re-exported: this module's names before measure.py)
    BIAS,
    MAX_INPUT_BYTES,
    Measurement,
    Status,
    WorkerState,
    classify_exception,
    compile_choice,
    failure,
    precompile,
    warm,
    epilogue_for,
    make_bias,
    make_inputs,
    make_operand,
    measure,
)


def _timer(task: dict, state: WorkerState):
    """The timer the task names (its "timer" profile), else the state's own."""
    name = task.get("timer")
    if name is None:
        return state.timer
    if name not in state.timers:
        raise ValueError(f"unknown timer profile {name!r}; this worker has {', '.join(map(repr, state.timers))}")
    return state.timers[name]


def prewarm(state: WorkerState) -> float:
    """Pay Triton's once-per-process costs now, in a worker that just reported its device and
    waits for the tuner to plan: the NVIDIA driver's start (on an empty cache it builds its C
    helper module with the host compiler) and the hash of Triton's own sources that keys its
    cache. Profiled in a cold one-shape tune on an H100 (2026-11-26,
    benchmarks/results/2026-11-26-h100-cold-start): 0.47 s and 0.41 s on the first candidate's
    clock, while the tuner's planning took 0.5-0.9 s. Seconds spent; 0 off the GPU. A failure
    here is left to the first compile, which reports it as that candidate's error."""
    if state.device != "cuda":
        return 0.0
    import time
    t0 = time.perf_counter()
    try:
        from triton.runtime.cache import triton_key
        from triton.runtime.driver import driver
        driver.active.get_current_target()
        triton_key()
    except Exception:  # noqa: BLE001 - an optimisation only: see the docstring
        pass
    return time.perf_counter() - t0


def handle(op: str, task: dict, state: WorkerState) -> dict:
    """Run one task. ``op`` is 'bench' (verify, then time), 'compile' (compile only), 'runoff'
    (``task["choices"]`` verified and timed together in interleaved rounds: bench.rounds.runoff)
    or 'precompile' (``task["choices"]`` compiled together on threads, ahead of their 'bench'
    tasks: measure.precompile), or 'warm' (a worker's first-use costs paid on ``task["problem"]``
    before a warm server's first client: measure.warm)."""
    problem = Problem.from_key(task["problem"])
    try:
        seed = int(task.get("seed", 0))
        if op not in ("bench", "compile", "runoff", "precompile", "warm"):
            raise ValueError(f"unknown op {op!r}: this worker takes 'bench', 'compile', 'runoff', "
                             "'precompile' and 'warm'")
        choice = task["choices"] if op in ("runoff", "precompile") else None if op == "warm" else task["choice"]
        timer = _timer(task, state) if op not in ("compile", "precompile", "warm") else None
    except Exception as e:  # failures are data: the worker survives and reports
        return failure(e).to_dict()
    if op == "warm":
        return warm(problem, state, seed)
    if op == "precompile":
        try:
            return precompile(problem, [str(c) for c in choice], state, seed)
        except Exception as e:  # failures are data
            return failure(e).to_dict()
    if op == "compile":
        return compile_choice(problem, choice, state, seed).to_dict()
    if op == "runoff":
        from .rounds import runoff
        try:
            return runoff(problem, [str(c) for c in choice], timer, state, seed)
        except Exception as e:  # failures are data
            return failure(e).to_dict()
    return measure(problem, choice, timer, state=state, seed=seed).to_dict()


def info(state: WorkerState) -> dict:
    from ..api import interpreter_enabled

    return device_report(state.device, state.timer.representative, interpreter_enabled())


def device_report(device: str, representative: bool, interpreter: bool) -> dict:
    """What a worker on ``device`` ("cuda" or "cpu") says of itself: the run context's facts
    (tuning.tuner.context_of), the device's (None on the CPU) and whether its timings stand for a
    GPU's. A pure function of this process's imports on the CPU, so a tuner that knows its worker
    would run the interpreter computes it without starting one (tuning.tuner.local_report)."""
    import triton

    import gemmtune

    if device == "cuda":
        dev = DeviceInfo.from_torch()
        name, cap, facts = dev.name, dev.capability_str, dev.to_dict()
    else:
        name, cap, facts = "cpu (Triton interpreter)", "interp", None
    return {"device_name": name, "capability": cap, "device": facts, "torch": torch.__version__,
            "triton": triton.__version__, "gemmtune": gemmtune.__version__,
            "interpreter": interpreter, "representative": representative}
