"""The timers' arithmetic (summarize, sets_for), WallTimer's calling pattern, and
CudaGraphTimer on a real GPU (skipped without CUDA)."""

from __future__ import annotations

import math
import time

import pytest
import torch

from gemmtune.bench.timing import (CudaGraphTimer, Timing, WallTimer, default_timer, sets_for, should_cut,
                                   summarize)

MB = 2**20


# ------------------------------------------------------------------ summarize
@pytest.mark.parametrize("samples, median, spread", [
    # odd count: median is the middle one; q25 = 2, q75 = 4 (linear interpolation)
    ([1.0, 2.0, 3.0, 4.0, 5.0], 3.0, (4.0 - 2.0) / 3.0),
    # order must not matter
    ([5.0, 1.0, 4.0, 2.0, 3.0], 3.0, (4.0 - 2.0) / 3.0),
    # even count: median 2.5; q25 at position 0.75 -> 1.75, q75 at 2.25 -> 3.25
    ([4.0, 3.0, 2.0, 1.0], 2.5, (3.25 - 1.75) / 2.5),
    # identical samples: no spread
    ([7.0, 7.0, 7.0], 7.0, 0.0),
    # a single sample
    ([0.5], 0.5, 0.0),
    # an outlier moves neither the median nor (much) the IQR: q25 = 1.0, q75 = 1.2
    ([1.0, 1.0, 1.1, 1.2, 100.0], 1.1, (1.2 - 1.0) / 1.1),
])
def test_summarize_exact(samples, median, spread):
    med, spr = summarize(samples)
    assert med == pytest.approx(median, rel=1e-12)
    assert spr == pytest.approx(spread, rel=1e-12, abs=1e-15)


def test_summarize_zero_median_has_zero_spread():
    # No division by zero: a zero median reports no spread.
    assert summarize([0.0, 0.0, 0.0]) == (0.0, 0.0)


def test_summarize_does_not_reorder_its_input():
    xs = [3.0, 1.0, 2.0]
    summarize(xs)
    assert xs == [3.0, 1.0, 2.0]


# ------------------------------------------------------------------ sets_for
@pytest.mark.parametrize("bytes_per_set, l2, max_sets, expected", [
    (10 * MB, 50 * MB, 64, 10),      # 10 sets x 10 MB = 100 MB = twice the L2
    (30 * MB, 50 * MB, 64, 4),       # ceil(100 / 30) = 4: rounding up, never down
    (3, 10, 64, 7),                  # ceil(20 / 3)
    (20, 10, 64, 1),                 # one set already exceeds twice the L2
    (4 * 2**30, 50 * MB, 64, 1),     # a huge set: one is enough
    (1 * MB, 50 * MB, 64, 64),       # 100 would be needed: capped at max_sets
    (1 * MB, 50 * MB, 8, 8),         # a smaller cap
    (1, 50 * MB, 64, 64),
    (0, 50 * MB, 64, 1),             # an empty problem: one set
    (-5, 50 * MB, 64, 1),
    (1 * MB, 0, 64, 1),              # no L2 known (CPU): one set
])
def test_sets_for(bytes_per_set, l2, max_sets, expected):
    n = sets_for(bytes_per_set, l2, max_sets=max_sets)
    assert n == expected
    assert isinstance(n, int)


def test_sets_for_exceeds_twice_l2_unless_capped():
    l2 = 50 * MB
    for b in (1, 1000, 777_777, 3 * MB, 17 * MB, 99 * MB, 101 * MB):
        n = sets_for(b, l2)
        assert 1 <= n <= 64
        if n < 64:
            assert n * b >= 2 * l2, (b, n)          # enough sets to flush the L2
            assert n == 1 or (n - 1) * b < 2 * l2, (b, n)  # and no more than needed


# ------------------------------------------------------------------ WallTimer
class _Launch:
    """A fake launch(i) that records its calls and takes a known minimum time."""

    def __init__(self, sleep_s: float = 0.0):
        self.calls: list[int] = []
        self.sleep_s = sleep_s

    def __call__(self, i: int) -> None:
        self.calls.append(i)
        if self.sleep_s:
            time.sleep(self.sleep_s)


