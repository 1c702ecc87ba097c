"""Session 60 (issue #19): give stage A (s59) cuBLAS's *measured* time on the problem.

The tuner always times cuBLAS (``tuning/plan.py`` ``select_by_model``), so if it times cuBLAS
first, cuBLAS's measured ms may be an input when the rest is ranked. This script tests whether
that closes the gap to 90% top-1 within 10% (held-out, H200).

Protocol: s59's, unchanged (``../2026-12-03-ranker-s59/twostage.py``, imported, not copied, so
that the folds, the inner out-of-fold ranker keys, the stage-A classifier settings, the
threshold search and the scoring are the same code): the s57 stores, ``cv.folds_by_group`` 5
folds by shape, fold seeds 0 and 1, model seeds 0-2, problems with >= 20 measured choices
scored, one thread. The ranker fits (the costly part) are shared by every stage-A variant:

* ``s59``: s59's 56 stage-A inputs (a reproduction: its numbers must equal s59's);
* ``cub``: s59's inputs plus 4 from aten's measured ms ``t`` (``CUB_NAMES``):
  ``roof_eff`` = floor_ms / t with floor = max(flops / peak, min_bytes / bandwidth) and the
  device's datasheet numbers (``DeviceInfo``: peak_tflops_16, or peak_tflops_32 for fp32 with
  TF32 off, half of peak_tflops_16 with TF32 on; mem_bw_gbps), log2 t, log2 achieved TFLOP/s,
  log2 achieved GB/s (min_bytes / t);
* ``cubrel``: ``cub`` plus 3 inputs relating t to the model estimates of the problem
  (``REL_NAMES``): log2(t in us) minus aten's log2_analytic_us; minus the minimum
  log2_analytic_us of the non-aten rows; and the ranker's key of its best non-aten choice
  (ln-ms units, anchored at the analytic estimate) minus ln t.

A pooled H100 problem (H200 store) uses the H100's numbers. Rules, as s59: ``demote`` and
``switch``, each with its threshold chosen on the training folds only. ``both`` is left out.

The ranker-feature variant (``rankfeat``, no stage A) appends per-row columns computed from
aten's measured ln ms to the ranker's features: the 4 ``cub`` columns (constant within a
problem) and each row's log2_analytic_us minus log2(t in us). In fit the ln ms comes from the
training labels (y of aten's non-pad row); in predict from the problem's measured aten time
(a side channel set before each problem is keyed, as the tuner would pass it).

    GEMMTUNE_FP32_PRECISION=ieee OMP_NUM_THREADS=1 \
        python benchmarks/results/2026-12-03-ranker-s60/cublas_time.py run h200 0 0,1,2
    python benchmarks/results/2026-12-03-ranker-s60/cublas_time.py rankfeat h200 0 0
    python benchmarks/results/2026-12-03-ranker-s60/cublas_time.py table
"""

from __future__ import annotations

import faulthandler
import gzip
import importlib.util
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "src"))

# s59's module, imported by path (its directory name is not a package name)
_spec = importlib.util.spec_from_file_location("twostage", HERE.parent / "2026-12-03-ranker-s59" / "twostage.py")
ts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ts)

from gemmtune.model import cv as cvmod  # noqa: E402
from gemmtune.model import training  # noqa: E402
from gemmtune.model.features import FEATURE_NAMES  # noqa: E402
from gemmtune.model.regressors import RANKERS, _LGBMRanker  # noqa: E402

OUT = HERE / "results.json"
PER = HERE / "per_problem.json.gz"
I_TOT = FEATURE_NAMES.index("log2_analytic_us")
I_FP32 = FEATURE_NAMES.index("fp32_ieee")
I_TF32 = FEATURE_NAMES.index("tf32")
I_ATEN = FEATURE_NAMES.index("fam_aten")
I_PAD = FEATURE_NAMES.index("pad")
CUB_NAMES = ("roof_eff", "log2_aten_ms", "log2_aten_tflops", "log2_aten_gbps")
REL_NAMES = ("aten_vs_analytic", "aten_vs_best_other_analytic", "rk_best_other_vs_aten")
VARIANTS = ("s59", "cub", "cubrel")
RULES = ("demote", "switch")


