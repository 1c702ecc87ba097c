"""Evaluate gemmtune's performance models on collected GPU timings (CPU only) and ship one.

    python scripts/eval_model.py                    # benchmarks/model/2026-11-23-h200-eval.{md,json,png}
    python scripts/eval_model.py --ship src/gemmtune/data/models/nvidia-h200.json
    python scripts/eval_model.py --data other.sqlite.gz --name 2027-01-01-h200-eval --out /tmp/x

Everything here runs on a CPU from committed files; nothing is measured on a GPU.

What it does:

1. Loads the collected store (default ``data/collect/collect.sqlite.gz``), leaves out
   public-suite shapes (evaluation only), and labels every shape with its group from
   the collection plan (gemmtune.collect.shapes: llm, decode, ...).
2. Splits BY SHAPE, stratified by group, seed 0: 20% of each group's shapes held out.
3. Trains the two learned families of ``gemmtune.model.learned`` (GBT, MLP) on the
   training shapes, with the default near-best weighting and without it (ablation),
   and scores them, the analytic model, random ranking (mean of seeded draws) and
   "cuBLAS only" on the held-out shapes. Also 5-fold cross-validation by shape over all
   shapes (every shape held out once), which is less noisy than one 20% split.
4. Scores the model trained on ALL collected shapes on the public suite's bf16 shapes
   measured on the same GPU (benchmarks/results/2026-11-21-h200-*): shapes unlike the
   training set, with and without the domain guard. The analytic model's constants were
   fitted to that store, so that comparison flatters the analytic model.
5. Times training (per family, on the training split) and prediction of 2,000 choices.
6. With ``--ship PATH``: trains the chosen family (lower 5-fold geomean top-1 regret) on
   all collected shapes and writes it, with provenance and these results, to PATH.

The cross-validation and the shipping alone are a command: ``gemmtune train --store DATA --cv 5
--ship PATH`` (gemmtune.model.cv); this script adds the full evaluation report around them.

Regret is always against the best MEASURED choice of the shape's sample (a seeded
random sample of the search space, not an exhaustive search).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

import gemmtune  # noqa: E402
from gemmtune.device import DeviceInfo  # noqa: E402
from gemmtune.model import AnalyticModel, LearnedModel, fit  # noqa: E402
from gemmtune.model.cv import folds_by_group as cv_folds, shape_groups  # noqa: E402
from gemmtune.model.learned import (MIN_RANKED_CHOICES, Dataset, _predict_ms, exclude, load_dataset,  # noqa: E402
                                    public_shapes, shape_metrics, split_by_shape, summarize)
from gemmtune.problem import Problem  # noqa: E402
from gemmtune.tune import candidates  # noqa: E402

DATA = ROOT / "data" / "collect" / "collect.sqlite.gz"
PUBLIC_STORES = (ROOT / "benchmarks/results/2026-11-21-h200-public-full/store.sqlite.gz",
                 ROOT / "benchmarks/results/2026-11-21-h200-odd-splitk-pad/store.sqlite.gz")
# Issue #5's targets for the model's ranking on held-out shapes.
TARGET_TOP5_GEOMEAN = 0.03   # top-5 within 3% of the best, geomean over shapes
TARGET_TOP1_WITHIN = 0.80    # top-1 within 10% of the best on at least 80% of shapes
VIEWS = {"all": ("top1", "top5", "every measured choice, cuBLAS included (the model's own top-k)"),
         "tuner": ("tuner_top1", "tuner_top5", "cuBLAS always benchmarked + the model's top-k of the rest "
                   "(what tune(benchmark_space=k) runs)"),
         "triton": ("rest_top1", "rest_top5", "the Triton families only (cuBLAS left out): top-k vs the best "
                    "Triton choice")}


# ------------------------------------------------------------------ data
def _rel(path: Path) -> str:
    """``path`` relative to the repository when inside it (reports and provenance stay portable)."""
    p = path.resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(path)


def coverage_note(d: dict) -> str:
    """Which of the collection plan's shape groups the data covers, from the counts (not prose)."""
    plan, got = d.get("plan_by_group", {}), d.get("by_group", {})
    parts = [f"{g} {got.get(g, 0)} of {n}" for g, n in sorted(plan.items())]
    return (f"shapes collected per plan group: {', '.join(parts)}; "
            f"{d.get('unaligned_problems', 0)} collected problems have an unaligned operand")


def baseline_mask(g) -> np.ndarray:
    return np.array([c.family == "aten" and not c.pad for c in g.choices])


