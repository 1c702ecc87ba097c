"""LearnedModel: device time learned from measured results, with provenance.

The model predicts log device time as the analytic model's estimate plus a learned
correction: ``log(ms) = log(analytic ms) + f(features)``, where ``f`` is either

* ``gbt``: gradient-boosted oblivious trees (one split per tree level, as in
  CatBoost) grown on 64-bin feature histograms, or
* ``mlp``: a 2-layer ReLU network (64 units each) trained with Adam,

both in plain numpy. ``fit(kind="auto")`` trains both on 80% of the training
shapes and keeps the one whose per-shape ranking (mean Spearman) is better on the
other 20%, then refits it on all of them. Starting from the analytic estimate
means an unfamiliar region degrades to the analytic ranking instead of noise.

Training weights each row by how close it is to its shape's best measured time
(``weighting="near_best"``: ``0.25 + exp(-ln(t / t_best) / 0.3)``): a ranking is
judged by its top, so errors among the fast choices cost more than errors among
choices that are 3x slower. ``weighting="none"`` is plain least squares.

Domain guard: the model records what it was trained on (every training problem's
M, N, K, dtype and whether an operand was unaligned, and the layouts). For a
problem outside that domain the learned correction is shrunk towards the analytic
estimate: none for a layout it never saw or when no training problem had the same
dtype and alignment; otherwise by the distance to the nearest such training
problem (log2 units of M, N, K): full within 1.5, none beyond 3.0, linear in
between. ``LearnedModel.trust(problem)`` says which weight a problem gets and why.

Data: a results store (``.sqlite``, ``.sqlite.gz``) or its CSV export (``.csv``,
``.csv.gz``): the rows with status ``ok``. Train/test splits are BY SHAPE
(M, N, K; all dtypes and layouts of one shape fall on the same side), never by
row, and shapes of the public benchmark suite are excluded by default: they are
for evaluation only.

Saved as JSON with provenance: GPU name, capability and facts, torch / triton /
gemmtune versions, feature version, the training set and the held-out metrics.
``load_model`` refuses to trust a model from another GPU, another triton
MAJOR.MINOR or another feature version: it warns (``ModelWarning``) and returns
an ``AnalyticModel`` instead.

Example::

    >>> from gemmtune.model import load_dataset, fit, load_model
    >>> data = load_dataset("results.sqlite")                      # doctest: +SKIP
    >>> model, report = fit(data)                                  # doctest: +SKIP
    >>> model.save("model.json")                                   # doctest: +SKIP
    >>> m = load_model("model.json", device="h100")                # doctest: +SKIP
    >>> m.predict(problem, choices)                                # doctest: +SKIP
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import os
import shutil
import tempfile
import time
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..configs import Choice
from ..jsonio import read_json
from ..table import major_minor
from ..device import DeviceInfo
from ..problem import Problem
from .analytic import AnalyticModel
from .features import FEATURE_NAMES, FEATURE_VERSION, POST_V1, batch, featurize

MODEL_FORMAT = "gemmtune-perf-model"
MODEL_SCHEMA = 1
_LN2 = math.log(2.0)
_BASE_COL = FEATURE_NAMES.index("log2_analytic_us")

# Training weights (weighting="near_best"): floor + exp(-ln(t / t_best) / tau). A choice
# 35% slower than its shape's best weighs 1/e of the best's (plus the floor), one 3x
# slower is down to the floor. Chosen by 5-fold cross-validation by shape on the first
# H200 bf16 collection (benchmarks/model/2026-11-22-h200-bf16-eval.md).
NEAR_BEST_TAU = 0.3
NEAR_BEST_FLOOR = 0.25
WEIGHTINGS = ("near_best", "none")
# Domain guard (see the module docstring): full learned correction within TRUST_RADIUS
# of a training problem of the same dtype and alignment (log2 units of M, N, K; each of
# the first collected H200 shapes has another within 1.62), none beyond ZERO_RADIUS.
TRUST_RADIUS = 1.5
ZERO_RADIUS = 3.0


class ModelError(ValueError):
    """A model file or a training set that cannot be used; the message says why."""


class ModelWarning(UserWarning):
    """A model that loads but is not trusted here (other GPU / triton / features)."""


# ------------------------------------------------------------------------ data
@dataclass
class ShapeData:
    """The measured choices of one problem: ``times_ms[i]`` is ``choices[i]``'s median device ms."""

    problem: Problem
    choices: list[Choice]
    times_ms: np.ndarray

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.problem.m, self.problem.n, self.problem.k)


