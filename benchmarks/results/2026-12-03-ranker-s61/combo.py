"""Session 61 (issue #19): s60's ``rankfeat`` ranker as stage B, with s60's ``cubrel`` stage A on top.

Session 60 tried the cuBLAS-time inputs either in stage A (``cubrel``, rules ``demote`` and
``switch``, on the shipped ranker) or in the ranker itself (``rankfeat``, no stage A), never
both. This script does both: stage B is s60's ``TimeRanker`` (the shipped ranker plus 5 columns
from cuBLAS's measured time), and stage A is s60's ``cubrel`` classifier built on the keys of
that ranker.

Nothing is copied: s60's ``cublas_time.py`` and s59's ``twostage.py`` are imported by path, so the
stores, the folds (``cv.folds_by_group``, 5 folds by shape), the inner 3-fold out-of-fold keys
(seed 100 + fold seed), the stage-A classifier settings and rows (``_rows`` ``cubrel``), the
threshold search on the training folds only (``_choose``), the rules (``_decide``), the scoring
(``_metrics``, ``_summ``) and ``TimeRanker`` are the same code. Per outer fold:

* the shipped ranker (``baseline``) fitted on the training fold, as s59/s60 do;
* ``TimeRanker`` fitted on the training fold (``rankfeat``: must equal s60's ``rankfeat``);
* 3 inner ``TimeRanker`` fits give out-of-fold keys on the training problems; stage A
  (``cubrel`` inputs from those keys) is trained on them and its thresholds chosen there;
* ``combo:demote`` / ``combo:switch``: the rule applied to the outer ``TimeRanker``'s order.

``TimeRanker`` takes aten's measured ln ms in fit from the training labels and in predict from
``cublas_time.CUR_ATEN`` (set before each problem is keyed, with the problem's own device).

    GEMMTUNE_FP32_PRECISION=ieee OMP_NUM_THREADS=1 \
        python benchmarks/results/2026-12-03-ranker-s61/combo.py run h200 0 0,1,2
    python benchmarks/results/2026-12-03-ranker-s61/combo.py table
"""

from __future__ import annotations

import faulthandler
import gzip
import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "src"))


def _load_mod(name, rel):
    spec = importlib.util.spec_from_file_location(name, HERE.parent / rel)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ct = _load_mod("cublas_time", "2026-12-03-ranker-s60/cublas_time.py")
ts = ct.ts  # s59's twostage, as s60 imported it (one module object shared by both)

from gemmtune.model import cv as cvmod  # noqa: E402
from gemmtune.model import training  # noqa: E402
from gemmtune.model.regressors import RANKERS, _LGBMRanker  # noqa: E402

OUT = HERE / "results.json"
PER = HERE / "per_problem.json.gz"
S60 = HERE.parent / "2026-12-03-ranker-s60" / "results.json"
VARIANT = "cubrel"
RULES = ("demote", "switch")
NAMES = ("baseline", "rankfeat", "combo:demote", "combo:switch")
def _tkeys(model, g, dev):
    """TimeRanker keys of g: aten's measured ln ms passed through s60's side channel."""
    ia = ts._aten_index(g)
    ct.CUR_ATEN[0] = (g.problem, None if ia is None else float(np.log(g.times_ms[ia])), dev)
    try:
        return ts._keys(model, g)
    finally:
        ct.CUR_ATEN[0] = None


