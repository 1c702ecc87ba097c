"""The regressors a LearnedModel corrects the analytic estimate with, in plain numpy
(``gbt``: gradient-boosted oblivious trees; ``mlp``: a 2-layer ReLU network), and the
LightGBM lambdarank ranker (``lgbm_rank``) that scores instead of timing.
The regressors have ``fit(X, r, w)`` (r: ln-time residuals), ``predict(X)``,
``hyperparameters()`` and a JSON round trip; the ranker has ``fit(X, y, gid)`` (y: ln
times, gid: each row's problem), ``predict(X)`` (scores, higher = faster) and a round
trip through LightGBM's own text format (no pickle).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import math
import os

import numpy as np

from .errors import ModelDependencyError, ModelError
from .lgbm_text import TextBooster

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


# ---------------------------------------------------------------------- ranker
def import_lightgbm():
    """lightgbm, or a one-line ModelDependencyError saying how to get it."""
    try:
        import lightgbm
    except ImportError as e:  # ImportError too when the module is present but broken
        raise ModelDependencyError(f"this model needs lightgbm, which does not import here ({e}); "
                                   "install it with: pip install 'gemmtune[learn]'") from None
    return lightgbm


_PREFETCH: list = []  # prefetch_lightgbm's thread, while one has been started


def prefetch_lightgbm():
    """Import lightgbm on a daemon thread, so that its import (1.5-3.5 s, most of it the
    scikit-learn that lightgbm's compat module imports) overlaps with what the caller waits for
    meanwhile, e.g. the benchmark workers starting. A ranker loaded while the import still runs
    predicts through numpy until it is done (``SwitchingBooster``), rather than wait on the
    import lock. Returns the thread, or None when lightgbm is already imported. An import error
    is left for ``import_lightgbm`` to report."""
    import sys
    import threading

    if "lightgbm" in sys.modules and not lightgbm_importing():
        return None

    def run():
        try:
            import lightgbm  # noqa: F401
        except Exception:  # noqa: BLE001 - reported by import_lightgbm when the model is loaded
            pass
    t = threading.Thread(target=run, name="gemmtune-import-lightgbm", daemon=True)
    _PREFETCH[:] = [t]
    t.start()
    return t


def lightgbm_importing() -> bool:
    """Whether prefetch_lightgbm's import is still running."""
    return bool(_PREFETCH) and _PREFETCH[0].is_alive()


class SwitchingBooster:
    """A booster that predicts with lgbm_text's numpy reader (``TextBooster``: the same scores)
    while lightgbm's background import (prefetch_lightgbm) runs, and with lightgbm's own booster
    once it has finished. Why: the entry point pre-starts the benchmark worker, which is then
    ready before that import ends (1.2-3.6 s on the 2-core CPU machine; 3.1-3.9 s of a cold tune
    on an H100, benchmarks/results/2026-11-26-h100-cold-start), and loading the ranker waited on
    the import lock for the rest. (Not the cause of the 2.7 s a 12-shape ``tune --fast`` took to
    send its first candidate on the H200 in session 44: that machine has no lightgbm.)"""

    def __init__(self, text: str, text_booster):
        self._text, self._numpy, self._lgb = text, text_booster, None
        self.num_feature = text_booster.num_feature

    def _current(self):
        if self._lgb is None and not lightgbm_importing():
            try:
                self._lgb = import_lightgbm().Booster(model_str=self._text)
            except Exception:  # noqa: BLE001 - no lightgbm here, or it fails on this text: numpy goes on
                self._lgb = self._numpy
        return self._lgb if self._lgb is not None else self._numpy

    def num_trees(self) -> int:
        return self._numpy.num_trees()

    def model_to_string(self) -> str:
        return self._text

    def predict(self, X, num_threads: int | None = None):
        return self._current().predict(X, num_threads=num_threads)


def ratio_to_best(y: np.ndarray, gid: np.ndarray) -> np.ndarray:
    """ln(time / the problem's best time) of every row, from ln times ``y`` and problems ``gid``."""
    best = np.full(int(gid.max()) + 1, np.inf)
    np.minimum.at(best, gid, y)
    return y - best[gid]


def relevance_edges(y: np.ndarray, gid: np.ndarray, edges) -> np.ndarray:
    """Graded relevance from ratio edges: the number of ``edges`` (time / the problem's best)
    a row's ratio does not exceed, so the best gets ``len(edges)`` and anything slower than the
    last edge 0.

    >>> relevance_edges(np.log([1.0, 1.04, 1.2, 9.0]), np.zeros(4, dtype=int), (1.02, 1.05, 1.1, 1.5)).tolist()
    [4, 3, 1, 0]
    """
    if len(y) == 0:
        return np.zeros(0, dtype=np.int64)
    lr = ratio_to_best(y, gid)
    e = np.log(np.asarray(edges, dtype=np.float64))
    return (lr[:, None] <= e[None, :] + 1e-9).sum(axis=1).astype(np.int64)


def relevance(y: np.ndarray, gid: np.ndarray, step: float = 0.05, levels: int = 15) -> np.ndarray:
    """Graded relevance of every row from ln time ``y`` and its problem ``gid``: ``levels``
    for the problem's best, one less per factor (1 + step) slower, 0 from (1 + step)**levels
    (2.08x for the defaults) on.

    >>> relevance(np.log([1.0, 1.04, 1.2, 9.0]), np.zeros(4, dtype=int)).tolist()
    [15, 15, 12, 0]
    """
    if len(y) == 0:
        return np.zeros(0, dtype=np.int64)
    steps = np.floor(ratio_to_best(y, gid) / math.log1p(step) + 1e-9)
    return np.clip(levels - steps, 0, levels).astype(np.int64)


def checked_booster(text: str, d: dict, n_features: int, source: str) -> TextBooster:
    """The booster ``text`` of the model file ``source`` read by lgbm_text, which checks its trees
    (features in range, array lengths that fit num_leaves, children that make a tree, tree_sizes,
    not cut short), and checked against what the JSON ``d`` records: its feature and tree counts.
    ModelError, one line naming the booster file, otherwise.

    Why before lightgbm reads it: the sha256 in the JSON only says the two files were saved
    together, and an edit with the sha256 updated loaded; lightgbm then aborted the process on a
    tree at a stale offset, or read past a tree's arrays, and the numpy predictor raised a bare
    IndexError, looped forever, or ranked with half the trees, silently."""
    name = d.get("booster_file")
    try:
        trees = TextBooster(text)
    except ModelError as e:
        raise ModelError(f"{source}: its booster file {name!r} is not a LightGBM model gemmtune can use: "
                         f"{e}") from None
    if trees.num_feature != d.get("num_feature"):
        raise ModelError(f"{source}: its booster file {name!r} takes {trees.num_feature} features, the model "
                         f"JSON records {d.get('num_feature')!r}: edited; save the model again")
    if d.get("num_feature") != n_features:
        raise ModelError(f"{source}: its booster takes {trees.num_feature} features, this gemmtune's "
                         f"feature set has {n_features}")
    if trees.num_trees() != d.get("num_trees"):
        raise ModelError(f"{source}: its booster file {name!r} has {trees.num_trees()} trees, the model JSON "
                         f"records {d.get('num_trees')!r}: cut short or edited; save the model again")
    return trees


# LightGBM's threads for a ranker made with threads=None, set for a block by ``training_threads``
# (``gemmtune train --threads``): a shared machine's user keeps training off the other jobs' cores.
_TRAIN_THREADS: contextvars.ContextVar[int | None] = contextvars.ContextVar("gemmtune_train_threads", default=None)


@contextlib.contextmanager
def training_threads(n: int | None):
    """Within the block, rankers made without ``threads`` train and predict on ``n`` CPU threads
    (None: the default, min(cores, 8)).

    >>> with training_threads(2):
    ...     _LGBMRanker().threads
    2
    >>> training_threads(0).__enter__()
    Traceback (most recent call last):
    ...
    ValueError: training threads must be an int >= 1 (or None for the default), got 0
    """
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"training threads must be an int >= 1 (or None for the default), got {n!r}")
    token = _TRAIN_THREADS.set(n)
    try:
        yield
    finally:
        _TRAIN_THREADS.reset(token)