@dataclass
class Dataset:
    groups: list[ShapeData]
    context: dict = field(default_factory=dict)
    source: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(len(g.choices) for g in self.groups)

    @property
    def shapes(self) -> set[tuple[int, int, int]]:
        return {g.shape for g in self.groups}

    def subset(self, shapes) -> "Dataset":
        keep = set(shapes)
        return Dataset([g for g in self.groups if g.shape in keep], dict(self.context), self.source,
                       list(self.notes))

    def ranked(self, min_choices: int = None) -> "Dataset":
        """The problems with at least ``min_choices`` measured choices (default
        ``MIN_RANKED_CHOICES``): the ones a ranking can be scored on. A problem measured only
        in part (cuBLAS and a few others) makes any ranking look perfect."""
        n = MIN_RANKED_CHOICES if min_choices is None else min_choices
        return Dataset([g for g in self.groups if len(g.choices) >= n], dict(self.context), self.source,
                       list(self.notes))


def _open_sqlite(path: Path):
    """A ResultStore on ``path``; ``.gz`` files are decompressed to a temporary copy."""
    from ..store import ResultStore

    if path.suffix == ".gz":
        tmpdir = tempfile.mkdtemp(prefix="gemmtune-model-")
        dst = Path(tmpdir) / path.stem
        with gzip.open(path, "rb") as src, open(dst, "wb") as out:
            shutil.copyfileobj(src, out)
        return ResultStore(dst), tmpdir
    return ResultStore(path), None


def _read_records(path: Path) -> list[dict]:
    """Rows with status ok as dicts of the store's columns (strings or numbers)."""
    name = path.name.lower()
    if name.endswith((".csv", ".csv.gz")):
        opener = gzip.open if name.endswith(".gz") else open
        with opener(path, "rt", newline="", encoding="utf-8") as f:
            return [r for r in csv.DictReader(f) if r.get("status") == "ok"]
    if name.endswith((".sqlite", ".sqlite.gz", ".db")):
        from dataclasses import asdict

        store, tmpdir = _open_sqlite(path)
        try:
            return [asdict(c) | asdict(r) for c, r in store.rows(status="ok")]
        finally:
            store.close()
            if tmpdir:
                shutil.rmtree(tmpdir, ignore_errors=True)
    raise ModelError(f"cannot read {path}: expected a results store (.sqlite, .sqlite.gz) "
                     "or its CSV export (.csv, .csv.gz)")


# Evaluations score rankings only on problems with at least this many measured choices.
MIN_RANKED_CHOICES = 20


def load_dataset(path: str | os.PathLike, *, device_name: str | None = None) -> Dataset:
    """The ok rows of a results store (or its CSV export), grouped by problem.

    Rows measured on several GPUs or triton MAJOR.MINOR versions are not mixed: the
    group with the most rows is used (or the GPU named by ``device_name``), and the
    others are listed in ``Dataset.notes``. A choice measured more than once within
    that group counts with the geometric mean of its times.
    """
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"cannot read {path}: no such file")
    recs = _read_records(path)
    by_ctx: dict[tuple, list[dict]] = defaultdict(list)
    for r in recs:
        try:
            ms = float(r["device_ms"])
        except (TypeError, ValueError):
            continue
        if not (math.isfinite(ms) and ms > 0):
            continue
        r = dict(r)
        r["device_ms"] = ms
        by_ctx[(r["device_name"], major_minor(r["triton_version"]))].append(r)
    if not by_ctx:
        raise ModelError(f"{path}: no rows with status ok and a finite device time")
    if device_name is not None:
        picks = [k for k in by_ctx if k[0].lower() == device_name.lower()]
        if not picks:
            raise ModelError(f"{path}: no rows measured on {device_name!r}; it holds "
                             + ", ".join(sorted({k[0] for k in by_ctx})))
        key = max(picks, key=lambda k: len(by_ctx[k]))
    else:
        key = max(by_ctx, key=lambda k: len(by_ctx[k]))
    notes = [f"skipped {len(v)} rows measured on {k[0]} with triton {k[1]}" for k, v in by_ctx.items()
             if k != key]
    rows = by_ctx[key]
    if "interpreter" in key[0].lower():
        raise ModelError(f"{path}: its rows were timed in the Triton CPU interpreter ({key[0]}); "
                         "those times say nothing about a GPU, refusing to train on them")
    ctx = {c: rows[-1][c] for c in ("device_name", "capability", "torch_version", "triton_version",
                                    "gemmtune_version")}
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        per[r["problem_key"]][r["choice_id"]].append(r["device_ms"])
    groups = []
    for key_, ch in sorted(per.items()):
        try:
            p = Problem.from_key(key_)
            ids = sorted(ch)
            choices = [Choice.parse(c) for c in ids]
        except ValueError as e:
            notes.append(f"skipped {key_}: {e}")
            continue
        t = np.array([math.exp(sum(map(math.log, ch[c])) / len(ch[c])) for c in ids])
        groups.append(ShapeData(p, choices, t))
    return Dataset(groups, ctx, path.name, notes)


