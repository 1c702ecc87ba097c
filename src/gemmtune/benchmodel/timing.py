"""Timing a model call: rounds of back-to-back calls (CUDA events on a GPU), alone or interleaved
with the other modes so that drift does not favour one."""

from __future__ import annotations

import math
import statistics
import time
from typing import Callable

import torch

from .graphs import is_graph
from .models import MODES

EAGER_ROUNDS = 21       # interleaved rounds of eager against eager + patch, on a GPU
EAGER_ROUND_MS = 100.0  # ms per round, about


def _calls_per_round(fn: Callable[[], object], warmup: int, min_round_ms: float, sync: Callable[[], None]) -> int:
    """Calls per timed round: ``warmup`` untimed calls, then one timed call sizes a round to about
    ``min_round_ms`` (1 to 200 calls)."""
    for _ in range(warmup):
        fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return max(1, min(200, int(min_round_ms / max((time.perf_counter() - t0) * 1e3, 1e-3))))


def _stats(samples: list[float], calls: int) -> dict:
    """Median ms per call over the rounds, their relative range, the calls made, and the rounds'
    ms per call in order (``rounds``: what a paired comparison of interleaved rounds reads)."""
    med = statistics.median(samples)
    return {"ms": med, "spread": (max(samples) - min(samples)) / med if med else 0.0, "calls": calls,
            "rounds": list(samples)}


def median_ci(values: list[float], level: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval for the median of ``values``: the order statistics
    ``x(j)`` and ``x(n+1-j)`` for the largest ``j`` with P(Binomial(n, 1/2) < j) <= (1 - level) / 2.
    Nothing is assumed of the rounds' distribution (a host-bound step's is skewed by stalls). Below
    6 values no 95% interval exists; the full range is returned then (its coverage 1 - 2^(1-n)).

    >>> median_ci(list(range(1, 22)))   # 21 rounds: x(6)..x(16), 97.3% coverage
    (6, 16)
    >>> median_ci([3.0, 1.0, 2.0])
    (1.0, 3.0)
    """
    xs = sorted(values)
    n = len(xs)
    if not n:
        return float("nan"), float("nan")
    tail, cdf, j = (1.0 - level) / 2.0, 0.0, 0
    while j < n // 2:
        cdf += math.comb(n, j) / 2.0 ** n  # P(B = j), added: now P(B <= j) = P(B < j + 1)
        if cdf > tail:
            break
        j += 1
    return (xs[j - 1], xs[n - j]) if j else (xs[0], xs[-1])


def paired_ratio(base: list[float], other: list[float]) -> dict:
    """Per interleaved round, ``base`` ms over ``other`` ms (> 1: ``other`` is faster), summarised:
    the median ratio, its quartiles, and a 95% confidence interval of the median (``lo``, ``hi``:
    ``median_ci``). Adjacent rounds share the host's speed of the moment, so the ratio of a pair
    cancels the drift that widens each mode's own spread (un-graphed steps bound by Python on the
    H100 machine spread 12-59% within one mode in session 27). The interval is what says "slower":
    on the H200's Llama-1B decode b16 (session 32, 21 rounds) the quartiles of eager against
    itself were 0.937-1.026, so a 3% difference of medians was inside the method's noise."""
    ratios = sorted(b / o for b, o in zip(base, other) if o > 0)
    if not ratios:
        return {"median": float("nan"), "q1": float("nan"), "q3": float("nan"), "lo": float("nan"),
                "hi": float("nan"), "pairs": 0}
    q = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else [ratios[0]] * 3
    lo, hi = median_ci(ratios)
    return {"median": statistics.median(ratios), "q1": q[0], "q3": q[2], "lo": lo, "hi": hi, "pairs": len(ratios)}


def timer_name() -> str:
    """What ``time_call`` times with in this process, for the report's header (which claimed CUDA
    events on a CPU run too): the same test ``time_call`` makes."""
    return "CUDA events" if torch.cuda.is_available() else "the host's wall clock (time.perf_counter)"


