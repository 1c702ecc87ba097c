"""Session 59 (issue #19): a two-stage decision about cuBLAS on top of the shipped ranker.

Stage B: the shipped ranker as is (``regressors._LGBMRanker`` defaults, 127 leaves), trained by
``training.fit`` exactly as ``cv.cross_validate`` does (the harness of
../2026-12-03-ranker-s57/compare.py: same stores, ``cv.folds_by_group`` 5 folds by shape, fold
seeds 0 and 1, model seeds 0/1/2, one thread, problems with >= 20 measured choices scored).

Stage A: a LightGBM binary classifier of "cuBLAS (the problem's ``aten``, non-pad choice) is
within 10% of the problem's best measured choice". One row per problem, from feature rows only
(never from measured times):

* the feature row of the problem's aten candidate (``FEATURE_NAMES``);
* ``rk_margin``: the ranker's rank key of aten minus its best non-aten key (ln-ms-like units;
  < 0: the ranker puts aten first), and aten's position in the ranker's order (log2(1+pos));
* ``an_margin``: min log2_analytic_us over the non-aten rows minus aten's; aten's position in the
  analytic order; the analytic gap between the best and 2nd-best non-aten rows;
* ``rk_gap2``: the ranker's key gap between its best and second-best non-aten choice;
* log2 of the number of candidates.

Stage A's training rows must carry ranker keys the ranker did not see trained: within each outer
training fold, the shapes are dealt into 3 inner folds (``folds_by_group``, seed 100 + fold
seed), the ranker trained on two and keyed on the third. The classifier is trained on those
out-of-fold rows (training problems with >= 20 measured choices and an aten row, pooled H100
problems included). The threshold ``t`` is chosen on the training folds only: a classifier per
inner fold gives out-of-fold P on the training problems, and ``t`` maximises the training
problems' (native, >= 20 choices) top-1-within-10% count of the rule with the inner rankers'
choices. The held-out fold is then ranked by the ranker fitted on the whole training fold and
decided with the classifier fitted on all the out-of-fold rows.

Rules (each with its own training-chosen threshold(s)):

* ``demote``: where the ranker puts aten first and P(aten ok) < t, its best non-aten choice goes
  first (aten second); otherwise the ranker's order.
* ``switch``: one threshold both ways: aten first if P >= t, else the best non-aten first.
* ``both``: ``demote`` with t_lo, and aten promoted to first where the ranker puts a non-aten
  first and P >= t_hi (t_lo <= t_hi, a grid on training).

The moved choice goes first and the rest keep the ranker's order. Scored like cv.score:
top-1 within 10%, top-1 regret (geomean) and top-5 regret (geomean) on the held-out problems.

    GEMMTUNE_FP32_PRECISION=ieee OMP_NUM_THREADS=1 PYTHONPATH=src \
        python benchmarks/results/2026-12-03-ranker-s59/twostage.py run h200 0 0,1,2
    python benchmarks/results/2026-12-03-ranker-s59/twostage.py table
"""

from __future__ import annotations

import faulthandler
import functools
import gzip
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
from gemmtune.model.analytic import AnalyticModel  # noqa: E402
from gemmtune.model.data import Dataset, exclude, load_dataset, pool, suite_shapes, timed_as  # noqa: E402
from gemmtune.model.features import FEATURE_NAMES  # noqa: E402
from gemmtune.model.metrics import _predict_ms  # noqa: E402
from gemmtune.model.regressors import RANKERS, _LGBMRanker  # noqa: E402

OUT = HERE / "results.json"
PER = HERE / "per_problem.json.gz"
H200_STORE = "data/collect/collect.sqlite.gz"
H100_STORE = "data/collect/h100/collect.sqlite.gz"
STORES = {"h200": (H200_STORE, [H100_STORE], "public", "h200"),
          "h100": (H100_STORE, [], None, "h100")}
THREADS = 1
MIN_CHOICES = 20
INNER = 3
I_TOT = FEATURE_NAMES.index("log2_analytic_us")
A_NAMES = (*FEATURE_NAMES, "rk_margin", "rk_aten_pos", "rk_gap2", "an_margin", "an_aten_pos", "an_gap2",
           "log2_n_cand")
CLF_PARAMS = {"objective": "binary", "learning_rate": 0.05, "num_leaves": 15, "min_data_in_leaf": 20,
              "bagging_fraction": 0.8, "bagging_freq": 1, "feature_fraction": 0.8, "lambda_l2": 1.0,
              "deterministic": True, "force_row_wise": True, "num_threads": THREADS, "verbose": -1}