def _peak_tflops(xrow, dev):
    if xrow[I_FP32] > 0.5:
        return dev.peak_tflops_32
    return dev.peak_tflops_16 * (0.5 if xrow[I_TF32] > 0.5 else 1.0)


def _cub(problem, xrow, ln_ms, dev):
    """The 4 cub inputs of a problem from aten's measured ln(ms)."""
    t_s = math.exp(ln_ms) * 1e-3
    floor_s = max(problem.flops / (_peak_tflops(xrow, dev) * 1e12), problem.min_bytes / (dev.mem_bw_gbps * 1e9))
    return [floor_s / t_s, ln_ms / math.log(2), math.log2(problem.flops / t_s / 1e12),
            math.log2(problem.min_bytes / t_s / 1e9)]


def _rows(g, X, key, ia, dev):
    """Stage-A rows of one problem for each variant."""
    base = ts._a_row(g, X, key, ia)
    ln_t = float(np.log(g.times_ms[ia]))
    cub = _cub(g.problem, X[ia], ln_t, dev)
    other = np.ones(len(key), dtype=bool)
    other[ia] = False
    log2_us = (ln_t + math.log(1000.0)) / math.log(2)
    rel = [log2_us - X[ia, I_TOT], log2_us - X[other, I_TOT].min(), float(key[other].min()) - ln_t]
    return {"s59": base, "cub": np.r_[base, cub], "cubrel": np.r_[base, cub, rel]}


def _first(rec, p, rule, th):
    return int(ts._decide(rec, p, rule, th)[0])


def one_fold(train_d, test_d, dev, groups, fold_seed, model_seed, kind, say):
    """s59's one_fold, with one stage A per variant on the same ranker keys."""
    inner = cvmod.folds_by_group(train_d.shapes, groups, ts.INNER, 100 + fold_seed)
    a_rows = {v: [] for v in VARIANTS}
    a_y, a_fold, recs_tr, fold_tr = [], [], [], []
    for j, f in enumerate(inner):
        m_in, _ = training.fit(train_d.subset(train_d.shapes - f), kind=kind, seed=fold_seed, device=dev)
        for g in train_d.subset(f).ranked(ts.MIN_CHOICES).groups:
            ia = ts._aten_index(g)
            if ia is None:
                continue
            key = ts._keys(m_in, g)
            X = ts._features_of(g, g.device or dev)
            for v, r in _rows(g, X, key, ia, g.device or dev).items():
                a_rows[v].append(r)
            a_y.append(float(g.times_ms[ia] <= 1.1 * np.min(g.times_ms) * (1 + 1e-12)))
            a_fold.append(j)
            if g.device is None:
                recs_tr.append(ts._rec(g, key, ia))
                fold_tr.append(len(a_y) - 1)
        say(f"inner {j + 1}/{ts.INNER}")
    yA, fA = np.array(a_y), np.array(a_fold)
    chosen, clfs = {}, {}
    for v in VARIANTS:
        A = np.array(a_rows[v])
        p_oof = np.empty(len(A))
        for j in range(ts.INNER):
            clf = ts._clf_fit(A[fA != j], yA[fA != j], model_seed)
            p_oof[fA == j] = clf.predict(A[fA == j])
        ps_tr = [float(p_oof[i]) for i in fold_tr]
        for rule in RULES:
            th, h, _ = ts._choose(recs_tr, ps_tr, rule)
            chosen[(v, rule)] = (th, h)
        clfs[v] = ts._clf_fit(A, yA, model_seed)
    model, _ = training.fit(train_d, kind=kind, seed=fold_seed, device=dev)
    out = []
    for g in test_d.groups:
        key = ts._keys(model, g)
        ia = ts._aten_index(g)
        rec = ts._rec(g, key, ia)
        t = np.asarray(g.times_ms, dtype=np.float64)
        row = {"key": g.problem.key, "has_aten": ia is not None, "baseline": list(ts._metrics(rec, rec["order"])),
               "first": {"baseline": int(rec["order"][0])}, "p": {}}
        if ia is not None:
            row["aten_ok"] = bool(t[ia] <= 1.1 * t.min() * (1 + 1e-12))
            row["ranker_first_is_aten"] = bool(rec["order"][0] == ia)
            row["aten_first_regret"] = float(t[ia] / t.min() - 1.0)
            row["other_first_regret"] = float(t[rec["order"][rec["order"] != ia][0]] / t.min() - 1.0)
            rows = _rows(g, ts._features_of(g, dev), key, ia, dev)
        for v in VARIANTS:
            p = None if ia is None else float(clfs[v].predict(rows[v][None, :])[0])
            row["p"][v] = p
            for rule in RULES:
                th = chosen[(v, rule)][0]
                name = f"{v}:{rule}"
                row[name] = list(ts._metrics(rec, ts._decide(rec, p, rule, th)))
                row["first"][name] = _first(rec, p, rule, th)
        out.append(row)
    info = {"train_native_ranked": len(recs_tr), "stageA_rows": len(yA), "stageA_pos_rate": float(yA.mean()),
            "train_hits_baseline": ts._hits(recs_tr, [None] * len(recs_tr), "none", ()),
            "chosen": {f"{v}:{r}": {"th": [float(x) for x in th], "train_hits": h} for (v, r), (th, h) in chosen.items()}}
    return out, info