def public_shapes() -> set[tuple[int, int, int]]:
    """(M, N, K) of the public benchmark suite: evaluation only, never training data."""
    from ..shapes import preset

    return {(s.problem.m, s.problem.n, s.problem.k) for s in preset("public")}


def suite_shapes(name_or_csv: str) -> set[tuple[int, int, int]]:
    from ..shapes import PRESETS, load_csv, preset

    shapes = preset(name_or_csv) if name_or_csv in PRESETS else load_csv(name_or_csv)
    return {(s.problem.m, s.problem.n, s.problem.k) for s in shapes}


def exclude(data: Dataset, shapes: set[tuple[int, int, int]]) -> tuple[Dataset, int]:
    """``data`` without the groups whose (M, N, K) is in ``shapes``, and how many went."""
    kept = [g for g in data.groups if g.shape not in shapes]
    return Dataset(kept, dict(data.context), data.source, list(data.notes)), len(data.groups) - len(kept)


def split_by_shape(data: Dataset, test_fraction: float = 0.2, seed: int = 0,
                   strata=None) -> tuple[Dataset, Dataset]:
    """(train, test) with every (M, N, K) on exactly one side; at least one shape each
    when there are two or more.

    ``strata``: optional shape group per (M, N, K), a dict or a callable (shapes it does
    not know form one more group). Each group is then split on its own, holding out
    ``round(test_fraction * n)`` of its ``n`` shapes (at least one of a group of two or
    more), so every group appears on both sides. Deterministic for a given seed.
    """
    shapes = sorted(data.shapes)
    if not 0.0 < test_fraction < 1.0:
        raise ModelError(f"test_fraction must be between 0 and 1, got {test_fraction}")
    rng = np.random.default_rng(seed)

    def n_held(n: int) -> int:
        return min(n - 1, max(1, round(test_fraction * n))) if n > 1 else 0

    if strata is None:
        order = [shapes[i] for i in rng.permutation(len(shapes))]
        n_test = n_held(len(shapes))
        return data.subset(order[n_test:]), data.subset(order[:n_test])
    label = strata if callable(strata) else strata.get
    by: dict[str, list] = defaultdict(list)
    for s in shapes:
        by[str(label(s))].append(s)
    test: list = []
    for name in sorted(by):
        group = by[name]
        order = [group[i] for i in rng.permutation(len(group))]
        test += order[:n_held(len(group))]
    if not test and len(shapes) > 1:  # only groups of one shape: hold out one of them
        test = [shapes[int(rng.integers(len(shapes)))]]
    held = set(test)
    return data.subset([s for s in shapes if s not in held]), data.subset(test)


# ---------------------------------------------------------------------- metrics
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
        pred = _predict_ms(model, g.problem, g.choices)
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


def _predict_ms(model, problem, choices) -> np.ndarray:
    if hasattr(model, "predict_ms"):
        return np.asarray(model.predict_ms(problem, choices), dtype=np.float64)
    return np.asarray(model.predict(problem, choices), dtype=np.float64)


