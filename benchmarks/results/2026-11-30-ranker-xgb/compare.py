"""XGBoost's XGBRanker (LambdaMART, ``xgboost.train`` with a ``rank:*`` objective) against the shipped
LightGBM ranker (lgbm_rank, ``regressors._LGBMRanker`` at its shipped settings) on the shipped
rankers' own 5-fold cross-validation by shape, for each GPU store a shipped ranker is trained on:

* ``h200``: data/collect/collect.sqlite.gz pooled with data/collect/h100/collect.sqlite.gz, the
  public suite's shapes left out, device h200 (nvidia-h200-rank.json's training set);
* ``h100``: data/collect/h100/collect.sqlite.gz alone, nothing left out, device h100
  (nvidia-h100-rank.json's).

The same data, folds (``cv.folds_by_group`` via ``cv.cross_validate``, fold seed 0, dealt per
collection-plan shape group: what ``gemmtune train --cv 5`` does), features, labels and metrics
for both libraries; nothing here splits folds itself. The XGBoost ranker is defined in this
script only (``XGBRanker`` below): it is not a gemmtune model kind (see README.md). CPU only,
committed data. It needs xgboost (``pip install xgboost``; 3.2.0 was measured) besides lightgbm:

    PYTHONPATH=src python benchmarks/results/2026-11-30-ranker-xgb/compare.py all [h200|h100 ...]
    PYTHONPATH=src python benchmarks/results/2026-11-30-ranker-xgb/compare.py seeds STORE SETTING [SETTING ...]
    PYTHONPATH=src python benchmarks/results/2026-11-30-ranker-xgb/compare.py grid STORE [SETTING ...]
    PYTHONPATH=src python benchmarks/results/2026-11-30-ranker-xgb/compare.py table

``all``: for each store named (default both), model seeds 0-2 of ``lgbm`` and of ``XGB_SETTING``
(the best seed-0 top-1 of the H200 grid in grid-seed0-earlier-run.json), lgbm and xgb interleaved
seed by seed. Each (store, setting, model seed) is one ``cross_validate`` call with the fold seed
fixed at 0, so the model seed (LightGBM's bagging / feature fraction, XGBoost's subsample /
colsample) varies and the split does not. Every fit and predict uses ONE thread. Results are
appended to results.json beside this file (a run resumes: a (store, setting, seed) already there
is skipped). ``fit_s``: the ranker's own ``fit`` (labels, dataset, boosting, scale calibration)
summed over the 5 folds; ``predict_s``: its ``predict`` on the held-out problems (one call per
problem, as the tuner calls it), summed over the folds; featurizing is in neither. Kendall's tau
(scipy's tau-b, per problem, then the mean) is computed here beside the library's metrics.

Speed-ups that change no number: each problem's feature rows are computed once and reused by
every fold and setting (``training._matrix`` and the scoring ``featurize`` memoized per problem;
both are deterministic functions of the problem, its choices and the GPU).
"""

from __future__ import annotations

import faulthandler
import functools
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "src"))

from gemmtune.model import cv as cvmod  # noqa: E402
from gemmtune.model import learned, training  # noqa: E402
from gemmtune.model.data import exclude, load_dataset, pool, suite_shapes  # noqa: E402
from gemmtune.model.errors import ModelError  # noqa: E402
from gemmtune.model.regressors import RANKERS, _LGBMRanker, ratio_to_best, relevance  # noqa: E402

OUT = HERE / "results.json"
H200_STORE = "data/collect/collect.sqlite.gz"
H100_STORE = "data/collect/h100/collect.sqlite.gz"
# store -> (store, pooled stores, suite left out or None, device): the shipped rankers' training sets
STORES = {"h200": (H200_STORE, [H100_STORE], "public", "h200"),
          "h100": (H100_STORE, [], None, "h100")}
THREADS = 1


