"""Interleaved timing: every method's launch captured once, then timed together in rounds whose
order rotates (``round_robin``), the rounds combined into one entry (``aggregate``)."""

from __future__ import annotations

import copy
import math
import statistics
from typing import Callable, Sequence


from ..problem import Problem
from .records import failure_record
from .timing import CudaGraphTimer, Timing, side_stream, summarize

ROUNDS = 4                # interleaved timing rounds per shape (each replays ceil(repeats / ROUNDS) times)


def timer_count(timer) -> int:
    """How many samples one measurement of ``timer`` takes (CudaGraphTimer: replays; WallTimer: repeats)."""
    for attr in ("replays", "repeats"):
        if isinstance(getattr(timer, attr, None), int):
            return getattr(timer, attr)
    raise TypeError(f"{type(timer).__name__} has neither 'replays' nor 'repeats'")


def rotation(names: Sequence[str], rounds: int) -> list[list[str]]:
    """The order of each round: round r starts at entry floor(r * n / rounds) and wraps around,
    so over the rounds every entry runs early and late.

    >>> rotation(["a", "b", "c", "d"], 2)
    [['a', 'b', 'c', 'd'], ['c', 'd', 'a', 'b']]
    """
    n = len(names)
    return [[names[(r * n // rounds + i) % n] for i in range(n)] for r in range(rounds)] if n else []


def round_robin(entries: dict[str, Callable[[int], Timing]], repeats: int,
                rounds: int = ROUNDS) -> dict[str, list[Timing] | BaseException]:
    """Time every entry in ``rounds`` interleaved rounds (fewer when ``repeats`` is smaller),
    ``ceil(repeats / rounds)`` samples per entry per round, in ``rotation`` order.

    ``entries``: name -> thunk, ``thunk(samples)`` -> the Timing of one round of that many
    samples. Returns name -> the Timing of each round, or the exception that ended that
    entry (it then leaves the later rounds; the others go on).
    """
    repeats = max(1, repeats)
    rounds = max(1, min(rounds, repeats))
    per = -(-repeats // rounds)
    out: dict[str, list[Timing] | BaseException] = {name: [] for name in entries}
    for order in rotation(list(entries), rounds):
        for name in order:
            if isinstance(out[name], BaseException):
                continue
            try:
                out[name].append(entries[name](per))
            except Exception as e:  # one failing kernel must not cost the others their times
                out[name] = e
    return out


def aggregate(timings: Sequence[Timing]) -> dict:
    """One kernel-time entry from the rounds of one method.

    ``ms``: the median of the round medians. ``spread``: the larger of the median
    within-round spread (relative IQR) and the across-round range (max - min of the round
    medians) / ``ms``: a difference smaller than either is noise, whether from the samples
    of one round or from drift between rounds. ``repeats``: samples in all; ``rounds``,
    ``round_ms``, ``round_spread``: per round, in time order.

    >>> from gemmtune.bench.timing import Timing
    >>> k = aggregate([Timing(1.0, 0, 5, 0.01), Timing(1.2, 0, 5, 0.03), Timing(1.1, 0, 5, 0.02)])
    >>> k["ms"], k["repeats"], round(k["spread"], 12)
    (1.1, 15, 0.181818181818)
    """
    meds = [t.device_ms for t in timings]
    ms = statistics.median(meds)
    within = statistics.median(t.spread for t in timings)
    across = (max(meds) - min(meds)) / ms if ms > 0 else 0.0
    return {"ms": ms, "spread": max(within, across), "repeats": sum(t.repeats for t in timings),
            "rounds": len(timings), "round_ms": meds, "round_spread": [t.spread for t in timings],
            "within_spread": within, "across_spread": across}


class _GraphEntry:
    """One launch captured once in a CUDA graph, replayed in rounds: CudaGraphTimer.measure
    split in two (same settings: warm-up, a graph of ~target ms that cycles through the input
    sets, samples = replay time / launches), so capturing happens once per method, not once
    per round. A round is one untimed replay (the kernel runs right before it is timed,
    whatever ran before) and ``samples`` timed ones."""

    def __init__(self, timer: CudaGraphTimer, launch: Callable[[int], object], n_sets: int):
        self.timer, self.launch = timer, launch
        self.graph, self.launches = timer.capture(launch, n_sets, stream=side_stream())

    def __call__(self, samples: int) -> Timing:
        self.graph.replay()
        med, spread = summarize(self.timer.replay_ms(self.graph, self.launches, samples))
        return Timing(med, math.nan, samples, spread, True)

    def eager_ms(self) -> float:
        return self.timer.eager_ms(self.launch)

    def close(self) -> None:
        self.graph = None


class _TimerEntry:
    """Any other timer (WallTimer on a CPU, a test's fake): each round is one measurement of a
    copy of the timer set to ``samples``; eager time is the first round's."""

    def __init__(self, timer, launch: Callable[[int], object], n_sets: int):
        self.timer, self.launch, self.n_sets = timer, launch, n_sets
        self.first: Timing | None = None

    def __call__(self, samples: int) -> Timing:
        t = copy.copy(self.timer)
        setattr(t, "replays" if isinstance(getattr(t, "replays", None), int) else "repeats", samples)
        timing = t.measure(self.launch, self.n_sets)
        self.first = self.first or timing
        return timing

    def eager_ms(self) -> float | None:
        return self.first.eager_ms if self.first else None

    def close(self) -> None:
        pass


def make_entry(timer, launch: Callable[[int], object], n_sets: int):
    """The round thunk of one launch for ``timer`` (see round_robin); ``.eager_ms()`` and ``.close()``."""
    if isinstance(timer, CudaGraphTimer):
        return _GraphEntry(timer, launch, n_sets)
    return _TimerEntry(timer, launch, n_sets)


def verified_launch(problem: Problem, choice: str, state, seed: int) -> tuple[dict, Callable[[int], object] | None]:
    """Check ``choice`` on ``problem`` against the fp64 reference (bench.measure.verify, as the
    tuner does) and return (its result dict, launch(i) on input set i), launch None when it failed."""
    from .measure import verify

    m, launch = verify(problem, choice, state, seed)
    return m.to_dict(), launch


def runoff(problem: Problem, choices: Sequence[str], timer, state, seed: int = 0, rounds: int = ROUNDS) -> dict:
    """A worker's 'runoff' task: ``choices`` of ``problem`` verified again (``verified_launch``),
    then timed together in ``rounds`` interleaved rounds (``round_robin``, rotating order; each
    entry's graph captured once), as ``gemmtune bench`` times its methods.

    Returns {"status": "ok", "choices": {choice: aggregate() entry, or its failure dict}}. The
    tuner's sweep times each candidate alone, one after another, so a close call between two
    of them can turn on when each ran (tuning.runoff)."""
    entries, out = {}, {}
    try:
        for c in dict.fromkeys(choices):
            res, launch = verified_launch(problem, c, state, seed)
            if launch is None:
                out[c] = res
            else:
                entries[c] = make_entry(timer, launch, len(state.inputs))
        timed = round_robin(entries, timer_count(timer), rounds)
        for c, t in timed.items():
            out[c] = failure_record(t) if isinstance(t, BaseException) else {"status": "ok", **aggregate(t)}
    finally:
        for e in entries.values():
            e.close()
    return {"status": "ok", "choices": out}