# ------------------------------------------------------------------ regressors
class _GBT:
    """Gradient-boosted oblivious trees on binned features (least squares)."""

    def __init__(self, n_trees=200, depth=6, lr=0.1, n_bins=64, l2=1.0, subsample=0.8, max_rows=60000,
                 seed=0):
        self.n_trees, self.depth, self.lr, self.n_bins = n_trees, depth, lr, n_bins
        self.l2, self.subsample, self.max_rows, self.seed = l2, subsample, max_rows, seed
        self.feat = self.thr = self.leaf = None

    def _edges(self, X):
        edges = []
        qs = np.linspace(0, 1, self.n_bins + 1)[1:-1]
        for f in range(X.shape[1]):
            u = np.unique(X[:, f])
            if len(u) <= self.n_bins:
                e = (u[:-1] + u[1:]) / 2.0
            else:
                e = np.unique(np.quantile(X[:, f], qs))
            edges.append(e)
        return edges

    def fit(self, X, r, w=None):
        rng = np.random.default_rng(self.seed)
        n, F = X.shape
        B = self.n_bins
        # Weights are scaled to mean 1, so that the l2 term means the same whatever their scale.
        w = np.ones(n) if w is None else np.asarray(w, dtype=np.float64) * (n / np.sum(w))
        edges = self._edges(X)
        Xb = np.zeros((n, F), dtype=np.int64)
        for f, e in enumerate(edges):
            Xb[:, f] = np.searchsorted(e, X[:, f], side="left")
        base_idx = np.arange(F)[None, :] * B + Xb  # (n, F)
        pred = np.zeros(n)
        D = self.depth
        feats = np.zeros((self.n_trees, D), dtype=np.int64)
        thrs = np.zeros((self.n_trees, D))
        leaves = np.zeros((self.n_trees, 2 ** D))
        m = min(n, self.max_rows, max(1, int(self.subsample * n)))
        for t in range(self.n_trees):
            idx = np.sort(rng.choice(n, size=m, replace=False)) if m < n else np.arange(n)
            g = r[idx] - pred[idx]
            wi = w[idx]
            wg = wi * g
            node = np.zeros(m, dtype=np.int64)
            bi = base_idx[idx]
            for d in range(D):
                nodes = 2 ** d
                flat = (node[:, None] * (F * B) + bi).ravel()
                G = np.bincount(flat, weights=np.repeat(wg, F), minlength=nodes * F * B).reshape(nodes, F, B)
                H = np.bincount(flat, weights=np.repeat(wi, F), minlength=nodes * F * B).reshape(nodes, F, B)
                GL, HL = np.cumsum(G, axis=2)[:, :, :-1], np.cumsum(H, axis=2)[:, :, :-1]
                Gt, Ht = G.sum(axis=2, keepdims=True), H.sum(axis=2, keepdims=True)
                GR, HR = Gt - GL, Ht - HL
                gain = (GL ** 2 / (HL + self.l2) + GR ** 2 / (HR + self.l2)).sum(axis=0)  # (F, B-1)
                # A threshold past a feature's last edge splits nothing.
                for f, e in enumerate(edges):
                    gain[f, len(e):] = -np.inf
                f_best, b_best = np.unravel_index(int(np.argmax(gain)), gain.shape)
                e = edges[f_best]
                feats[t, d] = f_best
                thrs[t, d] = e[b_best] if len(e) else 1e300  # constant feature: no row goes right
                node = node * 2 + (Xb[idx, f_best] > b_best)
            sums = np.bincount(node, weights=wg, minlength=2 ** D)
            cnts = np.bincount(node, weights=wi, minlength=2 ** D)
            leaves[t] = self.lr * sums / (cnts + self.l2)
            pred += leaves[t][self._leaf_index(X, feats[t:t + 1], thrs[t:t + 1])[0]]
        self.feat, self.thr, self.leaf = feats, thrs, leaves
        self._splits = None
        return self

    @staticmethod
    def _leaf_index(X, feats, thrs):
        """(T, n) leaf of every row in every tree; the first split is the high bit."""
        cols = np.ascontiguousarray(X.T)[feats]  # (T, D, n): whole feature rows, cheap to gather
        bits = cols > thrs[:, :, None]
        idx = np.zeros((feats.shape[0], X.shape[0]), dtype=np.int64)
        for d in range(feats.shape[1]):
            idx = idx * 2 + bits[:, d, :]
        return idx

    def _split_table(self):
        """The distinct (feature, threshold) splits of all trees and, per tree level, which
        of them it uses: each is then compared once per row, not once per tree."""
        if getattr(self, "_splits", None) is None:
            pairs = np.stack([self.feat.ravel().astype(np.float64), self.thr.ravel()], axis=1)
            uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
            self._splits = (uniq[:, 0].astype(np.int64), uniq[:, 1], inv.reshape(self.feat.shape))
        return self._splits

    def predict(self, X):
        feats, thrs, which = self._split_table()
        bits = np.ascontiguousarray((X[:, feats] > thrs).T).view(np.uint8)  # (distinct splits, n)
        # (T, n) leaf index, the same leaves as _leaf_index, built in place in int32 (less
        # memory traffic than int64: about half the prediction time of 2,000 choices), then
        # offset per tree to index the flattened leaf table.
        n_trees, n_leaves = self.leaf.shape
        idx = np.zeros((n_trees, X.shape[0]), dtype=np.int32)
        for d in range(which.shape[1]):
            idx <<= 1
            idx |= bits[which[:, d]]
        idx += (np.arange(n_trees, dtype=np.int32) * n_leaves)[:, None]
        return self.leaf.ravel()[idx].sum(axis=0)

    def hyperparameters(self) -> dict:
        return {"n_trees": self.n_trees, "depth": self.depth, "lr": self.lr, "n_bins": self.n_bins, "l2": self.l2,
                "subsample": self.subsample, "max_rows": self.max_rows}

    def to_json(self):
        return {"depth": self.depth, "lr": self.lr, "features": self.feat.tolist(),
                "thresholds": self.thr.tolist(), "leaves": self.leaf.tolist()}

    @classmethod
    def from_json(cls, d):
        m = cls(n_trees=len(d["features"]), depth=d["depth"], lr=d["lr"])
        m.feat = np.asarray(d["features"], dtype=np.int64).reshape(-1, d["depth"])
        m.thr = np.asarray(d["thresholds"], dtype=np.float64).reshape(m.feat.shape)
        m.leaf = np.asarray(d["leaves"], dtype=np.float64).reshape(len(m.feat), 2 ** d["depth"])
        return m