def dataset_counts(data: Dataset, groups) -> dict:
    fam = Counter()
    best = Counter()
    for g in data.groups:
        for c in g.choices:
            fam[("pad+" if c.pad else "") + c.family] += 1
        b = g.choices[int(np.argmin(g.times_ms))]
        best[("pad+" if b.pad else "") + b.family] += 1
    return {"rows": data.rows, "problems": len(data.groups), "shapes": len(data.shapes),
            "by_group": dict(Counter(groups.get(s, "?") for s in data.shapes)),
            "plan_by_group": dict(Counter(groups.values())),
            "rows_by_family": dict(fam), "best_measured_by_family": dict(best),
            "dtypes": dict(Counter(g.problem.dtype for g in data.groups)),
            "layouts": dict(Counter(f"{g.problem.layout_a}/{g.problem.layout_b}" for g in data.groups)),
            "unaligned_problems": sum(not (g.problem.aligned_a and g.problem.aligned_b) for g in data.groups),
            "choices_per_shape": {"min": min(len(g.choices) for g in data.groups),
                                  "median": float(np.median([len(g.choices) for g in data.groups])),
                                  "max": max(len(g.choices) for g in data.groups)}}


# ------------------------------------------------------------------ scoring
def score(model, data: Dataset) -> tuple[dict, list[dict]]:
    per = []
    for g in data.groups:
        m = shape_metrics(_predict_ms(model, g.problem, g.choices), g.times_ms, baseline=baseline_mask(g))
        m["key"] = g.problem.key
        per.append(m)
    return summarize(per), per


def score_random(data: Dataset, draws: int, seed: int) -> tuple[dict, list[dict]]:
    """The mean of ``draws`` summaries of uniformly random rankings (seeded), and the
    per-shape metrics of all draws pooled (for the CDF)."""
    rng = np.random.default_rng(seed)
    sums: list[dict] = []
    pooled: list[dict] = []
    for _ in range(draws):
        per = [shape_metrics(rng.random(len(g.choices)), g.times_ms, baseline=baseline_mask(g))
               for g in data.groups]
        sums.append(summarize(per))
        pooled += per
    keys = [k for k in sums[0] if isinstance(sums[0][k], float)]
    out = {k: float(np.mean([s[k] for s in sums])) for k in keys}
    out.update({"shapes": sums[0]["shapes"], "choices": sums[0]["choices"], "draws": draws})
    return out, pooled


def score_cublas(data: Dataset) -> tuple[dict, list[dict]]:
    """cuBLAS alone: its time against the best measured (top-1 of the 'all' view only)."""
    per = []
    for g in data.groups:
        mask = baseline_mask(g)
        r = float(g.times_ms[mask].min() / g.times_ms.min() - 1.0)
        per.append({"key": g.problem.key, "top1_regret": r})
    r1 = np.array([m["top1_regret"] for m in per])
    return ({"shapes": len(per), "top1_regret_geomean": float(np.exp(np.mean(np.log1p(r1))) - 1.0),
             "top1_within_10pct": float((r1 <= 0.10 + 1e-12).mean()), "top1_found": float((r1 <= 1e-12).mean()),
             "top1_regret_mean": float(r1.mean())}, per)


def targets(s: dict, view: str = "all") -> dict:
    t1, t5 = VIEWS[view][:2]
    g5 = s.get(f"{t5}_regret_geomean")
    w1 = s.get(f"{t1}_within_10pct")
    return {"top5_geomean": g5, "top5_met": None if g5 is None else bool(g5 <= TARGET_TOP5_GEOMEAN + 1e-12),
            "top1_within_10pct": w1, "top1_met": None if w1 is None else bool(w1 >= TARGET_TOP1_WITHIN - 1e-12)}


def fit_timed(data: Dataset, kind: str, weighting: str, seed: int = 0):
    t0 = time.perf_counter()
    model, _ = fit(data, kind=kind, seed=seed, weighting=weighting)
    return model, time.perf_counter() - t0


def folds_by_group(data: Dataset, groups, k: int, seed: int) -> list[set]:
    return cv_folds(data.shapes, groups, k, seed)


def predict_timing(models: dict, reps: int = 30) -> dict:
    """Wall time of model.predict for 2,000 choices of two shapes (best and median of reps)."""
    dev = DeviceInfo.lookup("h200")
    out = {}
    for shape in ((4096, 4096, 4096), (16, 4096, 4096)):
        p = Problem.from_sizes(*shape, "bf16")
        cands = candidates(p, list(gemmtune.families()), "exhaustive", dev)[:2000]
        row = {"choices": len(cands)}
        for name, m in models.items():
            m.predict(p, cands)
            ts = []
            for _ in range(reps):
                t0 = time.perf_counter()
                m.predict(p, cands)
                ts.append(time.perf_counter() - t0)
            row[name] = {"best_ms": 1e3 * min(ts), "median_ms": 1e3 * float(np.median(ts))}
            if hasattr(m, "trust"):
                row[name]["trust"] = m.trust(p)[0]
        out["x".join(map(str, shape))] = row
    return out


