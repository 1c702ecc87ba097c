"""Session 57: LightGBM ranker variants against the shipped lgbm_rank on the shipped rankers' own
5-fold CV by shape (the protocol of ../2026-11-30-ranker-xgb/compare.py, whose harness this is,
with the XGBoost ranker dropped and LightGBM variants added).

* stores ``h200`` (data/collect/collect.sqlite.gz pooled with the H100 store, public-suite shapes
  left out, device h200) and ``h100`` (the H100 store alone);
* folds: ``cv.cross_validate`` -> ``cv.folds_by_group``, fold seed 0; model seeds 0, 1, 2;
* problems with >= 20 measured choices scored; labels ``relevance`` grades, 5% steps, gain 2**l-1;
* ONE thread for every fit and predict.

Variants (``SETTINGS``):
* ``lgbm``: shipped until 2026-12-03 (``regressors._LGBMRanker`` defaults then; 31 leaves, pinned).
* ``xendcg``: objective rank_xendcg, else shipped.
* ``lab025``: labels in 2.5% steps, 30 levels (same 75% range), else shipped.
* ``trunc10``: lambdarank_truncation_level 10.
* ``trunc10``, ``lr025-n600`` (lr 0.025, 600 trees), ``leaves63``, ``leaves127``, ``mdl5`` (min_data_in_leaf 5),
  ``ff05`` (feature_fraction 0.5): one LightGBM setting changed each.
* ``rel`` / ``relall``: per-problem relative analytic columns appended inside the ranker
  (``RelRanker``): rel = log2_analytic_us minus its minimum over the problem's candidate rows;
  relall adds the same for the sm and dram parts and the analytic rank percentile. Computed per
  problem from the feature rows only (never from measured times): in fit per gid group, in predict
  over the rows of one call (cv scores one problem per call, as the tuner does).

    PYTHONPATH=src python benchmarks/results/2026-12-03-ranker-s57/compare.py seeds STORE SETTING [...]
    PYTHONPATH=src python benchmarks/results/2026-12-03-ranker-s57/compare.py grid STORE [SETTING ...]  # seed 0
    PYTHONPATH=src python benchmarks/results/2026-12-03-ranker-s57/compare.py table
"""

from __future__ import annotations

import faulthandler
import functools
import gzip
import json
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
from gemmtune.model.features import FEATURE_NAMES  # noqa: E402
from gemmtune.model.regressors import RANKERS, _LGBMRanker  # noqa: E402

import os  # noqa: E402

# fold seed for cv.folds_by_group (env FOLD_SEED, default 0); other seeds write their own files
FOLD_SEED = int(os.environ.get("FOLD_SEED", "0"))
_SUF = "" if FOLD_SEED == 0 else f"-fold{FOLD_SEED}"
OUT = HERE / f"results{_SUF}.json"
PER = HERE / f"per_problem{_SUF}.json.gz"  # gzip: 2.6-7.5 MB as plain JSON
H200_STORE = "data/collect/collect.sqlite.gz"
H100_STORE = "data/collect/h100/collect.sqlite.gz"
STORES = {"h200": (H200_STORE, [H100_STORE], "public", "h200"),
          "h100": (H100_STORE, [], None, "h100")}
THREADS = 1
I_TOT = FEATURE_NAMES.index("log2_analytic_us")
I_SM = FEATURE_NAMES.index("log2_analytic_sm_us")
I_DRAM = FEATURE_NAMES.index("log2_analytic_dram_us")


def _rel_cols(X, which):
    cols = [X[:, I_TOT] - X[:, I_TOT].min()]
    if which == "all":
        cols += [X[:, I_SM] - X[:, I_SM].min(), X[:, I_DRAM] - X[:, I_DRAM].min()]
        r = np.argsort(np.argsort(X[:, I_TOT], kind="stable"), kind="stable")
        cols.append(r / max(len(X) - 1, 1))
    return np.stack(cols, axis=1)