class _MLP:
    """Two ReLU layers trained with Adam on standardised features (least squares)."""

    def __init__(self, hidden=(64, 64), lr=2e-3, epochs=60, batch=256, weight_decay=1e-5, seed=0,
                 max_steps=20000):
        self.hidden, self.lr, self.epochs, self.batch = hidden, lr, epochs, batch
        self.wd, self.seed, self.max_steps = weight_decay, seed, max_steps
        self.params = None

    def _forward(self, Z, params):
        W1, b1, W2, b2, W3, b3 = params
        h1 = np.maximum(Z @ W1 + b1, 0.0)
        h2 = np.maximum(h1 @ W2 + b2, 0.0)
        return h1, h2, (h2 @ W3 + b3)[:, 0]

    def fit(self, X, r, w=None):
        rng = np.random.default_rng(self.seed)
        w = np.ones(len(X)) if w is None else np.asarray(w, dtype=np.float64) * (len(X) / np.sum(w))
        self.mu = X.mean(axis=0)
        sd = X.std(axis=0)
        self.sd = np.where(sd > 1e-12, sd, 1.0)
        self.r_mu, self.r_sd = float(r.mean()), float(r.std() or 1.0)
        Z = (X - self.mu) / self.sd
        y = (r - self.r_mu) / self.r_sd
        sizes = (X.shape[1], *self.hidden, 1)
        params = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            params += [rng.normal(0.0, math.sqrt(2.0 / a), (a, b)), np.zeros(b)]
        m = [np.zeros_like(p) for p in params]
        v = [np.zeros_like(p) for p in params]
        step, b1m, b2m, eps = 0, 0.9, 0.999, 1e-8
        n = len(Z)
        # Fewer epochs on big data (deterministic, unlike a time limit): ~20k Adam steps at most.
        epochs = min(self.epochs, max(5, self.max_steps // max(1, math.ceil(n / self.batch))))
        for _ in range(epochs):
            perm = rng.permutation(n)
            for s in range(0, n, self.batch):
                bi = perm[s:s + self.batch]
                zb, yb = Z[bi], y[bi]
                h1, h2, out = self._forward(zb, params)
                W1, _, W2, _, W3, _ = params
                d = (2.0 / len(bi)) * (w[bi] * (out - yb))[:, None]
                gW3, gb3 = h2.T @ d, d.sum(0)
                d2 = (d @ W3.T) * (h2 > 0)
                gW2, gb2 = h1.T @ d2, d2.sum(0)
                d1 = (d2 @ W2.T) * (h1 > 0)
                gW1, gb1 = zb.T @ d1, d1.sum(0)
                grads = [gW1 + self.wd * W1, gb1, gW2 + self.wd * W2, gb2, gW3 + self.wd * W3, gb3]
                step += 1
                lr_t = self.lr * math.sqrt(1 - b2m ** step) / (1 - b1m ** step)
                for i, gr in enumerate(grads):
                    m[i] = b1m * m[i] + (1 - b1m) * gr
                    v[i] = b2m * v[i] + (1 - b2m) * gr * gr
                    params[i] = params[i] - lr_t * m[i] / (np.sqrt(v[i]) + eps)
        self.params = params
        return self

    def predict(self, X):
        Z = (X - self.mu) / self.sd
        return self._forward(Z, self.params)[2] * self.r_sd + self.r_mu

    def hyperparameters(self) -> dict:
        return {"hidden": list(self.hidden), "lr": self.lr, "epochs": self.epochs, "batch": self.batch,
                "weight_decay": self.wd, "max_steps": self.max_steps}

    def to_json(self):
        return {"hidden": list(self.hidden), "mu": self.mu.tolist(), "sd": self.sd.tolist(),
                "r_mu": self.r_mu, "r_sd": self.r_sd, "params": [p.tolist() for p in self.params]}

    @classmethod
    def from_json(cls, d):
        m = cls(hidden=tuple(d["hidden"]))
        m.mu, m.sd = np.asarray(d["mu"], dtype=np.float64), np.asarray(d["sd"], dtype=np.float64)
        m.r_mu, m.r_sd = float(d["r_mu"]), float(d["r_sd"])
        m.params = [np.asarray(p, dtype=np.float64) for p in d["params"]]
        return m


_REGRESSORS = {"gbt": _GBT, "mlp": _MLP}


# ------------------------------------------------------------------------ model
def _near_best_weights(y: np.ndarray, gid: np.ndarray, tau: float = NEAR_BEST_TAU,
                       floor: float = NEAR_BEST_FLOOR) -> np.ndarray:
    """Row weights from ln(time) ``y`` and the group index ``gid`` of every row."""
    if len(y) == 0:
        return np.zeros(0)
    best = np.full(int(gid.max()) + 1, np.inf)
    np.minimum.at(best, gid, y)
    return floor + np.exp(-(y - best[gid]) / tau)


def _dtype_tag(p: Problem) -> str:
    """The dtype part of the problem key: 'bf16->bf16', 'fp32+tf32->fp32', ..."""
    return p.key.split(":")[2]


def _layout_tag(p: Problem) -> str:
    return f"{p.layout_a}/{p.layout_b}"


def _unaligned(p: Problem) -> bool:
    return not (p.aligned_a and p.aligned_b)


def domain_of(data: Dataset) -> dict:
    """What a model trained on ``data`` has seen (stored as provenance['domain']):
    ``problems`` holds [M, N, K, dtype tag, unaligned 0/1] of every training problem."""
    probs = sorted({(g.problem.m, g.problem.n, g.problem.k, _dtype_tag(g.problem), int(_unaligned(g.problem)))
                    for g in data.groups})
    return {"dtypes": sorted({_dtype_tag(g.problem) for g in data.groups}),
            "layouts": sorted({_layout_tag(g.problem) for g in data.groups}),
            "problems": [list(p) for p in probs],
            "trust_radius": TRUST_RADIUS, "zero_radius": ZERO_RADIUS}


def _matrix(data: Dataset, device: DeviceInfo, analytic: AnalyticModel):
    Xs, ys, gid = [], [], []
    for i, g in enumerate(data.groups):
        Xs.append(featurize(g.problem, g.choices, device, analytic=analytic))
        ys.append(np.log(g.times_ms))
        gid.append(np.full(len(g.choices), i))
    if not Xs:
        return np.zeros((0, len(FEATURE_NAMES))), np.zeros(0), np.zeros(0, dtype=np.int64)
    return np.concatenate(Xs), np.concatenate(ys), np.concatenate(gid)


def _base_log_ms(X: np.ndarray) -> np.ndarray:
    """ln(analytic ms) from the log2(analytic us) feature."""
    return X[:, _BASE_COL] * _LN2 - math.log(1000.0)


class LearnedModel:
    """The analytic estimate corrected by a regressor trained on measurements.

    Build with ``fit(dataset)`` or ``LearnedModel.load(path)`` (no trust check; use
    ``load_model`` for that). ``predict(problem, choices)`` returns estimated ms.
    """

    kind = "learned"

    def __init__(self, device: DeviceInfo, family: str, regressor, provenance: dict):
        self.device = device
        self.family = family
        self.regressor = regressor
        self.provenance = provenance
        self.feature_version = FEATURE_VERSION
        self.analytic = AnalyticModel(device)
        dom = provenance.get("domain") if isinstance(provenance, dict) else None
        self.domain = dom if isinstance(dom, dict) else None
        # (dtype tag, unaligned) -> log2 (M, N, K) of the training problems of that class
        by: dict[tuple, list] = defaultdict(list)
        for row in (self.domain or {}).get("problems", []):
            m, n, k, tag, un = row
            by[(tag, bool(un))].append((m, n, k))
        self._near = {c: np.log2(np.maximum(np.asarray(v, dtype=np.float64), 1.0)) for c, v in by.items()}

    def __repr__(self) -> str:
        return f"LearnedModel({self.family!r}, {self.device.name!r})"

    def trust(self, problem: Problem) -> tuple[float, str]:
        """(weight of the learned correction for ``problem``, 0..1; why). 1.0 for a model
        that records no domain (files written before the domain guard)."""
        dom = self.domain
        if not dom:
            return 1.0, "the model records no training domain"
        tag = _dtype_tag(problem)
        if tag not in dom.get("dtypes", []):
            return 0.0, f"dtype {tag} is not in its training set ({', '.join(dom.get('dtypes', []))})"
        lay = _layout_tag(problem)
        if lay not in dom.get("layouts", []):
            return 0.0, f"layout {lay} is not in its training set ({', '.join(dom.get('layouts', []))})"
        un = _unaligned(problem)
        kind = "unaligned" if un else "aligned"
        near = self._near.get((tag, un))
        if near is None or not len(near):
            return 0.0, f"no {kind} {tag} problem in its training set"
        here = np.log2(np.maximum(np.array([problem.m, problem.n, problem.k], dtype=np.float64), 1.0))
        dist = float(np.sqrt(((near - here) ** 2).sum(axis=1)).min())
        lo = float(dom.get("trust_radius", TRUST_RADIUS))
        hi = float(dom.get("zero_radius", ZERO_RADIUS))
        w = 1.0 if dist <= lo else 0.0 if dist >= hi else (hi - dist) / (hi - lo)
        return w, (f"nearest {kind} {tag} training problem {dist:.2f} log2 units of (M, N, K) away "
                   f"(full trust within {lo:g}, none beyond {hi:g})")

    def predict(self, problem: Problem, choices) -> list[float]:
        """Estimated device milliseconds per choice (lower is better)."""
        return self.predict_ms(problem, choices).tolist()

    def predict_ms(self, problem: Problem, choices) -> np.ndarray:
        b = batch(problem, choices)
        if len(b) == 0:
            return np.zeros(0)
        w, _ = self.trust(problem)
        if w <= 0.0:
            return self.analytic.predict_ms(problem, None, choice_batch=b)
        X = featurize(problem, None, self.device, analytic=self.analytic, choice_batch=b)
        corr = self.regressor.predict(X)
        est = np.exp(_base_log_ms(X) + (corr if w >= 1.0 else w * corr))
        # Families this model never saw measured (feature version 1 predates the skinny and
        # persistent TMA families) get the analytic estimate, not a correction learned on others.
        unseen = np.isin(b.fam, POST_V1)
        if unseen.any():
            est[unseen] = self.analytic.predict_ms(problem, None, choice_batch=b)[unseen]
        return est

    # ------------------------------------------------------------------ files
    def to_json(self) -> dict:
        return {"format": MODEL_FORMAT, "schema_version": MODEL_SCHEMA, "family": self.family,
                "feature_version": FEATURE_VERSION, "features": list(FEATURE_NAMES),
                "provenance": self.provenance, "params": self.regressor.to_json()}

    def save(self, path: str | os.PathLike) -> Path:
        """Write the model as JSON (atomically); floats round-trip exactly."""
        path = Path(path)
        if not path.resolve().parent.is_dir():
            raise ModelError(f"cannot write {path}: directory {path.resolve().parent} does not exist")
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), sort_keys=True) + "\n")
        os.replace(tmp, path)
        return path

    @classmethod
    def from_json(cls, doc: dict, source: str = "<model>") -> "LearnedModel":
        if not isinstance(doc, dict) or doc.get("format") != MODEL_FORMAT:
            raise ModelError(f"{source}: not a gemmtune performance model (format != {MODEL_FORMAT!r})")
        if doc.get("schema_version") != MODEL_SCHEMA:
            raise ModelError(f"{source}: model schema {doc.get('schema_version')!r}, this gemmtune reads "
                             f"{MODEL_SCHEMA}")
        fam = doc.get("family")
        if fam not in _REGRESSORS:
            raise ModelError(f"{source}: unknown model family {fam!r}; known: {', '.join(_REGRESSORS)}")
        try:
            prov = doc["provenance"]
            d = dict(prov["device"])
            d["capability"] = tuple(d["capability"])
            device = DeviceInfo(**d)
            reg = _REGRESSORS[fam].from_json(doc["params"])
        except (KeyError, TypeError, ValueError) as e:
            raise ModelError(f"{source}: malformed model file: {type(e).__name__}: {e}") from None
        m = cls(device, fam, reg, prov)
        m.feature_version = doc.get("feature_version")
        if doc.get("features") != list(FEATURE_NAMES) and m.feature_version == FEATURE_VERSION:
            raise ModelError(f"{source}: its feature names differ from feature version {FEATURE_VERSION}'s")
        return m

    @classmethod
    def load(cls, path: str | os.PathLike) -> "LearnedModel":
        path = Path(path)
        return cls.from_json(read_json(path, ModelError), str(path))