def one_fold(train_d, test_d, dev, groups, fold_seed, model_seed, kinds, say):
    inner = cvmod.folds_by_group(train_d.shapes, groups, ts.INNER, 100 + fold_seed)
    a_rows, a_y, a_fold, recs_tr, fold_tr = [], [], [], [], []
    for j, f in enumerate(inner):
        m_in, _ = training.fit(train_d.subset(train_d.shapes - f), kind=kinds["rankfeat"], seed=fold_seed, device=dev)
        for g in train_d.subset(f).ranked(ts.MIN_CHOICES).groups:
            ia = ts._aten_index(g)
            if ia is None:
                continue
            gdev = g.device or dev
            key = _tkeys(m_in, g, gdev)
            X = ts._features_of(g, gdev)
            a_rows.append(ct._rows(g, X, key, ia, gdev)[VARIANT])
            a_y.append(float(g.times_ms[ia] <= 1.1 * np.min(g.times_ms) * (1 + 1e-12)))
            a_fold.append(j)
            if g.device is None:
                recs_tr.append(ts._rec(g, key, ia))
                fold_tr.append(len(a_y) - 1)
        say(f"inner {j + 1}/{ts.INNER}")
    A, yA, fA = np.array(a_rows), np.array(a_y), np.array(a_fold)
    p_oof = np.empty(len(A))
    for j in range(ts.INNER):
        clf = ts._clf_fit(A[fA != j], yA[fA != j], model_seed)
        p_oof[fA == j] = clf.predict(A[fA == j])
    ps_tr = [float(p_oof[i]) for i in fold_tr]
    chosen = {rule: ts._choose(recs_tr, ps_tr, rule)[:2] for rule in RULES}
    clf = ts._clf_fit(A, yA, model_seed)
    base, _ = training.fit(train_d, kind=kinds["baseline"], seed=fold_seed, device=dev)
    tr, _ = training.fit(train_d, kind=kinds["rankfeat"], seed=fold_seed, device=dev)
    out = []
    for g in test_d.groups:
        ia = ts._aten_index(g)
        t = np.asarray(g.times_ms, dtype=np.float64)
        rb = ts._rec(g, ts._keys(base, g), ia)
        key = _tkeys(tr, g, dev)
        rec = ts._rec(g, key, ia)
        row = {"key": g.problem.key, "has_aten": ia is not None, "baseline": list(ts._metrics(rb, rb["order"])),
               "rankfeat": list(ts._metrics(rec, rec["order"])),
               "first": {"baseline": int(rb["order"][0]), "rankfeat": int(rec["order"][0])}, "p": None}
        p = None
        if ia is not None:
            p = float(clf.predict(ct._rows(g, ts._features_of(g, dev), key, ia, dev)[VARIANT][None, :])[0])
            row.update(p=p, aten_ok=bool(t[ia] <= 1.1 * t.min() * (1 + 1e-12)),
                       ranker_first_is_aten=bool(rec["order"][0] == ia),
                       aten_first_regret=float(t[ia] / t.min() - 1.0),
                       other_first_regret=float(t[rec["order"][rec["order"] != ia][0]] / t.min() - 1.0))
        for rule in RULES:
            order = ts._decide(rec, p, rule, chosen[rule][0])
            row[f"combo:{rule}"] = list(ts._metrics(rec, order))
            row["first"][f"combo:{rule}"] = int(order[0])
        out.append(row)
    info = {"train_native_ranked": len(recs_tr), "stageA_rows": len(yA), "stageA_pos_rate": float(yA.mean()),
            "train_hits_rankfeat": ts._hits(recs_tr, [None] * len(recs_tr), "none", ()),
            "chosen": {f"combo:{r}": {"th": [float(x) for x in th], "train_hits": h} for r, (th, h) in chosen.items()}}
    return out, info


