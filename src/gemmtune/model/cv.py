"""Cross-validation by shape and shipping a model (``gemmtune train --cv K --ship PATH``).

``cross_validate`` holds every shape out once: the shapes are dealt into ``k`` folds, group by
group (the collection plan's shape groups: llm, decode, splitk, odd, square, random), and each
learned kind is trained on the other folds and scored on the held-out one, beside the analytic
model. Less noisy than one 20% split. ``choose_kind`` takes the kind with the lower geomean
top-1 regret (then the higher Spearman); ``ship`` trains it on every shape and writes it with
its cross-validation in the provenance (so none of its own shapes is held out from the shipped
model, and the file says so).

>>> folds = folds_by_group({(1, 1, 1), (2, 2, 2), (3, 3, 3), (4, 4, 4)}, {}, 2, seed=0)
>>> sorted(len(f) for f in folds), set().union(*folds) == {(1, 1, 1), (2, 2, 2), (3, 3, 3), (4, 4, 4)}
([2, 2], True)
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from .analytic import AnalyticModel
from .data import Dataset
from .errors import ModelError
from .learned import MIN_RANKED_CHOICES, LearnedModel
from .training import _device_for, fit
from .metrics import _predict_ms, shape_metrics, summarize

DEFAULT_KINDS = ("gbt", "mlp")


def shape_groups() -> dict[tuple[int, int, int], str]:
    """(M, N, K) -> its group in the collection plan (gemmtune.collect.shapes)."""
    from ..collect.shapes import shape_plan

    return {(m, n, k): g for g, _, m, n, k, _ in shape_plan()}


def folds_by_group(shapes, groups: dict, k: int, seed: int = 0) -> list[set]:
    """``shapes`` dealt into ``k`` folds, each group's shapes in a seeded order, the deal going
    on from group to group, so that every fold holds about 1/k of every group."""
    if k < 2:
        raise ModelError(f"cross-validation needs at least 2 folds, got {k}")
    rng = np.random.default_rng(seed)
    by = defaultdict(list)
    for s in sorted(shapes):
        by[groups.get(s, "?")].append(s)
    folds: list[set] = [set() for _ in range(k)]
    off = 0
    for name in sorted(by):
        ss = by[name]
        for i, j in enumerate(rng.permutation(len(ss))):
            folds[(i + off) % k].add(ss[j])
        off += len(ss)
    return folds


def _baseline(g) -> np.ndarray:
    return np.array([c.family == "aten" and not c.pad for c in g.choices])


def score(model, data: Dataset) -> list[dict]:
    """Per-problem ranking metrics of ``model`` on ``data`` (model.metrics.shape_metrics)."""
    out = []
    for g in data.groups:
        m = shape_metrics(_predict_ms(model, g.problem, g.choices), g.times_ms, baseline=_baseline(g))
        m["key"] = g.problem.key
        out.append(m)
    return out


def cross_validate(data: Dataset, *, kinds=DEFAULT_KINDS, folds: int = 5, seed: int = 0, groups: dict | None = None,
                   min_choices: int = MIN_RANKED_CHOICES, weighting: str = "near_best", device=None,
                   say=lambda msg: None) -> dict:
    """k-fold cross-validation by shape: {"folds", "kinds", "summaries": kind -> summary (and
    'analytic'), "fit_s": kind -> seconds of training over the folds, "shapes", "scored"}.
    Rankings are scored on problems with at least ``min_choices`` measured choices (every
    problem is trained on)."""
    if len(data.shapes) < folds:
        raise ModelError(f"{len(data.shapes)} shapes cannot fill {folds} folds")
    dev = _device_for(data, device)
    analytic = AnalyticModel(dev)
    per: dict[str, list] = defaultdict(list)
    fit_s: dict[str, float] = defaultdict(float)
    for i, fold in enumerate(folds_by_group(data.shapes, groups or {}, folds, seed)):
        train_d = data.subset(data.shapes - fold)
        test_d = data.subset(fold).ranked(min_choices)
        for kind in kinds:
            t0 = time.perf_counter()
            model, _ = fit(train_d, kind=kind, seed=seed, weighting=weighting, device=dev)
            fit_s[kind] += time.perf_counter() - t0
            per[kind] += score(model, test_d)
        per["analytic"] += score(analytic, test_d)
        say(f"cross-validation fold {i + 1}/{folds} done")
    return {"folds": folds, "seed": seed, "kinds": list(kinds), "shapes": len(data.shapes),
            "scored": len(per["analytic"]), "min_choices": min_choices, "weighting": weighting,
            "summaries": {name: summarize(p) for name, p in per.items()}, "fit_s": dict(fit_s)}


def choose_kind(cv: dict) -> str:
    """The learned kind of ``cv`` with the lower geomean top-1 regret (ties: higher Spearman).

    >>> choose_kind({"kinds": ["gbt", "mlp"], "summaries": {
    ...     "gbt": {"top1_regret_geomean": 0.02, "spearman_mean": 0.8},
    ...     "mlp": {"top1_regret_geomean": 0.03, "spearman_mean": 0.9}}})
    'gbt'
    """
    s = cv["summaries"]
    return min(cv["kinds"], key=lambda k: (s[k].get("top1_regret_geomean", np.inf), -s[k].get("spearman_mean", 0.0)))


def ship(data: Dataset, kind: str, path: str | os.PathLike, *, cv: dict | None = None, seed: int = 0,
         weighting: str = "near_best", device=None, description: dict | None = None) -> tuple[LearnedModel, dict]:
    """Train ``kind`` on every shape of ``data`` and write it to ``path``; its provenance holds
    ``cv`` (that kind's and the analytic model's cross-validated summaries) and notes that
    the file itself was trained on all the shapes. Returns (model, {"path", "bytes", "fit_s"})."""
    t0 = time.perf_counter()
    model, _ = fit(data, kind=kind, seed=seed, weighting=weighting, device=device, description=description)
    fit_s = time.perf_counter() - t0
    model.provenance["training_set"]["which"] = f"all {len(data.shapes)} shapes of the data (after the evaluation)"
    if cv is not None:
        model.provenance["evaluation"] = {
            "how": f"{cv['folds']}-fold cross-validation by shape, seed {cv['seed']}, the same kind and settings "
                   "trained on the other folds; this file was then trained on all the shapes, so none of them is "
                   "held out from it",
            "cv": cv["summaries"][kind], "cv_analytic": cv["summaries"].get("analytic"),
            "kinds_compared": cv["kinds"]}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save(path)
    return model, {"path": str(path), "bytes": path.stat().st_size, "fit_s": fit_s, "kind": kind}