def _device_for(data: Dataset, device: DeviceInfo | str | None) -> DeviceInfo:
    if isinstance(device, DeviceInfo):
        return device
    name = device or data.context.get("device_name", "")
    try:
        return DeviceInfo.lookup(name)
    except ValueError:
        raise ModelError(f"the training rows come from {data.context.get('device_name')!r}, which is not a "
                         "built-in GPU: pass device= (a DeviceInfo or h100/h200/a100) for its facts") from None


def _fit_one(kind: str, X, y, seed: int, w=None):
    r = y - _base_log_ms(X)
    return _REGRESSORS[kind](seed=seed).fit(X, r, w)


def _weights(weighting: str, y, gid):
    return _near_best_weights(y, gid) if weighting == "near_best" else None


def _score(kind_reg, X, y, gid) -> float:
    pred = _base_log_ms(X) + kind_reg.predict(X)
    sps = [spearman(pred[gid == g], y[gid == g]) for g in np.unique(gid)]
    sps = [s for s in sps if not math.isnan(s)]
    return float(np.mean(sps)) if sps else float("nan")


def fit(data: Dataset, *, kind: str = "auto", device: DeviceInfo | str | None = None, seed: int = 0,
        description: dict | None = None, weighting: str = "near_best") -> tuple[LearnedModel, dict]:
    """Train on every group of ``data`` (split it first: see ``train``).

    ``kind``: 'gbt', 'mlp' or 'auto' (both on 80% of the shapes, the better mean
    Spearman on the other 20% wins, then refit on all). ``weighting``: 'near_best'
    (rows near their shape's best weigh more; see the module docstring) or 'none'.
    Returns (model, report).
    """
    if kind not in ("auto", *_REGRESSORS):
        raise ModelError(f"kind must be auto, gbt or mlp, not {kind!r}")
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
        Xv, yv, gv = _matrix(val_d, dev, analytic)
        wf = _weights(weighting, yf, gf)
        scores = {k: _score(_fit_one(k, Xf, yf, seed, wf), Xv, yv, gv) for k in _REGRESSORS}
        scores["analytic"] = _score(_Zero(), Xv, yv, gv)
        kind = max(_REGRESSORS, key=lambda k: (-1e9 if math.isnan(scores[k]) else scores[k]))
        report["selection"] = {"validation_shapes": len(val_d.groups), "mean_spearman": scores,
                               "chosen": kind}
    X, y, gid = _matrix(data, dev, analytic)
    reg = _fit_one(kind, X, y, seed, _weights(weighting, y, gid))
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
        "trained_with": {"torch": torch.__version__, "triton": triton.__version__, "numpy": np.__version__},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "feature_version": FEATURE_VERSION,
        "training_set": {"source": data.source, "rows": int(len(y)), "shapes": len(data.shapes),
                         "problems": len(data.groups), **(description or {})},
        "training": {"kind": kind, "seed": seed, "weighting": weighting,
                     **({"near_best_tau": NEAR_BEST_TAU, "near_best_floor": NEAR_BEST_FLOOR}
                        if weighting == "near_best" else {}),
                     "regressor": reg.hyperparameters()},
        "domain": domain_of(data),
    }
    report["family"] = kind
    report["fit_s"] = time.monotonic() - t0
    prov["training_report"] = dict(report)
    return LearnedModel(dev, kind, reg, prov), report