CLF_ROUNDS = 200
ROWS: dict = {}  # id(problem group) -> (group, X, y): _patch's cache of training._matrix
GRID = np.round(np.arange(0.0, 1.0001, 0.025), 3)


def _patch():
    """Per-problem feature rows computed once (as compare.py does)."""
    rows = ROWS
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
    return rows


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


def _aten_index(g):
    idx = [i for i, c in enumerate(g.choices) if c.family == "aten" and not c.pad]
    return idx[0] if idx else None


def _features_of(g, dev):
    """The rows of ``g`` as training featurizes them (cached by _patch's matrix)."""
    if id(g) not in ROWS:
        training._matrix(Dataset([g], {}, "", []), dev, _analytic(dev))
    return ROWS[id(g)][1]


_AM: dict = {}


def _analytic(dev):
    return _AM.setdefault(dev.name, AnalyticModel(dev))


def _keys(model, g):
    """The ranker's per-choice keys of problem g, lower = faster, as cv.score ranks (exp of rank_keys)."""
    with timed_as(g):
        return np.log(np.asarray(_predict_ms(model, g.problem, g.choices), dtype=np.float64))


def _a_row(g, X, key, ia):
    """Stage A's row of a problem: aten's feature row plus aggregates of feature rows and ranker keys."""
    n = len(key)
    other = np.ones(n, dtype=bool)
    other[ia] = False
    ko = np.sort(key[other])
    ao = np.sort(X[other, I_TOT])
    rk_pos = int((key < key[ia]).sum())
    an_pos = int((X[:, I_TOT] < X[ia, I_TOT]).sum())
    return np.concatenate([X[ia], [key[ia] - ko[0], math.log2(1 + rk_pos), ko[1] - ko[0] if len(ko) > 1 else 0.0,
                                   ao[0] - X[ia, I_TOT], math.log2(1 + an_pos), ao[1] - ao[0] if len(ao) > 1 else 0.0,
                                   math.log2(n)]])


def _rec(g, key, ia):
    """What deciding needs of a problem: measured times, the ranker's order, aten's index."""
    t = np.asarray(g.times_ms, dtype=np.float64)
    order = np.argsort(np.where(np.isfinite(key), key, np.inf), kind="stable")
    return {"t": t, "order": order, "ia": ia}


def _decide(rec, p, rule, th):
    """The final order of one problem under ``rule`` with P(aten ok) ``p`` and thresholds ``th``:
    the decided first choice, then the rest in the ranker's order."""
    order, ia = rec["order"], rec["ia"]
    if ia is None or p is None:
        return order
    first_is_aten = order[0] == ia
    best_other = order[order != ia][0]
    if rule == "demote":
        first = best_other if first_is_aten and p < th[0] else order[0]
    elif rule == "switch":
        first = ia if p >= th[0] else best_other
    elif rule == "both":
        first = best_other if first_is_aten and p < th[0] else ia if not first_is_aten and p >= th[1] else order[0]
    else:
        first = order[0]
    return order if first == order[0] else np.r_[first, order[order != first]]


def _metrics(rec, order):
    t = rec["t"]
    best = t.min()
    return float(t[order[0]] / best - 1.0), float(t[order[:5]].min() / best - 1.0)


def _hits(recs, ps, rule, th):
    return sum(_metrics(r, _decide(r, p, rule, th))[0] <= 0.1 + 1e-12 for r, p in zip(recs, ps))