def public_dataset() -> Dataset | None:
    """bf16 problems of the public suite on the same H200 / triton 3.6; the odd and splitk
    groups measured again with the current zero-padding pad+ replace the first run's."""
    stores = [p for p in PUBLIC_STORES if p.is_file()]
    if not stores:
        return None
    first = load_dataset(stores[0])
    later = {g.problem.key: g for s in stores[1:] for g in load_dataset(s).groups}
    groups = [later.get(g.problem.key, g) for g in first.groups if g.problem.dtype == "bfloat16"]
    return Dataset(groups, first.context, " + ".join(str(s.relative_to(ROOT)) for s in stores))


def without_guard(m: LearnedModel) -> LearnedModel:
    prov = {k: v for k, v in m.provenance.items() if k != "domain"}
    return LearnedModel(m.device, m.family, m.regressor, prov)


def nvmmh_overlap(data: Dataset) -> dict | None:
    """How many of nvMatmulHeuristics' top-5 configs (mapped to our Triton choices) are
    among the measured samples at all: a CPU-only indication, not a measurement."""
    try:
        from gemmtune.benchmark import nvmmh_choices

        hits = total = shapes_hit = first_hit = deep = 0
        regrets = []
        for g in data.groups:
            ids = {c.id: i for i, c in enumerate(g.choices)}
            picks = nvmmh_choices(g.problem, "NVIDIA H200", 5)
            deep += sum(c.config.num_stages > 5 for c in picks)  # the exhaustive spaces stop at 5 stages
            found = [ids[c.id] for c in picks if c.id in ids]
            total += len(picks)
            hits += len(found)
            shapes_hit += bool(found)
            first_hit += bool(picks and picks[0].id in ids)
            if found:
                regrets.append(float(g.times_ms[found].min() / g.times_ms.min() - 1.0))
        return {"shapes": len(data.groups), "configs": total, "in_sample": hits, "shapes_with_any": shapes_hit,
                "more_than_5_stages": deep,
                "top1_in_sample": first_hit, "regret_of_those_found": regrets}
    except Exception as e:  # optional dependency, optional result
        return {"error": f"{type(e).__name__}: {e}"}