def _auc(p, y):
    """Mann-Whitney AUC of scores p for binary labels y (ties count half)."""
    from scipy.stats import rankdata
    p, y = np.asarray(p, dtype=np.float64), np.asarray(y, dtype=bool)
    r = rankdata(p)
    n1, n0 = y.sum(), (~y).sum()
    return float((r[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def _summ_run(rows):
    """Per run: the s59 metrics of every setting, the oracle bounds, AUCs and flips."""
    names = ["baseline"] + [f"{v}:{r}" for v in VARIANTS for r in RULES]
    summ = {w: ts._summ(rows, w) for w in names}
    at = [r for r in rows if r["has_aten"]]
    y = [r["aten_ok"] for r in at]
    auc = {v: _auc([r["p"][v] for r in at], y) for v in VARIANTS}
    hit = lambda x: x <= 0.1 + 1e-12  # noqa: E731
    # a perfect stage A: demote where the ranker puts aten first and aten is not ok; switch: aten
    # first where aten is ok, else the best non-aten
    od = [r["other_first_regret"] if r["has_aten"] and r["ranker_first_is_aten"] and not r["aten_ok"]
          else r["baseline"][0] for r in rows]
    osw = [(r["aten_first_regret"] if r["aten_ok"] else r["other_first_regret"]) if r["has_aten"]
           else r["baseline"][0] for r in rows]
    flips = {}
    for w in names[1:]:
        ch = [r for r in rows if r["first"][w] != r["first"]["baseline"]]
        flips[w] = {"changed": len(ch), "win": sum(hit(r[w][0]) and not hit(r["baseline"][0]) for r in ch),
                    "lose": sum(hit(r["baseline"][0]) and not hit(r[w][0]) for r in ch)}
    return {"summary": summ, "auc": auc, "flips": flips,
            "oracle": {"demote": float(np.mean([hit(x) for x in od])), "switch": float(np.mean([hit(x) for x in osw]))},
            "aten_rows": len(at), "aten_ok": int(sum(y)),
            "ranker_aten_first": sum(r["ranker_first_is_aten"] for r in at),
            "ranker_aten_first_not_ok": sum(r["ranker_first_is_aten"] and not r["aten_ok"] for r in at)}


def _load():
    doc = json.loads(OUT.read_text()) if OUT.exists() else {"runs": []}
    per = json.loads(gzip.decompress(PER.read_bytes())) if PER.exists() else {}
    return doc, per


def _save(doc, per):
    import fcntl
    doc.update(versions=ts.versions(), date=time.strftime("%Y-%m-%d", time.gmtime()))
    # merge with what another process (another store or fold seed) saved meanwhile, under a lock
    with open(HERE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _save_locked(doc, per)


def _save_locked(doc, per):
    old, old_per = _load()
    mine = {(r["mode"], r["store"], r["fold_seed"], r["model_seed"]) for r in doc["runs"]}
    doc["runs"] = [r for r in old["runs"] if (r["mode"], r["store"], r["fold_seed"], r["model_seed"]) not in mine] \
        + doc["runs"]
    per = {**old_per, **per}
    OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    PER.write_bytes(gzip.compress((json.dumps(per, sort_keys=True) + "\n").encode()))


def run(store, fold_seed, model_seeds):
    data, n_excl, groups = ts._prepared(store)
    dev = training._device_for(data, ts.STORES[store][3])
    for ms in model_seeds:
        doc, per = _load()
        if any((r["mode"], r["store"], r["fold_seed"], r["model_seed"]) == ("twostage", store, fold_seed, ms)
               for r in doc["runs"]):
            continue
        kind = f"s60:{store}:{fold_seed}:{ms}"
        ts._register(kind, ms)
        t0 = time.perf_counter()
        rows, infos = [], []
        for i, fold in enumerate(cvmod.folds_by_group(data.shapes, groups, 5, fold_seed)):
            train_d = data.subset(data.shapes - fold)
            test_d = data.subset(fold).native().ranked(ts.MIN_CHOICES)
            say = lambda m, i=i: print(f"{kind} fold {i + 1}/5: {m} ({time.perf_counter() - t0:.0f} s)",  # noqa: E731
                                       file=sys.stderr, flush=True)
            r, info = one_fold(train_d, test_d, dev, groups, fold_seed, ms, kind, say)
            for x in r:
                x["fold"] = i
            rows += r
            infos.append(info)
        del RANKERS[kind]
        s = _summ_run(rows)
        doc, per = _load()
        doc["runs"].append({"mode": "twostage", "store": store, "fold_seed": fold_seed, "model_seed": ms, **s,
                            "folds": infos, "wall_s": time.perf_counter() - t0, "scored": len(rows),
                            "excluded_problems": n_excl, "ranker": _LGBMRanker().hyperparameters(),
                            "stage_a": {**ts.CLF_PARAMS, "rounds": ts.CLF_ROUNDS, "s59": list(ts.A_NAMES),
                                        "cub": list(CUB_NAMES), "cubrel": list(CUB_NAMES + REL_NAMES)}})
        per[kind] = rows
        _save(doc, per)
        print(kind, " ".join(f"{w}: {v['top1_within_10pct']:.4f}" for w, v in s["summary"].items()),
              "auc", s["auc"], f"wall {time.perf_counter() - t0:.0f} s", flush=True)


# --- rankfeat: the cuBLAS-time columns given to the ranker itself (no stage A)

CUR_ATEN: list = [None]  # (problem, aten ln ms, device) of the problem being keyed: the predict side channel


class TimeRanker(_LGBMRanker):
    """_LGBMRanker with 5 columns from aten's measured ln ms appended (see the module doc).
    A problem without a non-pad aten row gets NaN (LightGBM's missing value)."""

    def __init__(self, problems=None, **kw):
        super().__init__(**kw)
        self.problems = problems  # gid -> (problem, device), set before fit

    @staticmethod
    def _cols(X, problem, ln_t, dev):
        if ln_t is None:
            return np.full((len(X), 5), np.nan)
        c = _cub(problem, X[0], ln_t, dev)
        log2_us = (ln_t + math.log(1000.0)) / math.log(2)
        return np.column_stack([np.tile(c, (len(X), 1)), X[:, I_TOT] - log2_us])

    def fit(self, X, y, gid):
        X = np.asarray(X, dtype=np.float64)
        gid = np.asarray(gid)
        extra = np.empty((len(X), 5))
        for g in np.unique(gid):
            m = np.flatnonzero(gid == g)
            a = m[(X[m, I_ATEN] > 0.5) & (X[m, I_PAD] < 0.5)]
            problem, dev = self.problems[int(g)]
            extra[m] = self._cols(X[m], problem, float(y[a[0]]) if len(a) else None, dev)
        inner = _LGBMRanker.predict
        self.predict = lambda Z: inner(self, Z)
        try:
            _LGBMRanker.fit(self, np.concatenate([X, extra], axis=1), y, gid)
        finally:
            del self.predict
        return self

    def predict(self, X):
        X = np.asarray(X, dtype=np.float64)
        problem, ln_t, dev = CUR_ATEN[0]
        return _LGBMRanker.predict(self, np.concatenate([X, self._cols(X, problem, ln_t, dev)], axis=1))


LAST: dict = {}  # gid -> (problem, device) of the last training._matrix call (TimeRanker.fit reads it)


def hook_matrix():
    """Wrap ``training._matrix`` so that each call records ``LAST``; returns the original, to restore."""
    orig = training._matrix

    def matrix(d, device, analytic):  # record gid -> (problem, device) for TimeRanker.fit
        X, y, gid = orig(d, device, analytic)
        LAST["problems"] = {i: (g.problem, g.device or device) for i, g in enumerate(d.groups)}
        return X, y, gid
    training._matrix = matrix
    return orig


def register_kinds(prefix, store, fold_seed, ms):
    """Register the shipped ranker and TimeRanker in ``RANKERS`` as ``{prefix}:{name}:{store}:{fold_seed}:{ms}``
    (TimeRanker's fit reads the problems of its matrix from ``LAST``); returns {name: kind}."""
    kinds = {}
    for name, cls in (("baseline", _LGBMRanker), ("rankfeat", TimeRanker)):
        kind = f"{prefix}:{name}:{store}:{fold_seed}:{ms}"

        def make(seed=0, cls=cls):
            r = cls(seed=ms, threads=ts.THREADS)
            if cls is TimeRanker:
                fit = r.fit

                def fit_(X, y, gid):
                    r.problems = LAST["problems"]
                    return fit(X, y, gid)
                r.fit = fit_
            return r
        RANKERS[kind] = make
        kinds[name] = kind
    return kinds


def rankfeat(store, fold_seed, model_seeds):
    """5-fold CV of the baseline ranker and of TimeRanker, same folds and seeds as ``run``."""
    data, n_excl, groups = ts._prepared(store)
    dev = training._device_for(data, ts.STORES[store][3])
    orig_matrix = hook_matrix()
    for ms in model_seeds:
        doc, per = _load()
        if any((r["mode"], r["store"], r["fold_seed"], r["model_seed"]) == ("rankfeat", store, fold_seed, ms)
               for r in doc["runs"]):
            continue
        t0 = time.perf_counter()
        rows = []
        for i, fold in enumerate(cvmod.folds_by_group(data.shapes, groups, 5, fold_seed)):
            train_d = data.subset(data.shapes - fold)
            test_d = data.subset(fold).native().ranked(ts.MIN_CHOICES)
            models = {}
            for name, kind in register_kinds("s60rf", store, fold_seed, ms).items():
                models[name], _ = training.fit(train_d, kind=kind, seed=fold_seed, device=dev)
                del RANKERS[kind]
            for g in test_d.groups:
                ia = ts._aten_index(g)
                CUR_ATEN[0] = (g.problem, None if ia is None else float(np.log(g.times_ms[ia])), dev)
                row = {"key": g.problem.key, "fold": i, "first": {}}
                for name, m in models.items():
                    rec = ts._rec(g, ts._keys(m, g), ia)
                    row[name] = list(ts._metrics(rec, rec["order"]))
                    row["first"][name] = int(rec["order"][0])
                rows.append(row)
            print(f"rankfeat {store} {fold_seed} {ms} fold {i + 1}/5 ({time.perf_counter() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
        summ = {w: ts._summ(rows, w) for w in ("baseline", "rankfeat")}
        hit = lambda x: x <= 0.1 + 1e-12  # noqa: E731
        ch = [r for r in rows if r["first"]["rankfeat"] != r["first"]["baseline"]]
        flips = {"rankfeat": {"changed": len(ch),
                              "win": sum(hit(r["rankfeat"][0]) and not hit(r["baseline"][0]) for r in ch),
                              "lose": sum(hit(r["baseline"][0]) and not hit(r["rankfeat"][0]) for r in ch)}}
        doc, per = _load()
        doc["runs"].append({"mode": "rankfeat", "store": store, "fold_seed": fold_seed, "model_seed": ms,
                            "summary": summ, "flips": flips, "scored": len(rows), "wall_s": time.perf_counter() - t0,
                            "extra_columns": list(CUB_NAMES) + ["log2_analytic_us_vs_aten"]})
        per[f"s60rf:{store}:{fold_seed}:{ms}"] = rows
        _save(doc, per)
        print("rankfeat", store, fold_seed, ms, {w: round(v["top1_within_10pct"], 4) for w, v in summ.items()},
              flush=True)
    training._matrix = orig_matrix


def table(doc) -> str:
    by: dict = {}
    for r in doc["runs"]:
        by.setdefault((r["mode"], r["store"], r["fold_seed"]), []).append(r)
    lines = ["| store | fold seed | setting | top-1 within 10%, mean ± sd [per seed] | paired (pts) | "
             "top-1 regret | top-5 regret | changed picks (win/lose) | AUC |", "|---|---:|---|---|---|---:|---:|---|---|"]
    for (mode, store, fs), rs in sorted(by.items(), key=lambda x: (x[0][1], x[0][2], x[0][0] != "twostage")):
        rs = sorted(rs, key=lambda r: r["model_seed"])
        base = np.array([100 * r["summary"]["baseline"]["top1_within_10pct"] for r in rs])
        names = list(rs[0]["summary"])
        if mode == "rankfeat":
            names = names[1:]  # its baseline is the same ranker as twostage's (printed once)
        for w in names:
            v = np.array([100 * r["summary"][w]["top1_within_10pct"] for r in rs])
            r1 = np.mean([100 * r["summary"][w]["top1_regret_geomean"] for r in rs])
            r5 = np.mean([100 * r["summary"][w]["top5_regret_geomean"] for r in rs])
            sd = f" ± {v.std(ddof=1):.2f}" if len(v) > 1 else ""
            d = "" if w == "baseline" else ", ".join(f"{x:+.2f}" for x in v - base)
            fl = "" if w == "baseline" else ", ".join(
                f"{r['flips'][w]['changed']} ({r['flips'][w]['win']}/{r['flips'][w]['lose']})" for r in rs)
            auc = ", ".join(f"{r['auc'][w.split(':')[0]]:.3f}" for r in rs) if "auc" in rs[0] and ":" in w else ""
            lines.append(f"| {store} | {fs} | {w} | {v.mean():.2f}{sd} [{', '.join(f'{x:.2f}' for x in v)}] | {d} | "
                         f"{r1:.2f}% | {r5:.2f}% | {fl} | {auc} |")
        if mode == "twostage":
            for o in ("demote", "switch"):
                v = [100 * r["oracle"][o] for r in rs]
                lines.append(f"| {store} | {fs} | oracle {o} (perfect stage A) | {np.mean(v):.2f} "
                             f"[{', '.join(f'{x:.2f}' for x in v)}] | | | | | |")
    return "\n".join(lines)


if __name__ == "__main__":
    faulthandler.enable()
    what = sys.argv[1] if len(sys.argv) > 1 else "table"
    if what in ("run", "rankfeat"):
        ts._patch()
        (run if what == "run" else rankfeat)(sys.argv[2], int(sys.argv[3]), [int(x) for x in sys.argv[4].split(",")])
    print(table(_load()[0]))