def test_wall_timer_default_calls_and_labels():
    launch = _Launch(sleep_s=0.002)
    t = WallTimer().measure(launch, 3)
    # 1 warm-up, then 3 timed calls cycling through the 3 input sets.
    assert launch.calls == [0, 0, 1, 2]
    assert isinstance(t, Timing)
    assert t.repeats == 3
    assert t.representative is False
    assert WallTimer.representative is False
    # Each call slept 2 ms: the median is at least that (and not absurdly more).
    assert 2.0 <= t.device_ms < 2000.0
    assert t.eager_ms == t.device_ms  # host wall clock: one number for both
    assert t.spread >= 0.0 and math.isfinite(t.spread)


@pytest.mark.parametrize("repeats, warmup, n_sets, expected", [
    (5, 2, 2, [0, 1, 0, 1, 0, 1, 0]),
    (1, 0, 4, [0]),
    (4, 1, 1, [0, 0, 0, 0, 0]),
])
def test_wall_timer_call_pattern(repeats, warmup, n_sets, expected):
    launch = _Launch()
    t = WallTimer(repeats=repeats, warmup=warmup).measure(launch, n_sets)
    assert launch.calls == expected
    assert t.repeats == repeats
    assert all(0 <= i < n_sets for i in launch.calls)


def test_wall_timer_propagates_launch_errors():
    # The runner turns exceptions into result statuses; the timer must not swallow them.
    def boom(i):
        raise RuntimeError("kernel failed")

    with pytest.raises(RuntimeError, match="kernel failed"):
        WallTimer().measure(boom, 1)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-only expectation")
def test_default_timer_on_cpu_is_wall_timer():
    assert isinstance(default_timer(), WallTimer)


# ------------------------------------------------------------------ CudaGraphTimer (GPU)
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graph_timer_times_torch_mm():
    n_sets = 4
    ins = [(torch.randn(512, 512, device="cuda", dtype=torch.bfloat16),
            torch.randn(512, 512, device="cuda", dtype=torch.bfloat16)) for _ in range(n_sets)]
    outs = [torch.empty(512, 512, device="cuda", dtype=torch.bfloat16) for _ in range(n_sets)]
    seen: set[int] = set()

    def launch(i):
        seen.add(i)
        torch.mm(*ins[i], out=outs[i])

    timer = CudaGraphTimer(replays=5)
    t = timer.measure(launch, n_sets)
    assert seen == set(range(n_sets))  # every input set is used
    assert t.representative is True
    assert t.repeats == 5
    assert 0 < t.device_ms < 100 and math.isfinite(t.device_ms)
    assert 0 < t.eager_ms < 1000 and math.isfinite(t.eager_ms)
    assert t.spread >= 0 and math.isfinite(t.spread)
    ref = ins[0][0].double() @ ins[0][1].double()
    torch.testing.assert_close(outs[0].double(), ref, rtol=2e-2, atol=2e-1)


# ------------------------------------------------------------------ timing profiles
def test_timer_profiles_name_every_timing_and_quick_is_lighter():
    from gemmtune.bench.timing import QUICK_CUDA, QUICK_WALL, STANDARD_CUT, TIMINGS, timer_profiles

    assert TIMINGS == ("standard", "quick")
    gpu, cpu = timer_profiles(cuda=True), timer_profiles(cuda=False)  # building touches no GPU
    assert tuple(gpu) == tuple(cpu) == TIMINGS
    assert all(isinstance(t, CudaGraphTimer) for t in gpu.values())
    assert all(isinstance(t, WallTimer) for t in cpu.values())
    q, s = gpu["quick"], gpu["standard"]
    assert (q.replays, q.target_ms, q.max_launches, q.eager_calls, q.warmup) == (5, 1.0, 64, 3, 1)
    # Bulk collection cuts at 3x; tuning only what is already 10x slower than the best so far.
    assert q.cut_factor == 3.0 and s.cut_factor == STANDARD_CUT == 10.0
    assert q.replays == QUICK_CUDA["replays"]
    assert q.replays < s.replays and q.max_launches < s.max_launches and q.eager_calls < s.eager_calls
    assert cpu["quick"].repeats == QUICK_WALL["repeats"] < cpu["standard"].repeats
    assert timer_profiles(cuda=False) is not cpu and timer_profiles(cuda=False)["quick"] is not cpu["quick"]