class XGBRanker:
    """XGBoost learning to rank over each problem's choices: scores, higher = faster. The same
    labels as ``_LGBMRanker`` (``relevance`` grades in 5% steps, gain 2**label - 1: XGBoost's
    ``ndcg_exp_gain``), grouped by problem (``qid``), and the same ``scale`` calibration, so the
    two differ only in the boosting library. ``hist`` trees on the CPU. ``rank:map`` takes binary
    labels only: there a choice is relevant when it is within 10% of its problem's best."""

    outputs = "score"  # LearnedModel: higher = faster, as _LGBMRanker

    def __init__(self, n_trees=300, lr=0.05, max_depth=6, max_leaves=0, min_child_weight=1.0, subsample=0.8,
                 colsample=0.9, objective="rank:ndcg", pair_method="topk", num_pair=None, reg_lambda=1.0,
                 label_step=0.05, label_levels=15, seed=0, threads=1):
        self.n_trees, self.lr, self.max_depth, self.max_leaves = n_trees, lr, max_depth, max_leaves
        self.min_child_weight, self.subsample, self.colsample = min_child_weight, subsample, colsample
        self.objective, self.pair_method, self.num_pair, self.reg_lambda = objective, pair_method, num_pair, reg_lambda
        self.label_step, self.label_levels, self.seed, self.threads = label_step, label_levels, seed, threads
        self.booster = None
        self.scale = 1.0

    def _params(self) -> dict:
        p = {"objective": self.objective, "eta": self.lr, "max_depth": self.max_depth,
             "min_child_weight": self.min_child_weight, "subsample": self.subsample,
             "colsample_bytree": self.colsample, "lambda": self.reg_lambda, "tree_method": "hist",
             "lambdarank_pair_method": self.pair_method, "ndcg_exp_gain": True, "seed": self.seed,
             "nthread": self.threads, "verbosity": 0, "device": "cpu"}
        if self.max_leaves:
            p.update(grow_policy="lossguide", max_leaves=self.max_leaves)
        if self.num_pair is not None:
            p["lambdarank_num_pair_per_sample"] = self.num_pair
        return p

    def fit(self, X, y, gid):
        import xgboost as xgb

        gid = np.asarray(gid)
        if len(gid) and np.any(np.diff(gid) < 0):
            raise ModelError("ranker rows must be grouped by problem (gid non-decreasing)")
        if self.objective == "rank:map":
            labels = (ratio_to_best(y, gid) <= math.log(1.1) + 1e-9).astype(np.int64)
        else:
            labels = relevance(y, gid, self.label_step, self.label_levels)
        ds = xgb.DMatrix(np.asarray(X, dtype=np.float64), label=labels, qid=gid, nthread=self.threads)
        self.booster = xgb.train(self._params(), ds, num_boost_round=self.n_trees)
        self.scale = _LGBMRanker._calibrate(self.predict(X), y, gid)
        return self

    def predict(self, X):
        return np.asarray(self.booster.inplace_predict(np.asarray(X, dtype=np.float64)), dtype=np.float64)

    def hyperparameters(self) -> dict:
        return {"n_trees": self.n_trees, "lr": self.lr, "max_depth": self.max_depth, "max_leaves": self.max_leaves,
                "min_child_weight": self.min_child_weight, "subsample": self.subsample, "colsample": self.colsample,
                "objective": self.objective, "pair_method": self.pair_method, "num_pair": self.num_pair,
                "reg_lambda": self.reg_lambda, "label_step": self.label_step, "label_levels": self.label_levels,
                "gain": "2**label - 1"}