class _LGBMRanker:
    """LightGBM lambdarank (NDCG) over each problem's choices: scores, higher = faster.

    Labels are ``relevance`` grades (5% steps) with LightGBM's default exponential gain
    (2**label - 1), so the loss is dominated by the choices near each problem's best: on
    the H200 held-out split (benchmarks/results/2026-11-24-ranker) this beat linear gain
    and 10%/3% steps on top-1 within 10% (88.4% against 86.1-87.3%).

    ``scale``: ln-time units per score unit, fitted on the training problems (least
    squares through 0 of ln(t / t_top) on (score_top - score) over each problem's first
    20 by score), so that ``-scale * score`` differences read like ln-time gaps; the
    adaptive top-k (``topk.choose_k``) and the blend with the analytic estimate use it.

    ``num_leaves`` 127 (31 before 2026-12-03): on 5-fold CV by shape, model seeds 0-2, top-1
    within 10% 85.7% against 85.0% (H200) and 82.6% against 80.9% (H100) at fold seed 0, and
    86.5% against 84.8%, 82.5% against 79.8% at fold seed 1, with lower top-5 regret on both
    (benchmarks/results/2026-12-03-ranker-s57).
    """

    outputs = "score"

    def __init__(self, n_trees=300, lr=0.05, num_leaves=127, min_data_in_leaf=20, bagging=0.8,
                 feature_fraction=0.9, label_step=0.05, label_levels=15, seed=0, threads=None,
                 truncation=None, label_edges=None, lambda_l2=0.0, objective="lambdarank", group_weight=None):
        self.n_trees, self.lr, self.num_leaves, self.min_data_in_leaf = n_trees, lr, num_leaves, min_data_in_leaf
        self.bagging, self.feature_fraction, self.seed = bagging, feature_fraction, seed
        self.label_step, self.label_levels = label_step, label_levels
        self.truncation, self.label_edges, self.lambda_l2 = truncation, label_edges, lambda_l2
        self.objective, self.group_weight = objective, group_weight
        self.threads = threads or _TRAIN_THREADS.get() or min(os.cpu_count() or 1, 8)
        self.booster = None
        self.scale = 1.0

    def _params(self) -> dict:
        extra = {"lambdarank_truncation_level": self.truncation} if self.truncation else {}
        if self.lambda_l2:
            extra["lambda_l2"] = self.lambda_l2
        if self.label_edges:
            extra["label_gain"] = [float(2 ** i - 1) for i in range(len(self.label_edges) + 1)]
        return {**extra, "objective": self.objective, "learning_rate": self.lr, "num_leaves": self.num_leaves,
                "min_data_in_leaf": self.min_data_in_leaf, "bagging_fraction": self.bagging, "bagging_freq": 1,
                "feature_fraction": self.feature_fraction, "seed": self.seed, "deterministic": True,
                "force_row_wise": True, "num_threads": self.threads, "verbose": -1}

    def fit(self, X, y, gid):
        lgb = import_lightgbm()
        gid = np.asarray(gid)
        if len(gid) and np.any(np.diff(gid) < 0):
            raise ModelError("ranker rows must be grouped by problem (gid non-decreasing)")
        _, sizes = np.unique(gid, return_counts=True)
        labels = relevance_edges(y, gid, self.label_edges) if self.label_edges else \
            relevance(y, gid, self.label_step, self.label_levels)
        ds = lgb.Dataset(X, labels, group=sizes, weight=self._group_weights(y, gid, sizes),
                         params={"verbose": -1})
        self.booster = lgb.train(self._params(), ds, num_boost_round=self.n_trees)
        self.scale = self._calibrate(self.predict(X), y, gid)
        return self

    def _group_weights(self, y, gid, sizes):
        """Row weights (one value per problem) or None: ``group_weight`` 'hard' weighs a problem
        by how few of its choices are within 10% of its best (1 + 1 / sqrt(that count))."""
        if not self.group_weight:
            return None
        if self.group_weight != "hard":
            raise ModelError(f"group_weight must be None or 'hard', not {self.group_weight!r}")
        near = np.bincount(gid, weights=(ratio_to_best(y, gid) <= np.log(1.1)).astype(np.float64))
        w = 1.0 + 1.0 / np.sqrt(np.maximum(near, 1.0))
        return w[gid]

    @staticmethod
    def _calibrate(score, y, gid, top=20) -> float:
        num = den = 0.0
        for g in np.unique(gid):
            m = np.flatnonzero(gid == g)
            o = m[np.argsort(-score[m], kind="stable")[:top]]
            dx = score[o[0]] - score[o]
            num += float(dx @ (y[o] - y[o[0]]))
            den += float(dx @ dx)
        return num / den if den > 0 and num > 0 else 1.0

    def predict(self, X):
        return self.booster.predict(np.asarray(X, dtype=np.float64), num_threads=self.threads)

    def hyperparameters(self) -> dict:
        return {"n_trees": self.n_trees, "lr": self.lr, "num_leaves": self.num_leaves,
                "min_data_in_leaf": self.min_data_in_leaf, "bagging": self.bagging,
                "feature_fraction": self.feature_fraction, "label_step": self.label_step,
                "label_levels": self.label_levels, "gain": "2**label - 1",
                # the later settings, recorded where they differ from what older files were trained with
                **({"truncation": self.truncation} if self.truncation else {}),
                **({"label_edges": list(self.label_edges)} if self.label_edges else {}),
                **({"lambda_l2": self.lambda_l2} if self.lambda_l2 else {}),
                **({"objective": self.objective} if self.objective != "lambdarank" else {}),
                **({"group_weight": self.group_weight} if self.group_weight else {})}

    def to_text(self) -> str:
        return self.booster.model_to_string()

    def to_json(self, text: str, booster_file: str) -> dict:
        """What the model JSON records about the booster file written beside it."""
        lgb = import_lightgbm()
        return {"booster_file": booster_file, "sha256": hashlib.sha256(text.encode()).hexdigest(),
                "lightgbm": lgb.__version__, "num_feature": int(self.booster.num_feature()),
                "num_trees": int(self.booster.num_trees()), "scale": self.scale, **self.hyperparameters()}

    @classmethod
    def from_text(cls, text: str, d: dict, n_features: int, source: str,
                  numpy_predict: bool = False) -> "_LGBMRanker":
        """The ranker from its booster text and the JSON ``d``; ModelError (one line) when they
        do not match (a stale booster file) or the text is not a booster gemmtune can predict from
        (``checked_booster``, before lightgbm reads it). Without lightgbm, or with ``numpy_predict``, it
        predicts with lgbm_text's numpy reader (the same scores): on the CPU machine it loads in
        0.05 s where importing lightgbm took 1.2-3.6 s, and plans a problem (~3,400-5,000
        candidates) 0.19 s slower than lightgbm, so it pays for a few problems when nothing
        overlaps the import (tuning.tuner.numpy_ranker)."""
        want = d.get("sha256")
        got = hashlib.sha256(text.encode()).hexdigest()
        if want != got:
            raise ModelError(f"{source}: its booster file {d.get('booster_file')!r} does not match the model "
                             f"JSON (sha256 {got[:12]}, recorded {str(want)[:12]}): stale or edited; "
                             "save the model again")
        trees = checked_booster(text, d, n_features, source)  # before lightgbm or numpy predicts from it
        switching = not numpy_predict and lightgbm_importing()
        try:
            lgb = None if numpy_predict or switching else import_lightgbm()
        except ModelDependencyError:
            lgb = None  # predict from the trees with numpy (lgbm_text): the same scores
        try:
            booster = lgb.Booster(model_str=text) if lgb is not None else trees
        except Exception as e:  # lightgbm raises its own LightGBMError on a bad file
            raise ModelError(f"{source}: unreadable LightGBM booster: {type(e).__name__}: {e}") from None
        if switching:
            booster = SwitchingBooster(text, trees)
        keys = ("n_trees", "lr", "num_leaves", "min_data_in_leaf", "bagging", "feature_fraction",
                "label_step", "label_levels", "truncation", "label_edges", "lambda_l2", "objective", "group_weight")
        m = cls(**{k: d[k] for k in keys if k in d})
        try:
            scale = float(d.get("scale", 1.0))
        except (TypeError, ValueError):
            scale = float("nan")
        if not (math.isfinite(scale) and scale > 0):
            # Training writes a finite scale > 0; one edited to NaN ranked every seen choice last, a
            # negative one reversed the ranking, silently (the sha256 covers only the booster).
            raise ModelError(f"{source}: its ranker scale {d.get('scale')!r} is not a finite number > 0")
        m.booster, m.scale = booster, scale
        return m


RANKERS = {"lgbm_rank": _LGBMRanker}