def _summ_run(rows):
    summ = {w: ts._summ(rows, w) for w in NAMES}
    at = [r for r in rows if r["has_aten"]]
    hit = lambda x: x <= 0.1 + 1e-12  # noqa: E731
    flips = {}
    for w in NAMES[1:]:
        ch = [r for r in rows if r["first"][w] != r["first"]["baseline"]]
        flips[w] = {"changed": len(ch), "win": sum(hit(r[w][0]) and not hit(r["baseline"][0]) for r in ch),
                    "lose": sum(hit(r["baseline"][0]) and not hit(r[w][0]) for r in ch)}
    # against the rankfeat order (what stage A changed)
    for w in ("combo:demote", "combo:switch"):
        ch = [r for r in rows if r["first"][w] != r["first"]["rankfeat"]]
        flips[w + " vs rankfeat"] = {"changed": len(ch),
                                     "win": sum(hit(r[w][0]) and not hit(r["rankfeat"][0]) for r in ch),
                                     "lose": sum(hit(r["rankfeat"][0]) and not hit(r[w][0]) for r in ch)}
    od = [r["other_first_regret"] if r["has_aten"] and r["ranker_first_is_aten"] and not r["aten_ok"]
          else r["rankfeat"][0] for r in rows]
    osw = [(r["aten_first_regret"] if r["aten_ok"] else r["other_first_regret"]) if r["has_aten"]
           else r["rankfeat"][0] for r in rows]
    return {"summary": summ, "auc": ct._auc([r["p"] for r in at], [r["aten_ok"] for r in at]), "flips": flips,
            "oracle": {"demote": float(np.mean([hit(x) for x in od])), "switch": float(np.mean([hit(x) for x in osw]))},
            "aten_rows": len(at), "ranker_aten_first": sum(r["ranker_first_is_aten"] for r in at),
            "ranker_aten_first_not_ok": sum(r["ranker_first_is_aten"] and not r["aten_ok"] for r in at)}


def _load():
    doc = json.loads(OUT.read_text()) if OUT.exists() else {"runs": []}
    per = json.loads(gzip.decompress(PER.read_bytes())) if PER.exists() else {}
    return doc, per