# name -> (class, hyperparameters). "lgbm" is the shipped ranker's settings (regressors._LGBMRanker's
# defaults); the xgb settings are the grid of grid-seed0-earlier-run.json (H200 store, seed 0).
SETTINGS = {
    "lgbm": (_LGBMRanker, {}),
    "xgb-ndcg-d6-e05-n300": (XGBRanker, dict(objective="rank:ndcg", max_depth=6, lr=0.05, n_trees=300)),
    "xgb-ndcg-d8-e05-n300": (XGBRanker, dict(objective="rank:ndcg", max_depth=8, lr=0.05, n_trees=300)),
    "xgb-ndcg-d4-e10-n300": (XGBRanker, dict(objective="rank:ndcg", max_depth=4, lr=0.1, n_trees=300)),
    "xgb-ndcg-d6-e05-n600": (XGBRanker, dict(objective="rank:ndcg", max_depth=6, lr=0.05, n_trees=600)),
    "xgb-ndcg-d8-e05-n600": (XGBRanker, dict(objective="rank:ndcg", max_depth=8, lr=0.05, n_trees=600)),
    "xgb-ndcg-d6-e10-n200": (XGBRanker, dict(objective="rank:ndcg", max_depth=6, lr=0.1, n_trees=200)),
    "xgb-ndcg-leaves31-e05-n300": (XGBRanker, dict(objective="rank:ndcg", max_depth=0, max_leaves=31, lr=0.05,
                                                   n_trees=300, min_child_weight=0.0)),
    "xgb-ndcg-mean8-d6-e05-n300": (XGBRanker, dict(objective="rank:ndcg", pair_method="mean", num_pair=8,
                                                   max_depth=6, lr=0.05, n_trees=300)),
    "xgb-ndcg-top64-d6-e05-n300": (XGBRanker, dict(objective="rank:ndcg", pair_method="topk", num_pair=64,
                                                   max_depth=6, lr=0.05, n_trees=300)),
    "xgb-pairwise-mean8-d6-e05-n300": (XGBRanker, dict(objective="rank:pairwise", pair_method="mean", num_pair=8,
                                                       max_depth=6, lr=0.05, n_trees=300)),
    "xgb-pairwise-top32-d6-e05-n300": (XGBRanker, dict(objective="rank:pairwise", pair_method="topk",
                                                       max_depth=6, lr=0.05, n_trees=300)),
    "xgb-map10-d6-e05-n300": (XGBRanker, dict(objective="rank:map", max_depth=6, lr=0.05, n_trees=300)),
}
XGB_SETTING = "xgb-ndcg-d8-e05-n600"
KEYS = ("top1_within_10pct", "top1_regret_geomean", "top5_regret_geomean", "top5_within_10pct", "spearman_mean",
        "tuner_top1_within_10pct", "top1_found")

TIMES: dict[str, dict] = {}
KENDALL: dict[str, list] = {}


def _timed(cls, params, model_seed, name):
    """A RANKERS factory: ``cls`` with ``params``, ``model_seed`` whatever seed the CV passes (that
    seed deals the folds, kept at 0) and one thread; its fit and (held-out) predict times summed
    into TIMES[name]."""
    t = TIMES.setdefault(name, {"fit_s": 0.0, "predict_s": 0.0, "predict_rows": 0})

    def make(seed=0):
        r = cls(**params, seed=model_seed, threads=THREADS)
        fit, predict = r.fit, r.predict

        def timed_predict(X):
            t0 = time.perf_counter()
            out = predict(X)
            t["predict_s"] += time.perf_counter() - t0
            t["predict_rows"] += len(X)
            return out

        def timed_fit(X, y, gid):
            t0 = time.perf_counter()
            out = fit(X, y, gid)
            t["fit_s"] += time.perf_counter() - t0
            r.predict = timed_predict  # after fit: its own calibration predict is fit time
            return out
        r.fit = timed_fit
        return r
    return make


