"""Training a LearnedModel: ``fit`` (on every group of a dataset; ``kind='auto'`` picks the
regressor on a validation split) and ``train`` (load a store, leave suites out, split by
shape, fit, score the held-out shapes beside the analytic model). The model itself, saving and
loading are in learned.py.

Training weights each row by how close it is to its shape's best measured time
(``weighting="near_best"``: ``0.25 + exp(-ln(t / t_best) / 0.3)``); ``"none"`` is plain least
squares.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np

from ..device import DeviceInfo
from .analytic import AnalyticModel
from .data import (LEGACY_FP32_PRECISION, MIN_RANKED_CHOICES, Dataset, domain_of, exclude, load_dataset, pool,
                   split_by_shape, suite_shapes, timed_as)
from .errors import ModelError
from .features import FEATURE_NAMES, FEATURE_VERSION, featurize
from .learned import LearnedModel, _base_log_ms
from .metrics import evaluate, spearman
from .regressors import _REGRESSORS, RANKERS, import_lightgbm

# Training weights (weighting="near_best"): floor + exp(-ln(t / t_best) / tau). A choice
# 35% slower than its shape's best weighs 1/e of the best's (plus the floor), one 3x
# slower is down to the floor. Chosen by 5-fold cross-validation by shape on the first
# H200 bf16 collection (benchmarks/model/2026-11-22-h200-bf16-eval.md).
# Training weights (weighting="near_best"): floor + exp(-ln(t / t_best) / tau). A choice
# 35% slower than its shape's best weighs 1/e of the best's (plus the floor), one 3x
# slower is down to the floor. Chosen by 5-fold cross-validation by shape on the first
# H200 bf16 collection (benchmarks/model/2026-11-22-h200-bf16-eval.md).
NEAR_BEST_TAU = 0.3

NEAR_BEST_FLOOR = 0.25

WEIGHTINGS = ("near_best", "none")

def _near_best_weights(y: np.ndarray, gid: np.ndarray, tau: float = NEAR_BEST_TAU,
                       floor: float = NEAR_BEST_FLOOR) -> np.ndarray:
    """Row weights from ln(time) ``y`` and the group index ``gid`` of every row."""
    if len(y) == 0:
        return np.zeros(0)
    best = np.full(int(gid.max()) + 1, np.inf)
    np.minimum.at(best, gid, y)
    return floor + np.exp(-(y - best[gid]) / tau)


def _matrix(data: Dataset, device: DeviceInfo, analytic: AnalyticModel):
    """Features, ln(ms) and group index of every row; a problem pooled from another GPU
    (``data.pool``) is featurized with that GPU's facts, and an fp32 (TF32 off) one for the
    arithmetic that timed it (``data.timed_as``), whatever this process's fp32 setting."""
    Xs, ys, gid = [], [], []
    others: dict = {}
    for i, g in enumerate(data.groups):
        dev = g.device or device
        if dev != device and dev not in others:
            others[dev] = AnalyticModel(dev)
        am = analytic if dev == device else others[dev]
        with timed_as(g):
            Xs.append(featurize(g.problem, g.choices, dev, analytic=am))
        ys.append(np.log(g.times_ms))
        gid.append(np.full(len(g.choices), i))
    if not Xs:
        return np.zeros((0, len(FEATURE_NAMES))), np.zeros(0), np.zeros(0, dtype=np.int64)
    return np.concatenate(Xs), np.concatenate(ys), np.concatenate(gid)


def _device_for(data: Dataset, device: DeviceInfo | str | None) -> DeviceInfo:
    if isinstance(device, DeviceInfo):
        return device
    name = device or data.context.get("device_name", "")
    try:
        return DeviceInfo.lookup(name)
    except ValueError:
        if device:  # the name given (--device) is the unknown one: say so
            raise
        raise ModelError(f"the training rows come from {data.context.get('device_name')!r}, which is not a "
                         "built-in GPU: pass device= (a DeviceInfo or h100/h200/a100) for its facts") from None


def _fit_one(kind: str, X, y, seed: int, w=None, gid=None):
    if kind in RANKERS:  # ranks each problem's choices: the row weights play no part
        return RANKERS[kind](seed=seed).fit(X, y, gid)
    r = y - _base_log_ms(X)
    return _REGRESSORS[kind](seed=seed).fit(X, r, w)


