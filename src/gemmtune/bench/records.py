"""Records of the bench JSON: a time entry, a failed method, the header's timer text."""

from __future__ import annotations

import importlib.metadata

def time_entry(ms: float | None, spread: float | None = None, repeats: int | None = None) -> dict:
    return {"ms": ms, "spread": spread, "repeats": repeats}


def failure_record(e: BaseException) -> dict:
    from .measure import classify_exception

    return {"status": classify_exception(e).value, "reason": f"{type(e).__name__}: {e}"[:2000]}


def failed_method(res: dict, **extra) -> dict:
    """A failed method record from a verification's result (verified_launch)."""
    return {"status": res.get("status", "error"), "reason": res.get("reason", ""), **extra}


# How many of a method's timed candidates its bench record lists (``sweep_record``).
SWEEP_ROWS = 12


def sweep_record(rows, limit: int = SWEEP_ROWS) -> list[dict]:
    """What a tuning method timed on one shape, for its bench record: the ``limit`` fastest
    verified candidates as {"choice", "ms"}, fastest first, then the failed ones as {"choice",
    "status", "reason"} (up to ``limit``). ``rows``: the store's ResultRows of that shape.

    A method's pick alone does not say why it missed a faster kernel another method found:
    whether that kernel was never timed (the ranker left it out) or timed slower in the
    method's own sweep. On 1x30522x768 (H200, session 22) --fast kept cuBLAS, and only a rerun
    told which of its 7 candidates had been tried.

    >>> from gemmtune.store.rows import ResultRow
    >>> def row(c, ms, st="ok"):
    ...     return ResultRow(problem_key="k", choice_id=c, family=c.split(":")[0], status=st, device_ms=ms,
    ...                      eager_ms=None, rel_err=None, m=1, n=1, k=1, dtype="bfloat16", out_dtype="bfloat16",
    ...                      layout="row/row", aligned=True, reason="" if st == "ok" else "boom")
    >>> for r in sweep_record([row("aten", 0.03), row("skinny:x", 0.017), row("triton_mm:y", None, "compile_error")]):
    ...     print(r)
    {'choice': 'skinny:x', 'ms': 0.017}
    {'choice': 'aten', 'ms': 0.03}
    {'choice': 'triton_mm:y', 'status': 'compile_error', 'reason': 'boom'}
    """
    ok = sorted((r for r in rows if r.status == "ok" and r.device_ms is not None), key=lambda r: (r.device_ms, r.choice_id))
    bad = sorted((r for r in rows if r.status != "ok" or r.device_ms is None), key=lambda r: r.choice_id)
    return ([{"choice": r.choice_id, "ms": r.device_ms} for r in ok[:limit]]
            + [{"choice": r.choice_id, "status": r.status, "reason": (r.reason or "")[:200]} for r in bad[:limit]])


def mark_failed(r: dict, e: BaseException) -> None:
    """Turn a verified method's record into the record of its failed timing, in place."""
    keep = {k: r[k] for k in ("choice", "candidates", "tuner_ms", "tune_s", "compile_wait_s", "rel_err", "autotune",
                              "runoff", "sweep")
            if k in r}
    r.clear()
    r.update(failure_record(e), **keep)


def dist_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def timer_text(repeats: int, rounds: int, eager_calls: int | None) -> str:
    """The header's description of how kernel times were taken."""
    repeats = max(1, repeats)
    rounds = max(1, min(rounds, repeats))
    per = -(-repeats // rounds)
    return (f"cuBLAS and every method's kernel timed together in {rounds} interleaved rounds (the order rotates "
            f"per round); per round and kernel: one untimed, then {per} timed CUDA-graph replays, L2-cold "
            f"(rotating inputs > 2x L2); time = median of the {rounds} round medians; spread = the larger of the "
            "median within-round IQR / median and the across-round range / time"
            + (f"; eager = wall time per call over {eager_calls} back-to-back calls, once per method"
               if eager_calls else "")
            + "; eager, dispatcher = the same for a gemmtune mode's choice called through a compile_mm "
              "dispatcher (the prepared launch a model's calls take; it allocates its output per call)")