def _patch():
    """Per-problem feature rows computed once (pure functions of their arguments), and Kendall's
    tau recorded beside cv.score's metrics."""
    rows: dict = {}
    orig_matrix = training._matrix

    def matrix(data, device, analytic):
        parts = []
        for g in data.groups:
            if id(g) not in rows:
                one = type(data)([g], data.context, data.source, [])
                X, y, _ = orig_matrix(one, device, analytic)
                rows[id(g)] = (g, X, y)  # g held so its id stays its own
            parts.append(rows[id(g)])
        if not parts:
            return orig_matrix(data, device, analytic)
        X = np.concatenate([p[1] for p in parts])
        y = np.concatenate([p[2] for p in parts])
        gid = np.concatenate([np.full(len(p[2]), i) for i, p in enumerate(parts)])
        return X, y, gid
    training._matrix = matrix

    feats: dict = {}
    orig_featurize = learned.featurize

    @functools.wraps(orig_featurize)
    def featurize(problem, choices, device, *, analytic=None, choice_batch=None):
        if choice_batch is None:
            return orig_featurize(problem, choices, device, analytic=analytic)
        key = (id(problem), device.name, choice_batch.fam.tobytes(), len(choice_batch))
        if key not in feats:
            feats[key] = (problem, orig_featurize(problem, None, device, analytic=analytic, choice_batch=choice_batch))
        return feats[key][1]
    learned.featurize = featurize

    from scipy.stats import kendalltau

    orig_score, orig_predict_ms = cvmod.score, cvmod._predict_ms

    def score(model, data):
        preds: list = []

        def predict_ms(m, p, c):
            preds.append(np.asarray(orig_predict_ms(m, p, c), dtype=np.float64))
            return preds[-1]
        cvmod._predict_ms = predict_ms
        try:
            out = orig_score(model, data)
        finally:
            cvmod._predict_ms = orig_predict_ms
        name = "analytic" if not isinstance(model, learned.LearnedModel) else CURRENT[0]
        for g, pred in zip(data.groups, preds):
            tau = kendalltau(np.where(np.isfinite(pred), pred, np.inf), g.times_ms).statistic
            if not math.isnan(tau):
                KENDALL.setdefault(name, []).append(float(tau))
        return out
    cvmod.score = score


CURRENT = [""]


@functools.cache
def _prepared(store):
    path, pools, suite, device = STORES[store]
    data = load_dataset(ROOT / path)
    if pools:
        data = pool(data, [load_dataset(ROOT / p) for p in pools])
    n_excl = 0
    if suite:
        data, n_excl = exclude(data, suite_shapes(suite))
    return data, n_excl, cvmod.shape_groups()


def versions() -> dict:
    import lightgbm
    import scipy
    import xgboost
    return {"xgboost": xgboost.__version__, "lightgbm": lightgbm.__version__, "numpy": np.__version__,
            "scipy": scipy.__version__, "python": platform.python_version(), "machine": platform.machine()}


def run(store, pairs):
    doc = json.loads(OUT.read_text()) if OUT.exists() else {"runs": []}
    done = {(r["store"], r["setting"], r["model_seed"]) for r in doc["runs"]}
    todo = [p for p in pairs if (store, *p) not in done]
    if not todo:
        return doc
    data, n_excl, groups = _prepared(store)
    path, pools, suite, device = STORES[store]
    for setting, seed in todo:
        cls, params = SETTINGS[setting]
        name = f"{store}:{setting}@{seed}"
        RANKERS[name] = _timed(cls, params, seed, name)
        CURRENT[0] = name
        KENDALL.pop(name, None)
        KENDALL.pop("analytic", None)
        t0 = time.perf_counter()
        res = cvmod.cross_validate(data, kinds=[name], folds=5, seed=0, groups=groups, device=device,
                                   say=lambda m: print(f"{name}: {m} ({time.perf_counter() - t0:.0f} s)",
                                                       file=sys.stderr, flush=True))
        del RANKERS[name]
        s = res["summaries"][name]
        tm = TIMES[name]
        doc["runs"].append({"store": store, "setting": setting, "model_seed": seed,
                            "params": cls(**params).hyperparameters(),
                            "library": "xgboost" if cls is XGBRanker else "lightgbm",
                            "summary": {**{k: s.get(k) for k in KEYS},
                                        "kendall_mean": float(np.mean(KENDALL[name]))},
                            "threads": THREADS, **tm, "cv_wall_s": time.perf_counter() - t0,
                            "analytic": {**{k: res["summaries"]["analytic"].get(k) for k in KEYS},
                                         "kendall_mean": float(np.mean(KENDALL["analytic"]))},
                            "shapes": res["shapes"], "problems": res["problems"], "rows": res["rows"],
                            "scored": res["scored"], "excluded_problems": n_excl})
        doc.setdefault("stores", {})[store] = {"store": path, "pool_stores": pools, "exclude_suite": suite,
                                               "device": device, "folds": 5, "fold_seed": 0}
        doc.update(versions=versions(), date=time.strftime("%Y-%m-%d", time.gmtime()))
        OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        print(f"{name}: top-1 within 10% {s['top1_within_10pct']:.4f}, top-5 regret {s['top5_regret_geomean']:.4f}, "
              f"spearman {s['spearman_mean']:.4f}, kendall {np.mean(KENDALL[name]):.4f}, "
              f"fit {tm['fit_s']:.1f} s, predict {tm['predict_s']:.2f} s", flush=True)
    return doc