def _weights(weighting: str, y, gid):
    return _near_best_weights(y, gid) if weighting == "near_best" else None


def _score(kind_reg, X, y, gid) -> float:
    pred = _base_log_ms(X) + kind_reg.predict(X)
    sps = [spearman(pred[gid == g], y[gid == g]) for g in np.unique(gid)]
    sps = [s for s in sps if not math.isnan(s)]
    return float(np.mean(sps)) if sps else float("nan")


def fp32_timings(data: Dataset) -> dict:
    """How ``data``'s fp32 (TF32 off) problems were timed, for the provenance: {"tf32x3": n,
    "ieee": n, "untagged_as_ieee": n} (zeros left out). Each is featurized for its own arithmetic
    (``data.timed_as``; untagged ones, from schema-1 stores, as ``LEGACY_FP32_PRECISION``), never
    for this process's GEMMTUNE_FP32_PRECISION.

    >>> from gemmtune.model.data import ShapeData
    >>> from gemmtune.problem import Problem
    >>> g = lambda tag, d="fp32": ShapeData(Problem.from_sizes(64, 64, 64, d), [], np.zeros(0), fp32_precision=tag)
    >>> fp32_timings(Dataset([g("tf32x3"), g(""), g(""), g("", "bf16")]))
    {'tf32x3': 1, 'untagged_as_ieee': 2}
    """
    out: dict[str, int] = {}
    for g in data.groups:
        t = g.timed_fp32_precision
        if t is not None:
            k = t if g.fp32_precision else f"untagged_as_{LEGACY_FP32_PRECISION}"
            out[k] = out.get(k, 0) + 1
    return dict(sorted(out.items()))


def fit(data: Dataset, *, kind: str = "auto", device: DeviceInfo | str | None = None, seed: int = 0,
        description: dict | None = None, weighting: str = "near_best") -> tuple[LearnedModel, dict]:
    """Train on every group of ``data`` (split it first: see ``train``).

    ``kind``: 'gbt', 'mlp', 'lgbm_rank' (needs lightgbm) or 'auto' (gbt and mlp on 80%
    of the shapes, the better mean Spearman on the other 20% wins, then refit on all).
    ``weighting`` (regressors): 'near_best' (rows near their shape's best weigh more;
    see the module docstring) or 'none'. Returns (model, report).
    """
    if kind not in ("auto", *_REGRESSORS, *RANKERS):
        raise ModelError(f"kind must be auto, {', '.join([*_REGRESSORS, *RANKERS])}, not {kind!r}")
    if weighting not in WEIGHTINGS:
        raise ModelError(f"weighting must be one of {', '.join(WEIGHTINGS)}, not {weighting!r}")
    if len(data.groups) < 2:
        raise ModelError(f"need measurements of at least 2 shapes to train, got {len(data.groups)}")
    dev = _device_for(data, device)
    analytic = AnalyticModel(dev)
    t0 = time.monotonic()
    report: dict = {}
    if kind == "auto":
        fit_d, val_d = split_by_shape(data, 0.2, seed + 1)
        Xf, yf, gf = _matrix(fit_d, dev, analytic)
        Xv, yv, gv = _matrix(val_d.native(), dev, analytic)  # validated on the target GPU's problems
        wf = _weights(weighting, yf, gf)
        scores = {k: _score(_fit_one(k, Xf, yf, seed, wf), Xv, yv, gv) for k in _REGRESSORS}
        scores["analytic"] = _score(_Zero(), Xv, yv, gv)
        kind = max(_REGRESSORS, key=lambda k: (-1e9 if math.isnan(scores[k]) else scores[k]))
        report["selection"] = {"validation_shapes": len(val_d.groups), "mean_spearman": scores,
                               "chosen": kind}
    X, y, gid = _matrix(data, dev, analytic)
    reg = _fit_one(kind, X, y, seed, _weights(weighting, y, gid), gid)
    from .. import __version__
    import torch
    import triton

    prov = {
        "device_name": data.context.get("device_name", dev.name),
        "capability": data.context.get("capability", dev.capability_str),
        "device": dev.to_dict(),
        "torch": data.context.get("torch_version", torch.__version__),
        "triton": data.context.get("triton_version", triton.__version__),
        "gemmtune": __version__,
        "trained_with": {"torch": torch.__version__, "triton": triton.__version__, "numpy": np.__version__,
                         **({"lightgbm": import_lightgbm().__version__} if kind in RANKERS else {})},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "feature_version": FEATURE_VERSION,
        # fp32 (TF32 off) rows are featurized for the arithmetic that timed them (data.timed_as)
        "fp32_features": {"per_row_precision": True, "untagged_as": LEGACY_FP32_PRECISION,
                          "problems": fp32_timings(data)},
        "training_set": {"source": data.source, "rows": int(len(y)), "shapes": len(data.shapes),
                         "problems": len(data.groups), **_pooled(data), **(description or {})},
        "training": {"kind": kind, "seed": seed,
                     **({"weighting": weighting} if kind not in RANKERS else {}),
                     **({"near_best_tau": NEAR_BEST_TAU, "near_best_floor": NEAR_BEST_FLOOR}
                        if weighting == "near_best" and kind not in RANKERS else {}),
                     "regressor": reg.hyperparameters()},
        "domain": domain_of(data),
    }
    report["family"] = kind
    report["fit_s"] = time.monotonic() - t0
    prov["training_report"] = dict(report)
    return LearnedModel(dev, kind, reg, prov), report