# ------------------------------------------------------------------ report
def pct(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def met(flag) -> str:
    return "-" if flag is None else ("**MET**" if flag else "**MISSED**")


def table(rows: list[tuple[str, dict]], view: str) -> list[str]:
    t1, t5 = VIEWS[view][:2]
    out = ["| model | Spearman mean | top-1 regret geomean | top-1 within 10% | top-1 = best | "
           "top-5 regret geomean | top-5 within 10% |", "|---|---|---|---|---|---|---|"]
    for name, s in rows:
        sp = s.get("spearman_mean")
        found = s.get("top1_found") if view == "all" else None
        out.append(f"| {name} | {'-' if sp is None or view != 'all' else f'{sp:.3f}'} | "
                   f"{pct(s.get(f'{t1}_regret_geomean'))} | {pct(s.get(f'{t1}_within_10pct'))} | {pct(found)} | "
                   f"{pct(s.get(f'{t5}_regret_geomean'))} | {pct(s.get(f'{t5}_within_10pct'))} |")
    return out


STYLE = {"gbt": ("C0", "-"), "mlp": ("C1", "-"), "analytic": ("C2", "-"), "cuBLAS only": ("C3", "--"),
         "random": ("C4", "-")}


def plot(path: Path, curves: dict[str, list[float]], curves_rest: dict[str, list[float]], title: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, cs, sub in ((axes[0], curves, "top-1 over all choices (cuBLAS included)"),
                        (axes[1], curves_rest, "top-1 among Triton choices (cuBLAS left out)")):
        for name, r in cs.items():
            x = np.sort(100 * np.asarray(r))
            y = np.arange(1, len(x) + 1) / len(x)
            color, ls = STYLE.get(name.split(" (")[0], ("k", "-"))
            ax.step(np.r_[0, x], np.r_[0, y], where="post", label=name, color=color, ls=ls)
        ax.axvline(10, color="grey", ls=":", lw=1)
        ax.axhline(TARGET_TOP1_WITHIN, color="grey", ls=":", lw=1)
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlim(0, 1000)
        ax.set_xlabel("regret: time / best measured - 1 (%)")
        ax.set_ylabel("share of held-out shapes")
        ax.set_title(sub, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA, help="results store or CSV (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "model", help="report folder")
    ap.add_argument("--name", default="2026-11-23-h200-eval", help="report file stem")
    ap.add_argument("--ship", type=Path, metavar="PATH", help="also train the chosen family on all shapes, write it here")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--test-fraction", type=float, default=0.2)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--random-draws", type=int, default=200)
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--min-choices", type=int, default=MIN_RANKED_CHOICES,
                    help="score rankings only on problems with at least this many measured choices "
                    "(default %(default)s; every problem is still trained on)")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    say = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731

    data = load_dataset(args.data)
    data, n_public = exclude(data, public_shapes())
    groups = shape_groups()
    counts = dataset_counts(data, groups)
    say(f"{data.rows} rows, {len(data.groups)} problems ({n_public} public-suite problems left out)")
    tr, te_all = split_by_shape(data, args.test_fraction, args.seed, strata=groups)
    # Rankings are scored where a shape's sample can be ranked (Dataset.ranked); a problem
    # measured only in part (cuBLAS and a few) would make every ranking look perfect.
    te = te_all.ranked(args.min_choices)
    data_ranked = data.ranked(args.min_choices)
    n_unranked = len(data.groups) - len(data_ranked.groups)
    say(f"split by shape, stratified: {len(tr.shapes)} train / {len(te_all.shapes)} held-out shapes "
        f"({len(te.groups)} of {len(te_all.groups)} held-out problems have >= {args.min_choices} choices and are scored)")
    dev = DeviceInfo.lookup(data.context["device_name"])
    analytic = AnalyticModel(dev)

    # --- held-out split
    learned: dict[str, LearnedModel] = {}
    fit_s: dict[str, float] = {}
    for kind in ("gbt", "mlp"):
        for weighting in ("near_best", "none"):
            name = kind if weighting == "near_best" else f"{kind}, unweighted"
            learned[name], fit_s[name] = fit_timed(tr, kind, weighting, args.seed)
            say(f"trained {name} in {fit_s[name]:.1f} s")
    held: dict[str, dict] = {}
    per_shape: dict[str, list] = {}
    for name, m in {**learned, "analytic": analytic}.items():
        held[name], per_shape[name] = score(m, te)
    held["random"], rand_pooled = score_random(te, args.random_draws, args.seed)
    aten_first = float(np.mean([bool(baseline_mask(g)[int(np.argmin(_predict_ms(analytic, g.problem, g.choices)))])
                                for g in te.groups]))
    held["cuBLAS only"], per_shape["cuBLAS only"] = score_cublas(te)
    by_group = {}
    for name in ("gbt", "mlp", "analytic"):
        by_group[name] = {}
        for gname in sorted({groups.get(s, "?") for s in te.shapes}):
            sub = te.subset([s for s in te.shapes if groups.get(s, "?") == gname])
            by_group[name][gname] = score(learned.get(name, analytic), sub)[0]

    # --- k-fold cross-validation by shape over everything
    folds = folds_by_group(data, groups, args.folds, args.seed)
    cv_per: dict[str, list] = defaultdict(list)
    for i, fold in enumerate(folds):
        train_d = data.subset(data.shapes - fold)
        test_d = data.subset(fold).ranked(args.min_choices)
        for kind in ("gbt", "mlp"):
            for weighting in ("near_best", "none"):
                name = kind if weighting == "near_best" else f"{kind}, unweighted"
                m, _ = fit_timed(train_d, kind, weighting, args.seed)
                cv_per[name] += score(m, test_d)[1]
        cv_per["analytic"] += score(analytic, test_d)[1]
        say(f"cross-validation fold {i + 1}/{len(folds)} done")
    cv = {name: summarize(per) for name, per in cv_per.items()}
    cv["random"], _ = score_random(data_ranked, max(20, args.random_draws // 4), args.seed)
    cv["cuBLAS only"], _ = score_cublas(data_ranked)
    ship_kind = min(("gbt", "mlp"), key=lambda k: (cv[k]["top1_regret_geomean"], -cv[k]["spearman_mean"]))
    say(f"chosen family (lower 5-fold geomean top-1 regret): {ship_kind}")

    # --- the model trained on all collected shapes: public suite, timing, shipping
    full, full_fit_s = fit_timed(data, ship_kind, "near_best", args.seed)
    pub = public_dataset()
    public = None
    if pub is not None:
        public = {"source": pub.source, "problems": len(pub.groups), "results": {}}
        for name, m in ((f"{ship_kind} (all shapes), with domain guard", full),
                        (f"{ship_kind} (all shapes), no domain guard", without_guard(full)),
                        ("analytic", analytic)):
            public["results"][name] = score(m, pub)[0]
        public["results"]["random"], _ = score_random(pub, args.random_draws, args.seed)
        public["results"]["cuBLAS only"], _ = score_cublas(pub)
        public["trust"] = {g.problem.key: full.trust(g.problem) for g in pub.groups}
    timing = predict_timing({"analytic": analytic, "gbt": learned["gbt"], "mlp": learned["mlp"]})
    nv = nvmmh_overlap(te)

    shipped = None
    if args.ship:
        ev = {"report": f"benchmarks/model/{args.name}.md",
              "note": ("held_out / held_out_analytic / cv5 were measured with the same family and settings trained "
                       "on the training split (held_out) or on 4 of 5 folds (cv5); this file was then trained on "
                       f"ALL {len(data.shapes)} collected shapes, so none of them is held out from it"),
              "split": {"test_fraction": args.test_fraction, "seed": args.seed, "stratified_by": "shape group",
                        "test_shapes": sorted(list(s) for s in te.shapes)},
              "held_out": held[ship_kind], "held_out_analytic": held["analytic"],
              "cv5": cv[ship_kind], "cv5_analytic": cv["analytic"]}
        full.provenance["training_set"].update({
            "which": f"all {len(data.shapes)} collected shapes (after the evaluation)",
            "data": _rel(args.data),
            "collected": "2026-11-22 and 2026-11-23, NVIDIA H200, timer profile 'quick' (see data/collect/README.md)",
            "public_problems_excluded": n_public})
        full.provenance["evaluation"] = ev
        args.ship.parent.mkdir(parents=True, exist_ok=True)
        full.save(args.ship)
        size = args.ship.stat().st_size
        shipped = {"path": _rel(args.ship), "family": ship_kind, "bytes": size, "fit_s": full_fit_s}
        say(f"wrote {args.ship} ({size / 1024:.0f} KiB)")

    result = {
        "name": args.name,
        "data": {"source": _rel(args.data), "context": data.context, "public_problems_excluded": n_public, **counts},
        "split": {"how": "by (M, N, K), stratified by shape group (the collection plan), seed "
                  f"{args.seed}", "test_fraction": args.test_fraction,
                  "train_shapes": len(tr.shapes), "test_shapes": len(te.shapes),
                  "held_out_shapes_all": len(te_all.shapes), "min_choices": args.min_choices,
                  "held_out_problems_unscored": len(te_all.groups) - len(te.groups),
                  "problems_unscored_all": n_unranked,
                  "test_by_group": dict(Counter(groups.get(s, "?") for s in te.shapes)),
                  "test_keys": sorted(g.problem.key for g in te.groups)},
        "views": {k: v[2] for k, v in VIEWS.items()},
        "targets": {"top5_regret_geomean_at_most": TARGET_TOP5_GEOMEAN, "top1_within_10pct_at_least": TARGET_TOP1_WITHIN},
        "held_out": held, "held_out_targets": {n: {v: targets(s, v) for v in VIEWS} for n, s in held.items()
                                               if n not in ("cuBLAS only",)},
        "held_out_by_group": by_group, "held_out_per_shape": per_shape,
        "cv": {"folds": args.folds, "summaries": cv,
               "targets": {n: {v: targets(s, v) for v in VIEWS} for n, s in cv.items() if n != "cuBLAS only"}},
        "analytic_ranks_cublas_first": aten_first,
        "chosen_family": ship_kind, "chosen_by": "lower geomean top-1 regret (all choices) in k-fold CV",
        "public_suite": public,
        "train_s": fit_s, "train_all_s": full_fit_s,
        "predict_2000": timing,
        "nvmmh_in_sample": nv,
        "shipped": shipped,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
                    "platform": platform.platform(), "processor": platform.processor() or platform.machine()},
        "gemmtune": gemmtune.__version__,
        "wall_s": None,
    }
    result["wall_s"] = time.perf_counter() - t_start
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=1, sort_keys=True, default=str) + "\n")

    png = None
    if not args.no_plot:
        curves = {n: [m["top1_regret"] for m in per_shape[n]] for n in ("gbt", "mlp", "analytic", "cuBLAS only")}
        curves["random (pooled draws)"] = [m["top1_regret"] for m in rand_pooled]
        rest = {n: [m["rest_top1_regret"] for m in per_shape[n]] for n in ("gbt", "mlp", "analytic")}
        rest["random (pooled draws)"] = [m["rest_top1_regret"] for m in rand_pooled]
        png = args.out / f"{args.name}-regret-cdf.png"
        if not plot(png, curves, rest, f"top-1 regret CDF on {len(te.groups)} held-out shapes "
                    f"({data.context['device_name']}, bf16)"):
            png = None
    (args.out / f"{args.name}.md").write_text(render(result, png))
    say(f"wrote {args.out / (args.name + '.md')} in {result['wall_s']:.0f} s")
    return 0


