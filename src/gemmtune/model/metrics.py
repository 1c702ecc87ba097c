"""How well a model ranks: per-problem Spearman and top-k regret against measured times.

Example::

    >>> from gemmtune.model.metrics import shape_metrics
    >>> m = shape_metrics([1.0, 2.0, 3.0], [3.0, 1.0, 2.0])
    >>> round(m["top1_regret"], 3), m["top5_regret"]
    (2.0, 0.0)
"""

from __future__ import annotations

import math

import numpy as np

from .data import Dataset, timed_as

def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1 with ties given their average rank."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    xs = x[order]
    ranks = np.empty(len(x))
    starts = np.r_[0, np.flatnonzero(np.diff(xs) != 0) + 1]
    ends = np.r_[starts[1:], len(x)]
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + e - 1) / 2.0
    return ranks


def spearman(a, b) -> float:
    """Spearman rank correlation (nan when either side is constant or has < 2 values)."""
    if len(a) < 2:
        return float("nan")
    ra, rb = _ranks(a), _ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def shape_metrics(pred_ms, true_ms, baseline=None) -> dict:
    """Spearman, and top-1 / top-5 regret: how much slower the best measured among the
    model's first 1 / 5 choices is than the best measured overall (0.0 = found it).

    ``baseline``: optional boolean mask of the choices the tuner benchmarks whatever the
    model says (cuBLAS, see tune.select_by_model). With it, also:

    * ``tuner_top{1,5}_regret``: the best of the baseline and the model's first 1 / 5
      other choices, against the best overall: what ``tune(benchmark_space=k)`` finds;
    * ``rest_top{1,5}_regret``: the model's first 1 / 5 other choices against the best
      other choice: the ranking of the Triton families alone, without cuBLAS.

    "Best" is the best of the measured choices, not of an exhaustive search.
    """
    pred = np.asarray(pred_ms, dtype=np.float64)
    true = np.asarray(true_ms, dtype=np.float64)
    pred = np.where(np.isfinite(pred), pred, np.inf)
    order = np.argsort(pred, kind="stable")
    best = true.min()
    out = {"spearman": spearman(pred, true), "top1_regret": float(true[order[0]] / best - 1.0),
           "top5_regret": float(true[order[:5]].min() / best - 1.0), "n": int(len(true))}
    if baseline is not None:
        base = np.asarray(baseline, dtype=bool)
        rest = np.flatnonzero(~base)
        if base.any() and len(rest):
            ro = rest[np.argsort(pred[rest], kind="stable")]
            floor = true[base].min()
            best_rest = true[rest].min()
            for k in (1, 5):
                top = true[ro[:k]].min()
                out[f"tuner_top{k}_regret"] = float(min(floor, top) / best - 1.0)
                out[f"rest_top{k}_regret"] = float(top / best_rest - 1.0)
    return out


def evaluate(model, data: Dataset) -> dict:
    """Per-shape ranking quality of ``model`` on ``data`` and its summary.

    Example::

        >>> evaluate(AnalyticModel(DeviceInfo.lookup("h200")), load_dataset("store.sqlite"))["summary"]  # doctest: +SKIP
    """
    per = []
    for g in data.groups:
        with timed_as(g):  # scored under the arithmetic that timed it (data.timed_as)
            pred = rank_keys(model, g.problem, g.choices)
        m = shape_metrics(pred, g.times_ms, baseline=[c.family == "aten" and not c.pad for c in g.choices])
        m["key"] = g.problem.key
        per.append(m)
    return {"summary": summarize(per), "shapes": per}


def summarize(per: list[dict]) -> dict:
    """Means over shapes. ``*_geomean``: the geometric mean of (1 + regret) minus 1;
    ``*_within_10pct``: the share of shapes whose regret is at most 10%."""
    if not per:
        return {"shapes": 0}
    sp = np.array([m["spearman"] for m in per if not math.isnan(m["spearman"])])
    r1 = np.array([m["top1_regret"] for m in per])
    r5 = np.array([m["top5_regret"] for m in per])
    out = {"shapes": len(per), "choices": int(sum(m["n"] for m in per)),
           "spearman_mean": float(sp.mean()) if len(sp) else float("nan"),
           "spearman_median": float(np.median(sp)) if len(sp) else float("nan"),
           "top1_regret_mean": float(r1.mean()), "top1_regret_median": float(np.median(r1)),
           "top1_found": float((r1 <= 1e-12).mean()),
           "top5_regret_mean": float(r5.mean()), "top5_regret_max": float(r5.max())}
    for name in ("top1", "top5", "tuner_top1", "tuner_top5", "rest_top1", "rest_top5"):
        r = np.array([m[f"{name}_regret"] for m in per if f"{name}_regret" in m])
        if len(r):
            out[f"{name}_regret_geomean"] = float(np.exp(np.mean(np.log1p(r))) - 1.0)
            out[f"{name}_within_10pct"] = float((r <= 0.10 + 1e-12).mean())
    return out


def rank_keys(model, problem, choices) -> np.ndarray:
    """Per choice, a key that orders ``model``'s ranking (lower = faster): a LearnedModel's
    ``rank_keys`` (ln ms, or a ranker's scaled negative score), else ln of ``predict_ms`` /
    ``predict`` (estimated ms; non-positive or non-finite estimates rank last)."""
    if hasattr(model, "rank_keys"):
        return np.asarray(model.rank_keys(problem, choices), dtype=np.float64)
    est = _predict_ms(model, problem, choices)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.isfinite(est) & (est > 0), np.log(np.where(est > 0, est, 1.0)), np.inf)


def _predict_ms(model, problem, choices) -> np.ndarray:
    if hasattr(model, "predict_ms") and getattr(model, "outputs", "ms") == "ms":
        return np.asarray(model.predict_ms(problem, choices), dtype=np.float64)
    return np.asarray(model.predict(problem, choices), dtype=np.float64)