def _pooled(data: Dataset) -> dict:
    """{"pooled": {GPU name: problems}} for the problems ``data.pool`` took from other GPUs."""
    counts: dict[str, int] = {}
    for g in data.groups:
        if g.device is not None:
            counts[g.device.name] = counts.get(g.device.name, 0) + 1
    return {"pooled": counts} if counts else {}


class _Zero:
    def predict(self, X):
        return np.zeros(len(X))


def train(path: str | os.PathLike, *, exclude_suites=("public",), test_fraction: float = 0.2,
          kind: str = "auto", seed: int = 0, device: DeviceInfo | str | None = None,
          device_name: str | None = None, strata=None,
          weighting: str = "near_best", pool_stores=()) -> tuple[LearnedModel, dict]:
    """Load a store, drop the excluded suites' shapes, split by shape, fit, and evaluate
    on the held-out shapes (the learned model and the analytic one side by side).
    ``pool_stores``: stores of other GPUs trained on too (``data.pool``); only the store's
    own problems are scored.

    Returns (model, report); ``report['held_out']`` and ``report['held_out_analytic']``
    hold the summaries. The model's provenance records the same.
    """
    data = load_dataset(path, device_name=device_name)
    if pool_stores:
        data = pool(data, [load_dataset(p) for p in pool_stores])
    excluded: set = set()
    for s in exclude_suites or ():
        excluded |= suite_shapes(s)
    data, n_excl = exclude(data, excluded)
    if len(data.groups) < 3:
        raise ModelError(f"{path}: {len(data.groups)} problems left after excluding "
                         f"{', '.join(exclude_suites or ()) or 'nothing'}; need at least 3 to train and test")
    tr, te = split_by_shape(data, test_fraction, seed, strata=strata)
    desc = {"excluded_suites": list(exclude_suites or ()), "excluded_problems": n_excl,
            "split": "by (M, N, K)" + (", stratified by shape group" if strata is not None else ""),
            "test_fraction": test_fraction, "seed": seed,
            "test_shapes": len(te.shapes), "context": data.context}
    model, report = fit(tr, kind=kind, device=device, seed=seed, description=desc, weighting=weighting)
    # Scored only where the sample is big enough to rank (Dataset.ranked), and only on the store's own
    # GPU (pooled problems of the held-out shapes are left out of both); trained on everything else.
    te_all, te = te.native(), te.native().ranked()
    if not te.groups:
        raise ModelError(f"{path}: none of the {len(te_all.groups)} held-out problems has {MIN_RANKED_CHOICES} "
                         "or more measured choices; nothing to score a ranking on")
    held = evaluate(model, te)
    held_a = evaluate(model.analytic, te)
    report.update({"train_problems": len(tr.groups), "test_problems": len(te.groups),
                   "test_problems_too_few_choices": len(te_all.groups) - len(te.groups),
                   "excluded_problems": n_excl, "held_out": held["summary"],
                   "held_out_analytic": held_a["summary"], "held_out_shapes": held["shapes"],
                   "notes": data.notes})
    model.provenance["held_out"] = held["summary"]
    model.provenance["held_out_analytic"] = held_a["summary"]
    return model, report