def _cell(vals, scale=100.0, nd=1, unit="%"):
    v = np.array(vals, dtype=np.float64) * scale
    f = f"{{:.{nd}f}}"
    if len(v) == 1:
        return f.format(v[0]) + unit
    return f"{f.format(v.mean())}{unit} ± {f.format(v.std(ddof=1))} [{f.format(v.min())}, {f.format(v.max())}]"


def table(doc) -> str:
    """Mean ± sample standard deviation [min, max] over the model seeds of each (store, setting)."""
    by: dict = {}
    for r in doc["runs"]:
        by.setdefault((r["store"], r["setting"]), []).append(r)
    lines = ["| store | setting | seeds | top-1 within 10% | top-5 regret (geomean) | top-1 regret (geomean) | "
             "Spearman (mean) | Kendall tau-b (mean) | fit s (5 folds, 1 thread) | predict s (5 folds) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (store, setting), rs in by.items():
        rs = sorted(rs, key=lambda r: r["model_seed"])
        s = [r["summary"] for r in rs]
        lines.append(f"| {store} | {setting} | {','.join(str(r['model_seed']) for r in rs)} | "
                     f"{_cell([x['top1_within_10pct'] for x in s])} | "
                     f"{_cell([x['top5_regret_geomean'] for x in s], nd=2)} | "
                     f"{_cell([x['top1_regret_geomean'] for x in s], nd=2)} | "
                     f"{_cell([x['spearman_mean'] for x in s], 1.0, 3, '')} | "
                     f"{_cell([x['kendall_mean'] for x in s], 1.0, 3, '')} | "
                     f"{_cell([r['fit_s'] for r in rs], 1.0, 0, '')} | {_cell([r['predict_s'] for r in rs], 1.0, 2, '')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    faulthandler.enable()
    what = sys.argv[1] if len(sys.argv) > 1 else "table"
    if what in ("all", "seeds", "grid"):
        try:
            import lightgbm  # noqa: F401
            import xgboost  # noqa: F401
        except ImportError as e:
            sys.exit(f"compare.py needs xgboost and lightgbm ({e}): pip install xgboost lightgbm")
        _patch()
    if what == "all":
        for store in sys.argv[2:] or list(STORES):
            doc = run(store, [(s, seed) for seed in (0, 1, 2) for s in ("lgbm", XGB_SETTING)])
    elif what == "seeds":
        doc = run(sys.argv[2], [(s, seed) for seed in (0, 1, 2) for s in sys.argv[3:]])
    elif what == "grid":
        doc = run(sys.argv[2], [(s, 0) for s in sys.argv[3:] or list(SETTINGS)])
    else:
        doc = json.loads(OUT.read_text())
    print(table(doc))
