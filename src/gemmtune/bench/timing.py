"""Timers: device time (CUDA graphs, L2-cold, median) and eager per-call time.

A timer is an object passed to whatever measures, so tests can swap in a fake.
Its one method, ``measure(launch, n_sets)``, takes ``launch(i)``, which enqueues
the kernel on input set ``i``, and the number of input sets the caller made.

``CudaGraphTimer`` (GPU):
  * device time: one CUDA graph holds ``launches`` back-to-back launches that
    cycle through the input sets; the caller makes enough sets that together they
    exceed L2 (``sets_for``), so every launch reads its operands from HBM. Each
    replay is timed with CUDA events; the result is the median over replays of
    replay time / launches. Graph replay removes the CPU launch gaps that would
    otherwise dominate microsecond kernels.
  * eager time: ``eager_calls`` back-to-back Python calls on one set, synchronised
    at the end, over wall-clock: what a caller pays per call, launch overhead
    included. Reported separately, never mixed with device time.
  * spread: (p75 - p25) / median of the replays, stored so that reports can call
    differences within the spread a tie.

``WallTimer`` (CPU / Triton interpreter): host wall-clock medians. Its numbers
are labelled not representative: they time numpy, not a GPU.

Timing profiles (``TIMINGS``, ``timer_profiles``): named timer settings a task
picks by name (``tune(timing=...)`` puts ``"timer": name`` in each worker task).
``standard`` is the timers' defaults (20 replays of ~2 ms graphs, up to 256
launches, 20 eager calls), with an early cut at 10x (``STANDARD_CUT``, below). ``quick`` is for bulk data collection: 5 replays of
~1 ms graphs, up to 64 launches, 3 eager calls, 1 warm-up -- still L2-cold with
rotating input sets, still median + spread, and the runner still verifies
against fp64 before timing. Each row stores its ``repeats`` (the replay count),
so rows of either profile say how many samples their median came from. ``quick``
also cuts early: a kernel whose warm-up pass is already more than 3x the fastest
time measured on its problem so far (in this worker) is recorded from that one
pass (``repeats`` 1, no eager time) instead of graph replays; such kernels are
far from every ranking's top, and on long-K shapes they are most of the time.
The cut only trusts a pass the GPU was busy for: when issuing the launches took
the host at least half the pass's time per launch, the pass timed Python, not the
kernel, and the kernel is measured in full. (Before 2026-11-23 the cut lacked that
check: on problems whose best kernel takes ~10 us, a Triton call's 68-134 us of host
time (H200 collection, eager calls on small problems) made every Triton candidate
look > 3x slower, and they were stored with the launch time; collect.py
--drop-launch-bound removes such rows.)
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class Timing:
    device_ms: float
    eager_ms: float
    repeats: int
    spread: float
    representative: bool = True


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(samples: list[float]) -> tuple[float, float]:
    """(median, relative inter-quartile spread) of the samples."""
    med = statistics.median(samples)
    spread = (_quantile(samples, 0.75) - _quantile(samples, 0.25)) / med if med > 0 else 0.0
    return med, spread


# A one-pass estimate is kernel time only when the GPU, not the host, was the bottleneck:
# the host must have issued each launch in at most 1/GPU_BOUND of the per-launch time.
GPU_BOUND = 2.0


def should_cut(est_ms: float, best_ms: float | None, factor: float | None, issue_ms: float = 0.0) -> bool:
    """Whether a kernel measured at ``est_ms`` (one event-timed pass, per launch) is
    hopeless next to the best so far. ``issue_ms``: the host's time to issue one launch
    in that pass; a pass not at least ``GPU_BOUND`` times longer was launch-bound (the GPU
    waited for Python), so it says nothing about the kernel and never cuts.

    >>> should_cut(4.0, 1.0, 3.0), should_cut(2.0, 1.0, 3.0), should_cut(9.0, None, 3.0), should_cut(9.0, 1.0, None)
    (True, False, False, False)
    >>> should_cut(0.09, 0.01, 3.0, issue_ms=0.08), should_cut(0.5, 0.01, 3.0, issue_ms=0.08)
    (False, True)
    """
    return bool(factor and best_ms and best_ms > 0 and est_ms > factor * best_ms
                and est_ms >= GPU_BOUND * issue_ms)


_SIDE_STREAMS: dict[int, "torch.cuda.Stream"] = {}


def side_stream() -> "torch.cuda.Stream":
    """One side stream per GPU for every capture of this process. A kernel's scratch is kept
    per stream (kernels.splitk.SplitKWorkspace), so a new stream per capture would give each
    capture its own workspace, up to 256 MB each."""
    index = torch.cuda.current_device()
    if index not in _SIDE_STREAMS:
        _SIDE_STREAMS[index] = torch.cuda.Stream()
    return _SIDE_STREAMS[index]


def sets_for(bytes_per_set: int, l2_bytes: int, max_sets: int = 64) -> int:
    """Input sets needed so that cycling through them exceeds twice the L2 size."""
    if bytes_per_set <= 0:
        return 1
    need = -(-2 * max(l2_bytes, 1) // bytes_per_set)
    return int(max(1, min(max_sets, need)))


def wall_ms_per_call(launch: Callable[[int], object], calls: int, warmup: int = 0) -> float:
    """Wall ms per call over ``calls`` back-to-back calls of ``launch(0)`` (input set 0), after
    ``warmup`` untimed ones, synchronized at both ends where there is a GPU: the eager time, host
    overhead and launch included.

    >>> wall_ms_per_call(lambda i: None, 3, warmup=1) >= 0
    True
    """
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        launch(0)
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        launch(0)
    sync()
    return (time.perf_counter() - t0) * 1e3 / calls


class CudaGraphTimer:
    """L2-cold device time from CUDA-graph replays, plus eager per-call time."""

    representative = True

    def __init__(self, *, replays: int = 20, target_ms_per_replay: float = 2.0,
                 max_launches: int = 256, eager_calls: int = 20, warmup: int = 2,
                 cut_factor: float | None = None):
        self.replays = replays
        self.target_ms = target_ms_per_replay
        self.max_launches = max_launches
        self.eager_calls = eager_calls
        self.warmup = warmup
        # Early cut (bulk collection only): a kernel already this many times slower than
        # the best of its problem so far gets the one pass that sizes the graph as its time.
        self.cut_factor = cut_factor

    def measure(self, launch: Callable[[int], None], n_sets: int, best_ms: float | None = None) -> Timing:
        """``best_ms``: the fastest time measured on this problem so far, for the early cut
        (``cut_factor``); ignored without one."""
        est, issue = self.estimate_pass(launch, n_sets)
        if should_cut(est, best_ms, self.cut_factor, issue):
            # One event-timed pass over every input set (L2-cold, launch gaps included,
            # which a kernel this slow hides): 1 repeat, no spread, no eager time.
            return Timing(est, math.nan, 1, 0.0, True)
        graph, launches = self.capture(launch, n_sets, est=est)
        samples = self.replay_ms(graph, launches, self.replays)
        del graph
        med, spread = summarize(samples)
        return Timing(med, self.eager_ms(launch), self.replays, spread, True)

    def estimate(self, launch: Callable[[int], None], n_sets: int) -> float:
        """Warm-up, then ms per launch over one event-timed pass through every input set."""
        return self.estimate_pass(launch, n_sets)[0]

    def estimate_pass(self, launch: Callable[[int], None], n_sets: int) -> tuple[float, float]:
        """(ms per launch on the device, ms per launch on the host) of one pass through
        every input set, after the warm-up.

        One launch is enqueued before the start event, so the device is already busy
        when the timed launches arrive: a kernel slower than its launch is timed without
        the host's issue latency of the first launch (which, on a one-set problem, used to
        be counted in full). The host time says whether the pass was launch-bound."""
        # Warm-up outside the graph: compilation, module load, workspace allocation.
        for i in range(max(self.warmup, 1)):
            launch(i % n_sets)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        launch(n_sets - 1)  # untimed: keeps the device busy while the first timed launch is issued
        start.record()
        t0 = time.perf_counter()
        for i in range(n_sets):
            launch(i)
        issue_ms = (time.perf_counter() - t0) * 1e3 / n_sets
        end.record()
        end.synchronize()
        return max(start.elapsed_time(end) / n_sets, 1e-4), issue_ms

    def capture(self, launch: Callable[[int], None], n_sets: int,
                stream: torch.cuda.Stream | None = None, est: float | None = None
                ) -> tuple[torch.cuda.CUDAGraph, int]:
        """(graph, launches per replay): warm-up, then one CUDA graph of a few ms of launches
        cycling through the input sets, captured on ``stream`` (default: ``side_stream()``)
        and replayed once. ``est``: the per-launch ms ``estimate`` already measured."""
        # Size the graph from the per-launch time: a few ms per replay, at least one pass
        # over every input set.
        if est is None:
            est = self.estimate(launch, n_sets)
        launches = int(min(self.max_launches, max(n_sets, self.target_ms / est)))
        launches = max(n_sets, launches - launches % n_sets) if launches >= n_sets else n_sets

        stream = stream if stream is not None else side_stream()
        stream.wait_stream(torch.cuda.current_stream())
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream):
            launch(0)  # one launch on the side stream before capture, as torch asks
            stream.synchronize()
            with torch.cuda.graph(graph, stream=stream):
                for i in range(launches):
                    launch(i % n_sets)
        torch.cuda.current_stream().wait_stream(stream)
        graph.replay()
        torch.cuda.synchronize()
        return graph, launches

    @staticmethod
    def replay_ms(graph: torch.cuda.CUDAGraph, launches: int, n: int) -> list[float]:
        """``n`` timed replays of ``graph``, each as ms per launch."""
        samples = []
        for _ in range(n):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            graph.replay()
            e.record()
            e.synchronize()
            samples.append(s.elapsed_time(e) / launches)
        return samples

    def eager_ms(self, launch: Callable[[int], None]) -> float:
        """Wall ms per call over ``eager_calls`` back-to-back calls on input set 0."""
        return wall_ms_per_call(launch, self.eager_calls)


class WallTimer:
    """Host wall-clock timing, for the CPU interpreter: not representative of a GPU."""

    representative = False

    def __init__(self, *, repeats: int = 3, warmup: int = 1):
        self.repeats = repeats
        self.warmup = warmup

    def measure(self, launch: Callable[[int], None], n_sets: int) -> Timing:
        for i in range(self.warmup):
            launch(i % n_sets)
        samples = []
        for i in range(self.repeats):
            t0 = time.perf_counter()
            launch(i % n_sets)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            samples.append((time.perf_counter() - t0) * 1e3)
        med, spread = summarize(samples)
        return Timing(med, med, self.repeats, spread, False)


def default_timer():
    return CudaGraphTimer() if torch.cuda.is_available() else WallTimer()


# Timing profile names, in the order they are documented (tune(timing=...)).
TIMINGS = ("standard", "quick")
# The quick profile's settings, kept here so tests and reports can name them.
QUICK_CUDA = {"replays": 5, "target_ms_per_replay": 1.0, "max_launches": 64, "eager_calls": 3, "warmup": 1,
              "cut_factor": 3.0}
QUICK_WALL = {"repeats": 2, "warmup": 1}
# The standard profile cuts too, but only kernels already 10x slower than the best so far: no
# ranking or pick needs their exact time, and timing them in full cost minutes on shapes where most
# of a space is hopeless. H100, 2026-11-27, the default tune of 2 x 2 x 1,000,003 bf16 (an edge shape
# nobody tuned for): cuBLAS took 0.074 ms, the single-K-slice triton_mm/triton_static tiles 11.6-31.6 ms
# each, and their full timing (20 replays of graphs sized to at least one pass over 13 input
# sets) 5-15 s each: 25 candidates in 150 s (benchmarks/results/2026-11-27-h100-s18, section 2).
STANDARD_CUT = 10.0


def timer_profiles(cuda: bool | None = None) -> dict:
    """Fresh timer objects by profile name (every name of ``TIMINGS``).

    ``cuda``: CUDA-graph timers when true, host wall-clock timers (CPU interpreter)
    when false; default: whether a GPU is visible."""
    if cuda is None:
        cuda = torch.cuda.is_available()
    if cuda:
        return {"standard": CudaGraphTimer(cut_factor=STANDARD_CUT), "quick": CudaGraphTimer(**QUICK_CUDA)}
    return {"standard": WallTimer(), "quick": WallTimer(**QUICK_WALL)}