def _choose(recs, ps, rule):
    """The threshold(s) with the most training hits; ties: the one nearest the middle of the best
    run (grid), i.e. the median of the tying thresholds."""
    if rule == "both":
        cands = [(lo, hi) for lo in GRID for hi in GRID if hi >= lo]
    else:
        cands = [(x,) for x in GRID]
    score = np.array([_hits(recs, ps, rule, th) for th in cands])
    best = np.flatnonzero(score == score.max())
    return cands[best[len(best) // 2]], int(score.max()), len(recs)


def _clf_fit(A, y, seed):
    import lightgbm as lgb
    return lgb.train({**CLF_PARAMS, "seed": seed}, lgb.Dataset(A, y.astype(np.float64), params={"verbose": -1}),
                     num_boost_round=CLF_ROUNDS)


def _register(name, model_seed):
    RANKERS[name] = lambda seed=0: _LGBMRanker(seed=model_seed, threads=THREADS)


def one_fold(data, train_d, test_d, dev, groups, fold_seed, model_seed, kind, say):
    """Baseline and two-stage per-problem outcomes on one outer fold."""
    # --- inner out-of-fold ranker keys on the training problems
    oof = []  # (g, key, ia, native)
    inner = cvmod.folds_by_group(train_d.shapes, groups, INNER, 100 + fold_seed)
    a_rows, a_y, a_fold = [], [], []
    recs_tr, fold_tr = [], []
    for j, f in enumerate(inner):
        m_in, _ = training.fit(train_d.subset(train_d.shapes - f), kind=kind, seed=fold_seed, device=dev)
        for g in train_d.subset(f).ranked(MIN_CHOICES).groups:
            ia = _aten_index(g)
            if ia is None:
                continue
            key = _keys(m_in, g)
            X = _features_of(g, g.device or dev)
            a_rows.append(_a_row(g, X, key, ia))
            a_y.append(float(g.times_ms[ia] <= 1.1 * np.min(g.times_ms) * (1 + 1e-12)))
            a_fold.append(j)
            if g.device is None:
                recs_tr.append(_rec(g, key, ia))
                fold_tr.append(len(a_rows) - 1)
        say(f"inner {j + 1}/{INNER}")
    A = np.array(a_rows)
    yA = np.array(a_y)
    fA = np.array(a_fold)
    # --- stage-A out-of-fold P on the training problems (per inner fold), thresholds chosen there
    p_oof = np.empty(len(A))
    for j in range(INNER):
        clf = _clf_fit(A[fA != j], yA[fA != j], model_seed)
        p_oof[fA == j] = clf.predict(A[fA == j])
    ps_tr = [float(p_oof[i]) for i in fold_tr]
    chosen = {rule: _choose(recs_tr, ps_tr, rule) for rule in ("demote", "switch", "both")}
    base_tr = _hits(recs_tr, [None] * len(recs_tr), "none", ())
    clf = _clf_fit(A, yA, model_seed)
    # --- the outer ranker (the baseline) and the held-out problems
    model, _ = training.fit(train_d, kind=kind, seed=fold_seed, device=dev)
    out = []
    for g in test_d.groups:
        key = _keys(model, g)
        ia = _aten_index(g)
        rec = _rec(g, key, ia)
        p = None
        if ia is not None:
            X = _features_of(g, dev)
            p = float(clf.predict(_a_row(g, X, key, ia)[None, :])[0])
        row = {"key": g.problem.key, "p_aten_ok": p, "has_aten": ia is not None,
               "aten_ok": None if ia is None else bool(g.times_ms[ia] <= 1.1 * np.min(g.times_ms) * (1 + 1e-12)),
               "ranker_first_is_aten": bool(ia is not None and rec["order"][0] == ia)}
        r1, r5 = _metrics(rec, rec["order"])
        row["baseline"] = [r1, r5]
        if ia is not None:  # for the oracle bounds: top-1 regret with aten first, with the best non-aten first
            row["aten_first_regret"] = float(g.times_ms[ia] / np.min(g.times_ms) - 1.0)
            row["other_first_regret"] = float(g.times_ms[rec["order"][rec["order"] != ia][0]] / np.min(g.times_ms) - 1.0)
        for rule, (th, _, _) in chosen.items():
            row[rule] = list(_metrics(rec, _decide(rec, p, rule, th)))
        out.append(row)
    info = {"train_native_ranked": len(recs_tr), "stageA_rows": len(A), "stageA_pos_rate": float(yA.mean()),
            "train_hits_baseline": base_tr,
            "chosen": {rule: {"th": [float(x) for x in th], "train_hits": h} for rule, (th, h, _) in chosen.items()}}
    return out, info


def _summ(rows, which):
    r1 = np.array([r[which][0] for r in rows])
    r5 = np.array([r[which][1] for r in rows])
    gm = lambda r: float(np.exp(np.mean(np.log1p(r))) - 1.0)  # noqa: E731
    return {"top1_within_10pct": float((r1 <= 0.1 + 1e-12).mean()), "top1_regret_geomean": gm(r1),
            "top5_regret_geomean": gm(r5), "problems": len(rows)}


WHICH = ("baseline", "demote", "switch", "both")


def run(store, fold_seed, model_seeds):
    doc = json.loads(OUT.read_text()) if OUT.exists() else {"runs": []}
    per = json.loads(gzip.decompress(PER.read_bytes())) if PER.exists() else {}
    done = {(r["store"], r["fold_seed"], r["model_seed"]) for r in doc["runs"]}
    data, n_excl, groups = _prepared(store)
    path, pools, suite, device = STORES[store]
    dev = training._device_for(data, device)
    for ms in model_seeds:
        if (store, fold_seed, ms) in done:
            continue
        kind = f"s59:{store}:{fold_seed}:{ms}"
        _register(kind, ms)
        t0 = time.perf_counter()
        rows, infos = [], []
        for i, fold in enumerate(cvmod.folds_by_group(data.shapes, groups, 5, fold_seed)):
            train_d = data.subset(data.shapes - fold)
            test_d = data.subset(fold).native().ranked(MIN_CHOICES)
            say = lambda m, i=i: print(f"{kind} fold {i + 1}/5: {m} ({time.perf_counter() - t0:.0f} s)",  # noqa: E731
                                       file=sys.stderr, flush=True)
            r, info = one_fold(data, train_d, test_d, dev, groups, fold_seed, ms, kind, say)
            for x in r:
                x["fold"] = i
            rows += r
            infos.append(info)
            say("done")
        del RANKERS[kind]
        summ = {w: _summ(rows, w) for w in WHICH}
        doc["runs"].append({"store": store, "fold_seed": fold_seed, "model_seed": ms, "summary": summ,
                            "folds": infos, "wall_s": time.perf_counter() - t0, "scored": len(rows),
                            "excluded_problems": n_excl, "shapes": len(data.shapes), "problems": len(data.groups),
                            "ranker": _LGBMRanker().hyperparameters(), "stage_a": {**CLF_PARAMS, "rounds": CLF_ROUNDS,
                                                                                  "features": list(A_NAMES)},
                            "inner_folds": INNER, "min_choices": MIN_CHOICES})
        per[kind] = rows
        doc.update(versions=versions(), date=time.strftime("%Y-%m-%d", time.gmtime()))
        OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        PER.write_bytes(gzip.compress((json.dumps(per, sort_keys=True) + "\n").encode()))
        print(kind, " ".join(f"{w}: {summ[w]['top1_within_10pct']:.4f}/{summ[w]['top5_regret_geomean']:.4f}"
                             for w in WHICH), f"wall {time.perf_counter() - t0:.0f} s", flush=True)
    return doc


def versions() -> dict:
    import lightgbm
    import scipy
    return {"lightgbm": lightgbm.__version__, "numpy": np.__version__, "scipy": scipy.__version__,
            "python": platform.python_version(), "machine": platform.machine()}


def table(doc) -> str:
    lines = ["| store | fold seed | model seed | setting | top-1 within 10% | top-1 regret | top-5 regret | "
             "thresholds (per outer fold) |", "|---|---:|---:|---|---:|---:|---:|---|"]
    for r in sorted(doc["runs"], key=lambda r: (r["store"], r["fold_seed"], r["model_seed"])):
        for w in WHICH:
            s = r["summary"][w]
            th = "" if w == "baseline" else " ".join("/".join(f"{x:g}" for x in f["chosen"][w]["th"]) for f in r["folds"])
            lines.append(f"| {r['store']} | {r['fold_seed']} | {r['model_seed']} | {w} | "
                         f"{100 * s['top1_within_10pct']:.2f}% | {100 * s['top1_regret_geomean']:.2f}% | "
                         f"{100 * s['top5_regret_geomean']:.2f}% | {th} |")
    lines += ["", "| store | fold seed | setting | top-1 within 10%, mean ± sd [per seed] | paired delta (pts) | "
              "top-5 regret mean |", "|---|---:|---|---|---|---:|"]
    by: dict = {}
    for r in doc["runs"]:
        by.setdefault((r["store"], r["fold_seed"]), []).append(r)
    for (store, fs), rs in sorted(by.items()):
        rs = sorted(rs, key=lambda r: r["model_seed"])
        base = np.array([100 * r["summary"]["baseline"]["top1_within_10pct"] for r in rs])
        for w in WHICH:
            v = np.array([100 * r["summary"][w]["top1_within_10pct"] for r in rs])
            r5 = np.mean([100 * r["summary"][w]["top5_regret_geomean"] for r in rs])
            sd = f" ± {v.std(ddof=1):.2f}" if len(v) > 1 else ""
            d = "" if w == "baseline" else ", ".join(f"{x:+.2f}" for x in v - base)
            lines.append(f"| {store} | {fs} | {w} | {v.mean():.2f}{sd} [{', '.join(f'{x:.2f}' for x in v)}] | {d} | "
                         f"{r5:.2f}% |")
    return "\n".join(lines)


if __name__ == "__main__":
    faulthandler.enable()
    what = sys.argv[1] if len(sys.argv) > 1 else "table"
    if what == "run":
        _patch()
        doc = run(sys.argv[2], int(sys.argv[3]), [int(x) for x in sys.argv[4].split(",")])
    else:
        doc = json.loads(OUT.read_text())
    print(table(doc))
