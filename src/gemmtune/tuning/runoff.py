"""The run-off: a close call between the sweep's winner and cuBLAS, timed again side by side.

The sweep times each candidate alone, one after another: cuBLAS first, while the compile workers
still work on the rest, then each compiled candidate. A close call can then turn on when each ran.
On the H100 (2026-11-26, benchmarks/results/2026-11-26-h100-s14-fast), ``--fast`` on 1024^3
bf16 kept a persistent TMA kernel that its sweep had timed at 7.08 us, ahead of cuBLAS; the
benchmark's interleaved rounds then timed it at 6.91 us against cuBLAS's 6.36 us (0.92x), and
the default run's sweep had timed the same cuBLAS call at 6.68 us.

So when the sweep's winner is not cuBLAS and beats it by less than ``RUNOFF_MARGIN``, the
benchmark worker times the two again in interleaved rounds whose order rotates
(bench.rounds.runoff: what ``gemmtune bench`` does), and the faster median wins. The store keeps
the sweep's rows: the run-off decides the winner only, and the shape's result records it.
``TuneOptions.runoff`` sets the margin; 0 turns the run-off off.
"""

from __future__ import annotations

import math

RUNOFF_MARGIN = 0.05

# Below SHORT_MS of cuBLAS time the sweep's one timing of cuBLAS is noisier than RUNOFF_MARGIN, so
# the margin widens to SHORT_MARGIN there (a run-off of two such kernels costs milliseconds). H100,
# 1024^3 bf16, where the benchmark's interleaved rounds timed cuBLAS at 6.41 us: two sweeps of the
# same run timed it at 6.94 and 7.41 us (+8%, +16%), and --fast kept a persistent TMA kernel its sweep
# had timed at 7.32 us, ahead of cuBLAS there, which the benchmark then timed at 7.71 us (0.83x
# cuBLAS) (benchmarks/results/2026-11-27-h100-s20, call 4).
SHORT_MS = 0.02
SHORT_MARGIN = 0.25

# In the run-off itself, the winner must beat cuBLAS by more than RUNOFF_TIE, else cuBLAS (torch's
# own call) wins the tie. H100 (benchmarks/results/2026-11-27-h100-s20, call 7): --fast kept split-K
# on 16x4096x14336 after a run-off (43.24 us in the tuner), and the benchmark's interleaved rounds
# then timed it at 44.03 us against cuBLAS's 43.35 (0.98x); session 19 had the same shape at 0.93x.
# Two interleaved measurements of one pair differ by about 1% at this size.
RUNOFF_TIE = 0.01


def wants_runoff(best: str | None, best_ms: float | None, aten_ms: float | None, margin: float) -> bool:
    """Whether the sweep's winner ``best`` (not cuBLAS) is within ``margin`` of cuBLAS's time
    (within SHORT_MARGIN where cuBLAS took under SHORT_MS; ``margin`` 0: never).

    >>> wants_runoff("triton_mm:BM64", 0.98, 1.0, 0.05), wants_runoff("triton_mm:BM64", 0.90, 1.0, 0.05)
    (True, False)
    >>> wants_runoff("aten", 1.0, 1.0, 0.05), wants_runoff("triton_mm:BM64", 0.98, None, 0.05)
    (False, False)
    >>> wants_runoff("persistent_tma:BM64", 0.00732, 0.0077, 0.05), wants_runoff("persistent_tma:BM64", 0.00732, 0.0077, 0.0)
    (True, False)
    """
    if margin <= 0 or best is None or best == "aten" or not best_ms or not aten_ms:
        return False
    if not (math.isfinite(best_ms) and math.isfinite(aten_ms)):
        return False
    if aten_ms < SHORT_MS:
        margin = max(margin, SHORT_MARGIN)
    return best_ms * (1.0 + margin) > aten_ms


def runoff_winner(result: dict, best: str, min_gain: float = 0.0, scale: float = 1.0) -> tuple[str, dict]:
    """(the winner, what to record) from a worker's run-off ``result`` between ``best`` and
    'aten': the lower median time, where ``best`` must beat cuBLAS by more than ``min_gain``
    (as tuning.recorder.prefer_aten asks of the sweep; the tuner passes at least RUNOFF_TIE);
    ``best`` whenever either failed or the result is not a run-off (an older worker or another
    runner): the sweep's decision stands. ``scale``: what ``best``'s time counts for (1 less the
    PDL credit of a strip ``pdl=True`` serves as its twin: tuning.recorder.ranked_ms), else 1.

    >>> r = {"status": "ok", "choices": {"t": {"status": "ok", "ms": 1.0, "spread": 0.01},
    ...                                  "aten": {"status": "ok", "ms": 0.9, "spread": 0.01}}}
    >>> runoff_winner(r, "t")[0], runoff_winner({"status": "error", "reason": "x"}, "t")[0]
    ('aten', 't')
    >>> runoff_winner(r, "t", 0.01, scale=0.8)[0]  # a credited strip, 10% slower alone
    't'
    """
    got = result.get("choices") if isinstance(result, dict) else None
    if not isinstance(got, dict):
        return best, {"error": str((result or {}).get("reason", "not a run-off result"))[:200]}
    ms = {c: got.get(c, {}).get("ms") for c in (best, "aten")}
    rec = {"ms": ms, "spread": {c: got.get(c, {}).get("spread") for c in (best, "aten")}}
    def timed(c) -> bool:
        v = ms[c]
        return got.get(c, {}).get("status") == "ok" and isinstance(v, (int, float)) and math.isfinite(v) and v > 0
    bad = next((c for c in (best, "aten") if not timed(c)), None)
    if bad is not None:
        return best, dict(rec, error=f"{bad}: {got.get(bad, {}).get('reason', 'no time')}"[:200])
    winner = best if ms[best] * scale * (1.0 + min_gain) < ms["aten"] else "aten"
    return winner, dict(rec, kept=winner, **({"pdl_credit": round(1.0 - scale, 6)} if scale != 1.0 else {}))