def time_call(fn: Callable[[], object], *, rounds: int = 5, min_round_ms: float = 20.0,
              warmup: int = 3) -> dict:
    """Median ms per call over ``rounds`` rounds (CUDA events on a GPU, wall clock otherwise:
    ``timer_name`` says which)."""
    cuda = torch.cuda.is_available()
    n = _calls_per_round(fn, warmup, min_round_ms, torch.cuda.synchronize if cuda else (lambda: None))
    samples = []
    for _ in range(rounds):
        if cuda:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(n):
                fn()
            e.record()
            e.synchronize()
            samples.append(s.elapsed_time(e) / n)
        else:
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            samples.append((time.perf_counter() - t0) * 1e3 / n)
    return _stats(samples, n * rounds)


def time_interleaved(fns: dict[str, Callable[[], object]], *, rounds: int = 7, min_round_ms: float = 20.0,
                     warmup: int = 2) -> dict[str, dict]:
    """``time_call`` for several callables at once, their rounds interleaved (the order rotates per
    round), so that a drift of the host's speed, which decides a host-bound step's time, falls on
    all of them alike. Per name: median ms per call, spread, calls."""
    cuda = torch.cuda.is_available()
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    names = list(fns)
    per = {name: _calls_per_round(fns[name], warmup, min_round_ms, sync) for name in names}
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn, n = fns[name], per[name]
            sync()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            sync()
            samples[name].append((time.perf_counter() - t0) * 1e3 / n)
    return {name: _stats(samples[name], per[name] * rounds) for name in names}