def run(store, fold_seed, model_seeds):
    data, n_excl, groups = ts._prepared(store)
    dev = training._device_for(data, ts.STORES[store][3])
    for ms in model_seeds:
        doc, per = _load()
        if any((r["store"], r["fold_seed"], r["model_seed"]) == (store, fold_seed, ms) for r in doc["runs"]):
            continue
        kinds = ct.register_kinds("s61", store, fold_seed, ms)
        t0 = time.perf_counter()
        rows, infos = [], []
        for i, fold in enumerate(cvmod.folds_by_group(data.shapes, groups, 5, fold_seed)):
            train_d = data.subset(data.shapes - fold)
            test_d = data.subset(fold).native().ranked(ts.MIN_CHOICES)
            say = lambda m, i=i: print(f"s61 {store} {fold_seed} {ms} fold {i + 1}/5: {m} "  # noqa: E731
                                       f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
            r, info = one_fold(train_d, test_d, dev, groups, fold_seed, ms, kinds, say)
            for x in r:
                x["fold"] = i
            rows += r
            infos.append(info)
            say("done")
        for k in kinds.values():
            del RANKERS[k]
        s = _summ_run(rows)
        doc["runs"].append({"store": store, "fold_seed": fold_seed, "model_seed": ms, **s, "folds": infos,
                            "wall_s": time.perf_counter() - t0, "scored": len(rows), "excluded_problems": n_excl,
                            "ranker": _LGBMRanker().hyperparameters(),
                            "rankfeat_extra_columns": list(ct.CUB_NAMES) + ["log2_analytic_us_vs_aten"],
                            "stage_a": {**ts.CLF_PARAMS, "rounds": ts.CLF_ROUNDS,
                                        "features": list(ts.A_NAMES) + list(ct.CUB_NAMES + ct.REL_NAMES)}})
        per[f"s61:{store}:{fold_seed}:{ms}"] = rows
        doc.update(versions=ts.versions(), date=time.strftime("%Y-%m-%d", time.gmtime()))
        OUT.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        PER.write_bytes(gzip.compress((json.dumps(per, sort_keys=True) + "\n").encode()))
        print("s61", store, fold_seed, ms, {w: round(v["top1_within_10pct"], 4) for w, v in s["summary"].items()},
              f"auc {s['auc']:.3f} wall {time.perf_counter() - t0:.0f} s", flush=True)


def _s60(store, fs, ms):
    """s60's per-seed top-1 within 10% of baseline, cubrel:demote, cubrel:switch and rankfeat."""
    out = {}
    for r in json.loads(S60.read_text())["runs"]:
        if (r["store"], r["fold_seed"], r["model_seed"]) != (store, fs, ms):
            continue
        for w, v in r["summary"].items():
            key = ("s60 rankfeat" if w == "rankfeat" else f"s60 {w}" if w != "baseline" else f"s60 baseline ({r['mode']})")
            out[key] = v["top1_within_10pct"]
    return out


def table(doc) -> str:
    by: dict = {}
    for r in doc["runs"]:
        by.setdefault((r["store"], r["fold_seed"]), []).append(r)
    lines = ["| store | fold seed | setting | top-1 within 10%, mean ± sd [per seed] | vs baseline (pts) | "
             "vs s60 cubrel:demote | vs s60 cubrel:switch | top-1 regret | top-5 regret | changed picks vs baseline "
             "(win/lose) | AUC |", "|---|---:|---|---|---|---|---|---:|---:|---|---|"]
    checks = []
    for (store, fs), rs in sorted(by.items()):
        rs = sorted(rs, key=lambda r: r["model_seed"])
        s60 = [_s60(store, fs, r["model_seed"]) for r in rs]
        pct = lambda w: np.array([100 * r["summary"][w]["top1_within_10pct"] for r in rs])  # noqa: E731
        base = pct("baseline")
        ref = {k: np.array([100 * s.get(k, np.nan) for s in s60]) for k in ("s60 cubrel:demote", "s60 cubrel:switch")}
        for w in NAMES:
            v = pct(w)
            r1 = np.mean([100 * r["summary"][w]["top1_regret_geomean"] for r in rs])
            r5 = np.mean([100 * r["summary"][w]["top5_regret_geomean"] for r in rs])
            sd = f" ± {v.std(ddof=1):.2f}" if len(v) > 1 else ""
            d = lambda a: ", ".join(f"{x:+.2f}" for x in v - a) + f" (mean {np.mean(v - a):+.2f})"  # noqa: E731
            fl = "" if w == "baseline" else ", ".join(
                f"{r['flips'][w]['changed']} ({r['flips'][w]['win']}/{r['flips'][w]['lose']})" for r in rs)
            auc = ", ".join(f"{r['auc']:.3f}" for r in rs) if w.startswith("combo") else ""
            lines.append(f"| {store} | {fs} | {w} | {v.mean():.2f}{sd} [{', '.join(f'{x:.2f}' for x in v)}] | "
                         f"{'' if w == 'baseline' else d(base)} | {'' if w == 'baseline' else d(ref['s60 cubrel:demote'])} | "
                         f"{'' if w == 'baseline' else d(ref['s60 cubrel:switch'])} | {r1:.2f}% | {r5:.2f}% | {fl} | {auc} |")
        for r, s in zip(rs, s60):
            for mine, theirs in (("baseline", "s60 baseline (twostage)"), ("baseline", "s60 baseline (rankfeat)"),
                                 ("rankfeat", "s60 rankfeat")):
                a, b = r["summary"][mine]["top1_within_10pct"], s.get(theirs)
                checks.append(f"{store} {fs} {r['model_seed']} {mine} = {theirs}: {a:.6f} vs "
                              f"{'missing' if b is None else f'{b:.6f}'} -> {'same' if a == b else 'DIFFERENT'}")
    return "\n".join(lines + ["", "Reproduction of s60 (top-1 within 10%, exact equality):"] + checks)


if __name__ == "__main__":
    faulthandler.enable()
    what = sys.argv[1] if len(sys.argv) > 1 else "table"
    if what == "run":
        ts._patch()
        ct.hook_matrix()
        run(sys.argv[2], int(sys.argv[3]), [int(x) for x in sys.argv[4].split(",")])
    print(table(_load()[0]))
