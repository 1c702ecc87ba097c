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


def mark_failed(r: dict, e: BaseException) -> None:
    """Turn a verified method's record into the record of its failed timing, in place."""
    keep = {k: r[k] for k in ("choice", "candidates", "tuner_ms", "tune_s", "rel_err", "autotune", "runoff") if k in r}
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
               if eager_calls else ""))