def interleave_eager(out: dict, variants: dict, phases: dict[str, Callable], model_name: str,
                     log: Callable[[str], None], rounds: int | None = None) -> None:
    """eager against eager + patch, interleaved per phase (the verdict for 'never slower than
    eager': the separate per-mode timings are minutes apart, and a host-bound step's time drifts
    with the host's speed by up to 2x between device calls on the H200 machine). ``rounds``:
    interleaved rounds (default EAGER_ROUNDS on a GPU, 7 on a CPU); the median's confidence
    interval narrows as 1/sqrt(rounds)."""
    others = [m for m in ("eager_copy", "eager_patch", "eager_fuse", "eager_fuse_patch")
              if m in out["modes"] and m in variants]
    if "eager" not in out["modes"] or not others:
        return  # (variants may hold them as the base objects of graph modes, untimed)
    # On a GPU, EAGER_ROUNDS rounds of about EAGER_ROUND_MS each: a decode step of 15-30 ms made
    # rounds of one call each at 7 x 20 ms. On a CPU (tests) the short default.
    default_rounds, round_ms = (EAGER_ROUNDS, EAGER_ROUND_MS) if torch.cuda.is_available() else (7, 20.0)
    rounds = rounds or default_rounds
    for pname, run in phases.items():
        # "eager_again": the same model timed a second time in the same rounds, an A/A control. Its
        # paired ratio against eager is what the method cannot resolve (the host's drift within a
        # round, the order of the calls): on the H200's Llama-1B decode step two identical models
        # differed by up to 2.9% at the median (session 31), as much as the patched one did.
        with torch.no_grad():
            t = time_interleaved({m: (lambda m=m: run(variants["eager" if m == "eager_again" else m]))
                                  for m in ["eager", *others, "eager_again"]},
                                 rounds=rounds, min_round_ms=round_ms)
        if pname in out["modes"]["eager"].get("phases", {}):
            aa = paired_ratio(t["eager"]["rounds"], t["eager_again"]["rounds"])
            out["modes"]["eager"]["phases"][pname]["interleaved_aa"] = {
                "x_paired": aa["median"], "q1": aa["q1"], "q3": aa["q3"], "lo": aa["lo"], "hi": aa["hi"],
                "rounds": aa["pairs"]}
            log(f"{model_name} interleaved   {pname:16s} eager against itself (the resolution): paired rounds "
                f"{aa['median']:.3f}x (95% CI {aa['lo']:.3f}-{aa['hi']:.3f}), quartiles {aa['q1']:.3f}-{aa['q3']:.3f}")
        for mode in others:
            if pname not in out["modes"][mode].get("phases", {}):
                continue  # the mode failed or skipped this phase
            rec = out["modes"][mode]["phases"][pname]
            pair = paired_ratio(t["eager"]["rounds"], t[mode]["rounds"])
            rec["interleaved"] = {"eager_ms": t["eager"]["ms"], f"{mode}_ms": t[mode]["ms"],
                                  "spread": max(t["eager"]["spread"], t[mode]["spread"]),
                                  "x_eager": t["eager"]["ms"] / t[mode]["ms"],
                                  "x_eager_paired": pair["median"], "x_eager_q1": pair["q1"],
                                  "x_eager_q3": pair["q3"], "x_eager_lo": pair["lo"], "x_eager_hi": pair["hi"],
                                  "rounds": pair["pairs"],
                                  "calls_per_round": t["eager"]["calls"] // max(1, len(t["eager"]["rounds"]))}
            against_copy = ""
            if mode != "eager_copy" and "eager_copy" in t:
                # the same ratio against the deep-copy control: the patch (or fusion) alone
                cp = paired_ratio(t["eager_copy"]["rounds"], t[mode]["rounds"])
                rec["interleaved"].update(x_copy_paired=cp["median"], x_copy_lo=cp["lo"], x_copy_hi=cp["hi"])
                against_copy = f"; against eager_copy {cp['median']:.3f}x (95% CI {cp['lo']:.3f}-{cp['hi']:.3f})"
            log(f"{model_name} interleaved   {pname:16s} eager {t['eager']['ms']:.3f} ms, {mode} "
                f"{t[mode]['ms']:.3f} ms ({rec['interleaved']['x_eager']:.2f}x eager; paired rounds "
                f"{pair['median']:.3f}x (95% CI {pair['lo']:.3f}-{pair['hi']:.3f}), quartiles {pair['q1']:.3f}-"
                f"{pair['q3']:.3f}, {pair['pairs']} rounds{against_copy})")


def interleave_graphs(out: dict, replays: dict, phases: list[str], model_name: str,
                      log: Callable[[str], None]) -> None:
    """Every graph mode that captured all ``phases``, their CUDA-graph replays interleaved per
    phase: the GPU-time verdict on what patching gives, free of the drift between separate
    timings. Recorded as ``out['graph_interleaved'][phase]``: ms per mode and, for each pair
    below that ran (eager_patch_graph against eager_graph, the gemmtune compiled modes against
    their plain twin and against max_autotune_graph), the × of the first over the second."""
    names = [m for m in MODES if is_graph(m) and all((m, p) in replays for p in phases)]
    if len(names) < 2:
        return
    res = out.setdefault("graph_interleaved", {})
    for p in phases:
        t = time_interleaved({m: replays[(m, p)] for m in names})
        rec = {m: t[m]["ms"] for m in names}
        rec["spread"] = max(t[m]["spread"] for m in names)
        for patched, plain in (("eager_patch_graph", "eager_graph"), ("eager_fuse_graph", "eager_graph"),
                               ("eager_fuse_patch_graph", "eager_graph"),
                               ("eager_fuse_patch_graph", "eager_patch_graph"),
                               ("patch_compile_graph", "compile_graph"),
                               ("patch_compile_graph", "max_autotune_graph"),
                               ("lut_compile_graph", "compile_graph"), ("lut_compile_graph", "max_autotune_graph"),
                               ("patch_compile_cdt_graph", "compile_cdt_graph"),
                               ("patch_compile_cdt_graph", "max_autotune_graph"),
                               ("compile_cdt_graph", "max_autotune_graph"),
                               ("fuse_patch_compile_graph", "compile_graph"),
                               ("fuse_patch_compile_graph", "max_autotune_graph"),
                               ("fuse_patch_compile_cdt_graph", "compile_cdt_graph"),
                               ("fuse_patch_compile_cdt_graph", "patch_compile_cdt_graph"),
                               ("fuse_patch_compile_cdt_graph", "max_autotune_graph"),
                               ("fuse_patch_max_autotune_graph", "max_autotune_graph"),
                               ("fuse_patch_compile_pdl_graph", "fuse_patch_compile_graph"),
                               ("fuse_patch_compile_pdl_graph", "max_autotune_pdl_graph"),
                               ("max_autotune_pdl_graph", "max_autotune_graph")):
            if patched in rec and plain in rec:
                rec[f"{patched}_x_{plain}"] = rec[plain] / rec[patched]
        res[p] = rec
        log(f"{model_name} graphs interleaved {p:16s} " + ", ".join(f"{m} {rec[m]:.3f} ms" for m in names)
            + "".join(f"; {k} {v:.3f}" for k, v in rec.items() if "_x_" in k))