class RelRanker(_LGBMRanker):
    """_LGBMRanker with per-problem relative analytic columns appended (see the module doc)."""

    def __init__(self, rel="tot", **kw):
        super().__init__(**kw)
        self.rel = rel

    def _aug(self, X, gid=None):
        X = np.asarray(X, dtype=np.float64)
        if gid is None:
            return np.concatenate([X, _rel_cols(X, self.rel)], axis=1)
        extra = np.empty((len(X), 1 if self.rel == "tot" else 4))
        for g in np.unique(gid):
            m = gid == g
            extra[m] = _rel_cols(X[m], self.rel)
        return np.concatenate([X, extra], axis=1)

    def fit(self, X, y, gid):
        gid = np.asarray(gid)
        Xa = self._aug(X, gid)
        inner = _LGBMRanker.predict
        # fit on the augmented matrix; its calibration predicts on that matrix too (no re-augmenting)
        self.predict = lambda Z: inner(self, Z)
        try:
            _LGBMRanker.fit(self, Xa, y, gid)
        finally:
            del self.predict
        return self

    def predict(self, X):
        return _LGBMRanker.predict(self, self._aug(X))

    def hyperparameters(self):
        return {**super().hyperparameters(), "rel": self.rel}


SETTINGS = {
    # the setting shipped until 2026-12-03 (31 leaves), pinned: the default is 127 leaves since
    "lgbm": (_LGBMRanker, dict(num_leaves=31)),
    "xendcg": (_LGBMRanker, dict(objective="rank_xendcg")),
    "lab025": (_LGBMRanker, dict(label_step=0.025, label_levels=30)),
    "trunc10": (_LGBMRanker, dict(truncation=10)),
    "rel": (RelRanker, dict(rel="tot")),
    "relall": (RelRanker, dict(rel="all")),
    "lr025-n600": (_LGBMRanker, dict(lr=0.025, n_trees=600)),
    "leaves63": (_LGBMRanker, dict(num_leaves=63)),
    "leaves127": (_LGBMRanker, dict(num_leaves=127)),
    "mdl5": (_LGBMRanker, dict(min_data_in_leaf=5)),
    "ff05": (_LGBMRanker, dict(feature_fraction=0.5)),
}
KEYS = ("top1_within_10pct", "top1_regret_geomean", "top5_regret_geomean", "top5_within_10pct", "spearman_mean",
        "tuner_top1_within_10pct", "top1_found")

TIMES: dict[str, dict] = {}
PERPROB: dict[str, list] = {}
CURRENT = [""]


def _timed(cls, params, model_seed, name):
    t = TIMES.setdefault(name, {"fit_s": 0.0, "predict_s": 0.0})

    def make(seed=0):
        r = cls(**params, seed=model_seed, threads=THREADS)
        fit = r.fit

        def timed_fit(X, y, gid):
            t0 = time.perf_counter()
            out = fit(X, y, gid)
            t["fit_s"] += time.perf_counter() - t0
            return out
        r.fit = timed_fit
        return r
    return make


def _patch():
    """Per-problem feature rows computed once (pure functions of their arguments); per-problem
    held-out outcomes recorded beside cv.score's metrics."""
    rows: dict = {}
    orig_matrix = training._matrix

    def matrix(data, device, analytic):
        parts = []
        for g in data.groups:
            if id(g) not in rows:
                one = type(data)([g], data.context, data.source, [])
                X, y, _ = orig_matrix(one, device, analytic)
                rows[id(g)] = (g, X, y)
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

    orig_score = cvmod.score

    def score(model, data):
        out = orig_score(model, data)
        name = "analytic" if not isinstance(model, learned.LearnedModel) else CURRENT[0]
        for g, m in zip(data.groups, out):
            t = np.sort(np.asarray(g.times_ms, dtype=np.float64))
            PERPROB.setdefault(name, []).append({
                "key": m["key"], "top1_regret": m["top1_regret"], "top5_regret": m["top5_regret"],
                "best_family": m["best_family"], "top1_family": m["top1_family"], "n": int(len(t)),
                "second_over_best": float(t[1] / t[0]) if len(t) > 1 else None,
                "n_within_10pct": int((t <= 1.1 * t[0]).sum()), "best_ms": float(t[0])})
        return out
    cvmod.score = score


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
    return {"lightgbm": lightgbm.__version__, "numpy": np.__version__, "scipy": scipy.__version__,
            "python": platform.python_version(), "machine": platform.machine()}