def render(r: dict, png: Path | None) -> str:
    d, sp, held, cv = r["data"], r["split"], r["held_out"], r["cv"]["summaries"]
    ctx = d["context"]
    ship = r["chosen_family"]
    dts = ", ".join(f"{k} ({v} problems)" for k, v in sorted(d["dtypes"].items()))
    L = [f"# Performance model evaluation: {ctx['device_name']}, {', '.join(sorted(d['dtypes']))}, {r['name'][:10]}", "",
         f"Produced by `python scripts/eval_model.py` (CPU only, from committed data; {r['wall_s']:.0f} s on "
         f"{r['machine']['cpus']} CPU cores). All numbers are in `{r['name']}.json`.", "",
         "## Data", "",
         f"`{Path(d['source']).name}`: {d['rows']:,} verified timings of {d['shapes']} shapes "
         f"({', '.join(f'{v} {k}' for k, v in sorted(d['by_group'].items()))}); dtypes: {dts}; measured on "
         f"{ctx['device_name']} with torch {ctx['torch_version']} and triton {ctx['triton_version']} "
         "(timer profile `quick`: CUDA graphs, L2-cold, median of 5 replays; candidates already > 3x their problem's "
         "best from one GPU-bound pass). Per problem: cuBLAS, a seeded random sample of the triton_mm and split-K "
         "spaces (the first shapes from the whole exhaustive space, later ones from a fixed pool of it) and every "
         f"DecomposeK split (median {d['choices_per_shape']['median']:.0f} choices a problem). See "
         "`data/collect/README.md`.", "",
         f"Rows by family: {', '.join(f'{k} {v:,}' for k, v in sorted(d['rows_by_family'].items()))}. "
         f"Best measured choice by family: {', '.join(f'{k} {v}' for k, v in sorted(d['best_measured_by_family'].items()))}"
         " — cuBLAS is the fastest measured choice on most shapes, which makes \"always pick cuBLAS\" a strong "
         "baseline for the top-1 metric.", "",
         f"**Split:** {sp['how']}; {sp['train_shapes']} training shapes, {sp['test_shapes']} held out "
         f"({', '.join(f'{v} {k}' for k, v in sorted(sp['test_by_group'].items()))}). Never by row. "
         f"Rankings are scored on problems with at least {sp.get('min_choices', 1)} measured choices: "
         f"{sp.get('held_out_problems_unscored', 0)} held-out problems ({sp.get('problems_unscored_all', 0)} of all) "
         "have fewer" + (" (partly measured) and are trained on, not scored. "
                         if sp.get('problems_unscored_all', 0) else ". ") +
         f"Cross-validation: {r['cv']['folds']} folds by shape (stratified the same way), every shape held out once.",
         "", f"**\"Best\" is the best of the measured sample** ({d['choices_per_shape']['min']}-"
         f"{d['choices_per_shape']['max']} choices a shape, drawn from spaces of thousands), not the result of an "
         "exhaustive search: a regret of 0% means the model found the fastest choice that was measured.", "",
         "Regret = time of the picked choice / best measured time - 1. Three views:", ""]
    for k, v in r["views"].items():
        L.append(f"- **{k}**: {v}")
    L += ["", "Models: `gbt` (gradient-boosted oblivious trees) and `mlp` (2x64 ReLU) correct the analytic "
          "estimate (`gemmtune.model.learned`), trained with near-best row weighting (the default); "
          "`, unweighted` = plain least squares (ablation); `analytic` = the roofline/occupancy model alone; "
          f"`random` = uniformly random ranking (mean of {held['random'].get('draws', '?')} seeded draws); "
          "`cuBLAS only` = always pick cuBLAS.", ""]

    # targets
    L += ["## Issue #5 targets on the held-out shapes", "",
          f"Targets: top-5 within {TARGET_TOP5_GEOMEAN:.0%} of the best (geomean over shapes); top-1 within 10% on "
          f"at least {TARGET_TOP1_WITHIN:.0%} of held-out shapes.", "",
          "| model | view | top-5 regret geomean | target | top-1 within 10% | target |", "|---|---|---|---|---|---|"]
    for name in ("gbt", "mlp", "analytic", "random"):
        for v in VIEWS:
            t = r["held_out_targets"][name][v]
            L.append(f"| {name} | {v} | {pct(t['top5_geomean'])} | {met(t['top5_met'])} | "
                     f"{pct(t['top1_within_10pct'])} | {met(t['top1_met'])} |")
    t_all = r["held_out_targets"][ship]["all"]
    t_an = r["held_out_targets"]["analytic"]["all"]
    analytic_aten_first = r["analytic_ranks_cublas_first"]
    t_cv = r["cv"]["targets"][ship]["all"]
    L += ["", f"**Shipped family ({ship}), all-choices view (the issue's definition):** top-5 target "
          f"{met(t_all['top5_met'])} ({pct(t_all['top5_geomean'])}), top-1 target {met(t_all['top1_met'])} "
          f"({pct(t_all['top1_within_10pct'])} of {held[ship]['shapes']} held-out problems within 10%) on the "
          f"held-out split; in {r['cv']['folds']}-fold cross-validation over all {d['shapes']} shapes: top-5 "
          f"{met(t_cv['top5_met'])} "
          f"({pct(t_cv['top5_geomean'])}), top-1 {met(t_cv['top1_met'])} ({pct(t_cv['top1_within_10pct'])}).", "",
          f"**Read with care: on this data the targets do not separate a model from a trivial baseline.** cuBLAS is "
          f"the fastest measured choice on {d['best_measured_by_family'].get('aten', 0)} of {d['problems']} problems, "
          f"so always picking cuBLAS puts the top-1 within 10% on {pct(held['cuBLAS only']['top1_within_10pct'])} of "
          f"the held-out shapes ({pct(cv['cuBLAS only']['top1_within_10pct'])} over all shapes; the target is "
          f"{TARGET_TOP1_WITHIN:.0%}), and the analytic model, which ranks cuBLAS first on "
          f"{pct(analytic_aten_first)} of held-out shapes, meets "
          f"{sum(bool(x) for x in (t_an['top1_met'], t_an['top5_met']))} of the 2 targets. "
          "What separates the models is the Triton-only view (the ranking among the Triton configurations, which "
          "is what the tuner's top-k actually picks from, cuBLAS being benchmarked anyway): there the learned "
          f"{ship} puts its top-1 within 10% of the best Triton choice on "
          f"{pct(held[ship]['rest_top1_within_10pct'])} of held-out shapes, the analytic model on "
          f"{pct(held['analytic']['rest_top1_within_10pct'])}, random ranking on "
          f"{pct(held['random']['rest_top1_within_10pct'])}.", "",
          "These are ranking targets over the measured sample. The issue's end-to-end targets (tuning wall time of "
          "k = 1, 5, 20 against the exhaustive search and Inductor on the same shapes, at % of the best kernel, "
          "and nvMatmulHeuristics at equal k) are measured on the GPU, not here: "
          "`benchmarks/results/2026-11-23-h200-topk-2/` (and the earlier `...-topk/`) and the public-suite bench "
          "(`benchmarks/results/2026-11-22-h200-bench-onecall/`).", ""]

    # held-out tables
    L += [f"## Held-out problems ({held[ship]['shapes']}, of {sp['test_shapes']} shapes)", ""]
    order = ["gbt", "mlp", "gbt, unweighted", "mlp, unweighted", "analytic", "random", "cuBLAS only"]
    for v in VIEWS:
        rows = [(n, held[n]) for n in order if n in held and not (n == "cuBLAS only" and v != "all")]
        L += [f"### View: {v}", "", *table(rows, v), ""]
    L += ["Spearman is the per-shape rank correlation between predicted and measured times over all measured "
          "choices, averaged over shapes. `cuBLAS only` has a top-1 only.", ""]
    if png is not None:
        L += [f"![top-1 regret CDF]({png.name})", ""]
    L += ["### By shape group (all-choices view)", "", "| model | group | shapes | Spearman | top-1 geomean | "
          "top-1 within 10% | top-5 geomean |", "|---|---|---|---|---|---|---|"]
    for name, gs in r["held_out_by_group"].items():
        for gname, s in gs.items():
            L.append(f"| {name} | {gname} | {s['shapes']} | {s['spearman_mean']:.3f} | "
                     f"{pct(s['top1_regret_geomean'])} | {pct(s['top1_within_10pct'])} | {pct(s['top5_regret_geomean'])} |")
    L += ["", f"## {r['cv']['folds']}-fold cross-validation by shape (all {d['shapes']} shapes)", "",
          "One 20% split holds out few shapes; here every shape is held out once (models retrained per fold). "
          "The near-best weighting and the defaults were chosen looking at these numbers, so they are not an "
          "untouched test either. Nor is the held-out split since 2026-11-22: the analytic model's split-K term "
          "for unaligned cuBLAS (`ATEN_UNALIGNED_SPLIT_K`) was added after seeing its errors on held-out splitk "
          "shapes, its constant read off all collected unaligned shapes (held-out ones included).", ""]
    order_cv = ["gbt", "mlp", "gbt, unweighted", "mlp, unweighted", "analytic", "random", "cuBLAS only"]
    for v in VIEWS:
        rows = [(n, cv[n]) for n in order_cv if n in cv and not (n == "cuBLAS only" and v != "all")]
        L += [f"### View: {v}", "", *table(rows, v), ""]
    L += [f"Family shipped: **{ship}** ({r['chosen_by']}).", ""]

    pub = r.get("public_suite")
    if pub:
        L += [f"## Unlike the training set: public suite, bf16 ({pub['problems']} shapes)", "",
              f"From `{pub['source']}` (same H200 and software; the tuner's default space, standard timer). These "
              "shapes were never trained on (the public suite is evaluation only), and most are unlike the "
              f"collected shapes ({coverage_note(d)}). The model trained on all "
              "collected shapes; the domain guard shrinks its correction towards the analytic estimate away from "
              "the training shapes. **Caveats:** the analytic model's constants were fitted to this very store, "
              "so it is in-sample for the analytic model; and the guard's rule for unaligned problems (nearest "
              "training problem of the same alignment, instead of a minimum count of unaligned training shapes) "
              "was revised after a first look at these results, which had shown the count rule throwing away a "
              "good ranking of the gpt2 lm-head shapes (N = 50257, unaligned, close to two collected ones).", ""]
        rows = list(pub["results"].items())
        for v in VIEWS:
            L += [f"### View: {v}", "", *table([(n, s) for n, s in rows if not (n == "cuBLAS only" and v != "all")], v), ""]
        gd = next(v for k, v in pub["results"].items() if k.endswith("with domain guard"))
        ng = next(v for k, v in pub["results"].items() if k.endswith("no domain guard"))
        full_w = sum(1 for w, _ in pub["trust"].values() if w >= 1.0)
        none_w = sum(1 for w, _ in pub["trust"].values() if w <= 0.0)
        L += [f"Domain guard on these shapes: full learned correction on {full_w}, none on {none_w}, partial on "
              f"{len(pub['trust']) - full_w - none_w} (per shape in the JSON). With and without the guard: "
              f"all-choices top-1 regret geomean {pct(gd['top1_regret_geomean'])} vs {pct(ng['top1_regret_geomean'])}, "
              f"Triton-only top-1 {pct(gd['rest_top1_regret_geomean'])} vs {pct(ng['rest_top1_regret_geomean'])}, "
              f"Triton-only top-5 {pct(gd['rest_top5_regret_geomean'])} vs {pct(ng['rest_top5_regret_geomean'])}. "
              "Only the shapes it does not fully trust differ, a handful, so this is thin evidence either way; the "
              "guard stays on as the conservative default until the shape groups it guards against are collected.",
              ""]

    L += ["## Training and prediction time", "",
          f"On this machine ({r['machine']['cpus']} CPU cores, {r['machine']['processor']}, Python "
          f"{r['machine']['python']}, numpy {r['machine']['numpy']}); target: training < 2 min, prediction of "
          "2,000 choices < 10 ms.", "", "| model | train (training split) |", "|---|---|"]
    for n, s in r["train_s"].items():
        L.append(f"| {n} | {s:.1f} s |")
    L += ["", f"Training the shipped {ship} on all {d['shapes']} shapes: {r['train_all_s']:.1f} s.", "",
          "| shape | choices | model | best | median | learned correction weight |", "|---|---|---|---|---|---|"]
    for shape, row in r["predict_2000"].items():
        for n, t in row.items():
            if n == "choices":
                continue
            L.append(f"| {shape} bf16 | {row['choices']} | {n} | {t['best_ms']:.2f} ms | {t['median_ms']:.2f} ms | "
                     f"{t.get('trust', '-')} |")
    L += ["", "Prediction includes building the feature matrix (and the analytic estimate it contains).", ""]

    nv = r.get("nvmmh_in_sample")
    L += ["## nvMatmulHeuristics (CPU-only indication)", ""]
    if nv and "error" not in nv:
        L += [f"Of nvMatmulHeuristics' top-5 configurations for the {nv['shapes']} held-out shapes, mapped to our "
              f"Triton choices (`gemmtune.benchmark.nvmmh_choices`), {nv['in_sample']} of {nv['configs']} appear "
              f"among the measured samples ({nv['shapes_with_any']} shapes; its top-1 in {nv['top1_in_sample']}). "
              f"{nv['more_than_5_stages']} of its {nv['configs']} configurations use more than 5 pipeline stages, "
              "which our exhaustive spaces (and so the samples) never hold, and the samples are small: no regret "
              "comparison is possible from this data. Measuring its top-k through our kernels needs a GPU session "
              "(`gemmtune bench` does it).", ""]
    else:
        L += [f"Not available: {nv.get('error') if nv else 'skipped'}.", ""]

    trained_dtypes = ", ".join(f"{k} ({v} problems)" for k, v in sorted(d.get("dtypes", {}).items()))
    L += ["## Not in this report", "",
          "- Tuning wall time with the model's top k = 1, 5, 20 against the exhaustive search and Inductor "
          "max-autotune, and nvMatmulHeuristics' top-k run through our kernels: GPU measurements, in "
          "`benchmarks/results/` (see the line above the held-out tables).",
          f"- Dtypes: trained on {trained_dtypes}; any other dtype (such as fp32 with "
          "TF32 allowed) has no training data, and the shipped model ranks it with the analytic model (domain "
          "guard).",
          f"- Collection coverage: {coverage_note(d)}; the public-suite check above is the only look at the "
          "rest.", ""]
    shipped = r.get("shipped")
    if shipped:
        L += ["## Shipped model", "",
              f"`{shipped['path']}`: {shipped['family']}, trained on all {d['shapes']} collected shapes after this "
              f"evaluation (the held-out numbers above come from the same settings trained on the training split), "
              f"{shipped['bytes'] / 1024:.0f} KiB. `gemmtune.model.default_model` and `tune(model=None)` use it on "
              f"an {ctx['device_name']} with triton {'.'.join(ctx['triton_version'].split('.')[:2])}.x; on any other "
              "GPU or triton they warn and rank with the analytic model.", ""]
    return "\n".join(L)


if __name__ == "__main__":
    sys.exit(main())