class _FakeTimer:
    representative = False

    def __init__(self, repeats: int):
        self.repeats, self.calls = repeats, 0

    def measure(self, launch, n_sets):
        self.calls += 1
        launch(0)
        return Timing(1.0, 1.0, self.repeats, 0.0, False)


def test_runner_picks_the_timer_the_task_names():
    from gemmtune.bench.runner import WorkerState, handle
    from gemmtune.problem import Problem

    std, quick = _FakeTimer(20), _FakeTimer(5)
    state = WorkerState(device="cpu", timers={"standard": std, "quick": quick})
    assert state.timer is std
    task = {"problem": Problem.from_sizes(8, 8, 16, "fp32").key, "choice": "aten", "seed": 0}
    assert handle("bench", {**task, "timer": "quick"}, state)["repeats"] == 5
    assert (std.calls, quick.calls) == (0, 1)
    assert handle("bench", task, state)["repeats"] == 20           # no "timer": the state's own
    assert handle("bench", {**task, "timer": "standard"}, state)["repeats"] == 20
    assert (std.calls, quick.calls) == (2, 1)
    bad = handle("bench", {**task, "timer": "fastest"}, state)
    assert bad["status"] == "error" and "'fastest'" in bad["reason"] and "'quick'" in bad["reason"], bad
    assert handle("compile", {**task, "timer": "fastest"}, state)["status"] == "ok"  # compiling times nothing
    # A timer passed alone becomes the standard profile; the quick one is still there.
    solo = WorkerState(timer=std, device="cpu")
    assert solo.timer is std and solo.timers["standard"] is std and isinstance(solo.timers["quick"], WallTimer)


# ------------------------------------------------------------------ early cut (quick profile)
def test_should_cut_exact():
    assert should_cut(3.01, 1.0, 3.0) and not should_cut(3.0, 1.0, 3.0)  # strictly more than factor x best
    assert not should_cut(100.0, None, 3.0) and not should_cut(100.0, 0.0, 3.0)  # nothing measured yet
    assert not should_cut(100.0, 1.0, None) and not should_cut(100.0, 1.0, 0)    # no cut configured
    # A launch-bound pass (the host needed more than half of it to issue each launch) never cuts:
    # a 10 us kernel behind 80 us of Python launch overhead looked 9x the best before this rule.
    assert not should_cut(0.09, 0.01, 3.0, issue_ms=0.08)
    assert should_cut(0.16, 0.01, 3.0, issue_ms=0.08) and not should_cut(0.159, 0.01, 3.0, issue_ms=0.08)


class _PassTimer(CudaGraphTimer):
    """CudaGraphTimer's decision logic with the device work faked (runs on a CPU)."""

    def __init__(self, est_ms, issue_ms):
        super().__init__(replays=3, cut_factor=3.0, eager_calls=1)
        self.pass_ = (est_ms, issue_ms)
        self.captured = False

    def estimate_pass(self, launch, n_sets):
        return self.pass_

    def capture(self, launch, n_sets, stream=None, est=None):
        self.captured = True
        return None, 1

    @staticmethod
    def replay_ms(graph, launches, n):
        return [0.011, 0.010, 0.012]

    def eager_ms(self, launch):
        return 0.1