class _Zero:
    def predict(self, X):
        return np.zeros(len(X))


def train(path: str | os.PathLike, *, exclude_suites=("public",), test_fraction: float = 0.2,
          kind: str = "auto", seed: int = 0, device: DeviceInfo | str | None = None,
          device_name: str | None = None, strata=None,
          weighting: str = "near_best") -> tuple[LearnedModel, dict]:
    """Load a store, drop the excluded suites' shapes, split by shape, fit, and evaluate
    on the held-out shapes (the learned model and the analytic one side by side).

    Returns (model, report); ``report['held_out']`` and ``report['held_out_analytic']``
    hold the summaries. The model's provenance records the same.
    """
    data = load_dataset(path, device_name=device_name)
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
    # Scored only where the sample is big enough to rank (Dataset.ranked); trained on everything.
    te_all, te = te, te.ranked()
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


# ---------------------------------------------------------------------- loading
def _device_info(device: DeviceInfo | str | None, fallback: DeviceInfo) -> DeviceInfo:
    if isinstance(device, DeviceInfo):
        return device
    if isinstance(device, str):
        try:
            return DeviceInfo.lookup(device)
        except ValueError:
            return fallback
    return fallback


def load_model(path: str | os.PathLike, device: DeviceInfo | str | None = None, *,
               triton_version: str | None = None):
    """A model to rank choices with: the learned model at ``path`` when it can be trusted
    here, else an ``AnalyticModel`` for ``device`` after a ``ModelWarning``.

    Trusted means: made on the GPU ``device`` names (compared without case; skipped when
    ``device`` is None), with the same triton MAJOR.MINOR as ``triton_version`` (default:
    the installed triton), and with this gemmtune's feature version. A file that is not
    a model at all raises ``ModelError``.

    Example::

        >>> m = load_model("model.json", device="h100")   # doctest: +SKIP
    """
    model = LearnedModel.load(path)
    prov = model.provenance
    if triton_version is None:
        import triton
        triton_version = triton.__version__
    why = []
    if device is not None:
        name = _device_info(device, model.device).name if not isinstance(device, str) else device
        if isinstance(device, str):
            try:
                name = DeviceInfo.lookup(device).name
            except ValueError:
                pass
        if name.strip().lower() != str(prov.get("device_name", "")).strip().lower():
            why.append(f"it was trained on {prov.get('device_name')!r}, this is {name!r}")
    if major_minor(prov.get("triton", "")) != major_minor(triton_version):
        why.append(f"it was trained with triton {prov.get('triton')!r}, this is triton {triton_version!r} "
                   "(another MAJOR.MINOR generates other code)")
    if model.feature_version != FEATURE_VERSION:
        why.append(f"its feature version {model.feature_version} is not this gemmtune's {FEATURE_VERSION}")
    if why:
        warnings.warn(f"{path}: not using the learned model: {'; '.join(why)}; ranking with the "
                      "analytic model instead", ModelWarning, stacklevel=2)
        return AnalyticModel(_device_info(device, model.device))
    return model