def run(store, pairs):
    doc = json.loads(OUT.read_text()) if OUT.exists() else {"runs": []}
    per = json.loads(gzip.decompress(PER.read_bytes())) if PER.exists() else {}
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
        PERPROB.pop(name, None)
        PERPROB.pop("analytic", None)
        t0 = time.perf_counter()
        res = cvmod.cross_validate(data, kinds=[name], folds=5, seed=FOLD_SEED, groups=groups, device=device,
                                   say=lambda m: print(f"{name}: {m} ({time.perf_counter() - t0:.0f} s)",
                                                       file=sys.stderr, flush=True))
        del RANKERS[name]
        s = res["summaries"][name]
        doc["runs"].append({"store": store, "setting": setting, "model_seed": seed,
                            "params": cls(**params).hyperparameters(), "summary": {k: s.get(k) for k in KEYS},
                            "threads": THREADS, **TIMES[name], "cv_wall_s": time.perf_counter() - t0,
                            "analytic": {k: res["summaries"]["analytic"].get(k) for k in KEYS},
                            "shapes": res["shapes"], "problems": res["problems"], "rows": res["rows"],
                            "scored": res["scored"], "excluded_problems": n_excl,
                            "fold_seed": FOLD_SEED})
        per[name] = PERPROB[name]
        per[f"{store}:analytic"] = PERPROB["analytic"]
        doc.setdefault("stores", {})[store] = {"store": path, "pool_stores": pools, "exclude_suite": suite,
                                               "device": device, "folds": 5, "fold_seed": FOLD_SEED}
        doc.update(versions=versions(), date=time.strftime("%Y-%m-%d", time.gmtime()))
        OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        PER.write_bytes(gzip.compress((json.dumps(per, sort_keys=True) + "\n").encode()))
        print(f"{name}: top-1 within 10% {s['top1_within_10pct']:.4f}, top-5 regret {s['top5_regret_geomean']:.4f}, "
              f"top-1 regret {s['top1_regret_geomean']:.4f}, spearman {s['spearman_mean']:.4f}, "
              f"fit {TIMES[name]['fit_s']:.1f} s, wall {time.perf_counter() - t0:.0f} s", flush=True)
    return doc


def _cell(vals, scale=100.0, nd=1, unit="%"):
    v = np.array(vals, dtype=np.float64) * scale
    f = f"{{:.{nd}f}}"
    if len(v) == 1:
        return f.format(v[0]) + unit
    return f"{f.format(v.mean())}{unit} ± {f.format(v.std(ddof=1))} [{f.format(v.min())}, {f.format(v.max())}]"


def table(doc) -> str:
    by: dict = {}
    for r in doc["runs"]:
        by.setdefault((r["store"], r["setting"]), []).append(r)
    lines = ["| store | setting | seeds | top-1 within 10% | top-5 regret (geomean) | top-1 regret (geomean) | "
             "Spearman (mean) | fit s (5 folds) |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for (store, setting), rs in sorted(by.items()):
        rs = sorted(rs, key=lambda r: r["model_seed"])
        s = [r["summary"] for r in rs]
        lines.append(f"| {store} | {setting} | {','.join(str(r['model_seed']) for r in rs)} | "
                     f"{_cell([x['top1_within_10pct'] for x in s], nd=2)} | "
                     f"{_cell([x['top5_regret_geomean'] for x in s], nd=2)} | "
                     f"{_cell([x['top1_regret_geomean'] for x in s], nd=2)} | "
                     f"{_cell([x['spearman_mean'] for x in s], 1.0, 3, '')} | "
                     f"{_cell([r['fit_s'] for r in rs], 1.0, 0, '')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    faulthandler.enable()
    what = sys.argv[1] if len(sys.argv) > 1 else "table"
    if what in ("seeds", "grid"):
        _patch()
    if what == "seeds":
        doc = run(sys.argv[2], [(s, seed) for seed in (0, 1, 2) for s in sys.argv[3:]])
    elif what == "grid":
        doc = run(sys.argv[2], [(s, 0) for s in sys.argv[3:] or list(SETTINGS)])
    else:
        doc = json.loads(OUT.read_text())
    print(table(doc))