def test_measure_does_not_cut_a_launch_bound_pass():
    bound = _PassTimer(est_ms=0.09, issue_ms=0.08)  # the GPU waited for Python
    t = bound.measure(lambda i: None, 1, best_ms=0.01)
    assert bound.captured and t.repeats == 3 and t.device_ms == 0.011
    busy = _PassTimer(est_ms=0.5, issue_ms=0.08)  # the GPU was the bottleneck: a real 50x
    t = busy.measure(lambda i: None, 1, best_ms=0.01)
    assert not busy.captured and t.repeats == 1 and t.device_ms == 0.5 and math.isnan(t.eager_ms)


class _CuttingTimer:
    """A fake timer with an early cut: 'slow' launches come back cut (1 repeat, no eager)."""
    representative = True
    cut_factor = 3.0

    def __init__(self, times):
        self.times, self.seen_best = list(times), []

    def measure(self, launch, n_sets, best_ms=None):
        launch(0)
        ms = self.times.pop(0)
        self.seen_best.append(best_ms)
        if should_cut(ms, best_ms, self.cut_factor):
            return Timing(ms, math.nan, 1, 0.0, True)
        return Timing(ms, ms, 5, 0.01, True)


def test_runner_feeds_the_cut_its_best_so_far_per_problem():
    from gemmtune.bench.runner import WorkerState, handle
    from gemmtune.problem import Problem

    t = _CuttingTimer([2.0, 1.0, 9.0, 2.5, 7.0])
    state = WorkerState(device="cpu", timers={"standard": t})
    p, q = (Problem.from_sizes(8, 8, 16, "fp32").key, Problem.from_sizes(8, 8, 32, "fp32").key)
    res = [handle("bench", {"problem": key, "choice": "aten", "seed": 0}, state) for key in (p, p, p, p, q)]
    # Best so far per problem: none, 2.0, 1.0 (the cut 9.0 never becomes a best), 1.0; a new problem starts over.
    assert t.seen_best == [None, 2.0, 1.0, 1.0, None]
    assert [r["repeats"] for r in res] == [5, 5, 1, 5, 5]
    assert res[2]["status"] == "ok" and res[2]["device_ms"] == 9.0 and res[2]["eager_ms"] is None
    assert res[3]["eager_ms"] == 2.5 and state.best_ms == {p: 1.0, q: 7.0}
    # Timers without a cut are called as before (no best_ms keyword).
    assert handle("bench", {"problem": p, "choice": "aten", "seed": 0},
                  WorkerState(device="cpu", timers={"standard": _FakeTimer(20)}))["repeats"] == 20


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graph_timer_cuts_a_hopeless_kernel():
    # 4096^3 (~0.2 ms on an H100/H200): far longer than torch.mm's launch, so the pass is GPU-bound.
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    small = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    timer = CudaGraphTimer(replays=3, cut_factor=3.0)
    fast = timer.measure(lambda i: torch.mm(small, small), 1)
    assert fast.repeats == 3 and math.isfinite(fast.eager_ms)
    slow = timer.measure(lambda i: torch.mm(a, a), 1, best_ms=fast.device_ms)
    assert slow.repeats == 1 and math.isnan(slow.eager_ms) and slow.device_ms > 3 * fast.device_ms
    again = timer.measure(lambda i: torch.mm(a, a), 1, best_ms=None)  # no reference: measured in full
    assert again.repeats == 3


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graph_timer_does_not_cut_a_fast_kernel_behind_a_slow_launch():
    """A microsecond kernel whose launch costs the host 0.5 ms: the one-pass estimate is the
    host's time, not the kernel's, so the timer must measure it in full (graph replays
    hold only the device work) instead of storing 0.5 ms as its time."""
    import time

    small = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    timer = CudaGraphTimer(replays=3, cut_factor=3.0)
    fast = timer.measure(lambda i: torch.mm(small, small), 1)

    def slow_launch(i):
        time.sleep(0.0005)
        torch.mm(small, small)

    t = timer.measure(slow_launch, 1, best_ms=fast.device_ms)
    assert t.repeats == 3 and t.device_ms < 0.1, t


def test_timing_doctests():
    import doctest

    import gemmtune.bench.timing as timing

    assert doctest.testmod(timing).failed == 0
