"""Model kinds side by side on one held-out split by shape (``gemmtune train --compare DIR``).

Every kind is trained on the same training shapes and scored on the same held-out
problems (those with at least MIN_RANKED_CHOICES measured choices): top-1 within 10%,
top-5 regret, Spearman, training time, and the tuner's top-k replayed with fixed and
adaptive k (``topk.study``). ``write_report`` writes README.md and results.json.

Example::

    >>> res = compare("data/collect/collect.sqlite.gz", kinds=("gbt", "lgbm_rank"))   # doctest: +SKIP
    >>> write_report(res, "benchmarks/results/2026-11-24-ranker")                      # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

from ..device import DeviceInfo
from .analytic import AnalyticModel
from .data import exclude, load_dataset, split_by_shape, suite_shapes
from .errors import ModelError
from .training import fit
from .metrics import evaluate
from .topk import K_MAX, K_MIN, TIE, study

HEADLINE = ("top1_within_10pct", "top1_regret_geomean", "top5_regret_geomean", "top5_within_10pct",
            "tuner_top1_within_10pct", "rest_top1_within_10pct", "spearman_mean")


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def compare(path: str | os.PathLike, *, kinds=("gbt", "lgbm_rank"), seed: int = 0, test_fraction: float = 0.2,
            exclude_suites=("public",), ks=(1, 3, 5), k_min: int = K_MIN, k_max: int = K_MAX,
            tie: float = TIE) -> dict:
    """Train each of ``kinds`` on one split by shape of ``path``'s data and score it (and the
    analytic model) on the held-out problems; returns the results as a JSON-able dict."""
    data = load_dataset(path)
    excluded: set = set()
    for s in exclude_suites or ():
        excluded |= suite_shapes(s)
    data, n_excl = exclude(data, excluded)
    tr, te_all = split_by_shape(data, test_fraction, seed)
    te = te_all.ranked()
    if not te.groups:
        raise ModelError(f"{path}: no held-out problem has enough measured choices to score a ranking")
    dev = DeviceInfo.lookup(data.context["device_name"])
    models = {"analytic": (AnalyticModel(dev), 0.0)}
    for kind in kinds:
        t0 = time.perf_counter()
        model, _ = fit(tr, kind=kind, seed=seed)
        models[kind] = (model, time.perf_counter() - t0)
    res: dict = {"models": {}}
    for name, (model, fit_s) in models.items():
        ev = evaluate(model, te)
        t0 = time.perf_counter()
        g = max(te.groups, key=lambda g: len(g.choices))
        for _ in range(5):
            model.predict(g.problem, g.choices)
        res["models"][name] = {"fit_s": round(fit_s, 2), "rank_ms": round((time.perf_counter() - t0) / 5 * 1e3, 2),
                               "rank_ms_choices": len(g.choices), "held_out": ev["summary"],
                               "topk": study(model, te, ks, k_min, k_max, tie)}
    import numpy
    import triton
    import torch
    versions = {"numpy": numpy.__version__, "torch": torch.__version__, "triton": triton.__version__,
                "python": platform.python_version()}
    try:
        import lightgbm
        versions["lightgbm"] = lightgbm.__version__
    except ImportError:
        pass
    from .. import __version__
    versions["gemmtune"] = __version__
    res.update({
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": f"gemmtune train --store {path} --compare DIR --kinds {','.join(kinds)} --seed {seed} "
                   f"--test-fraction {test_fraction}",
        "data": {"source": str(path), "context": data.context, "rows": data.rows, "problems": len(data.groups),
                 "shapes": len(data.shapes), "excluded_suites": list(exclude_suites or ()),
                 "excluded_problems": n_excl},
        "split": {"by": "(M, N, K)", "seed": seed, "test_fraction": test_fraction,
                  "train_problems": len(tr.groups), "train_shapes": len(tr.shapes),
                  "test_shapes": len(te_all.shapes), "test_problems_scored": len(te.groups),
                  "test_problems_too_few_choices": len(te_all.groups) - len(te.groups)},
        "machine": {"cpu": _cpu(), "cores": os.cpu_count()}, "versions": versions,
    })
    return res


def _pct(x) -> str:
    return f"{100 * x:.1f}%"


def write_report(res: dict, folder: str | os.PathLike) -> Path:
    """README.md (tables) and results.json (everything) in ``folder``; returns the README."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    sp, d = res["split"], res["data"]
    lines = [f"# Ranking models compared on one held-out split ({res['date']})", "",
             f"Reproduce: `{res['command']}`", "",
             f"Data: `{d['source']}` ({d['context'].get('device_name')}, triton "
             f"{d['context'].get('triton_version')}): {d['rows']} ok rows, {d['problems']} problems, {d['shapes']} "
             f"shapes ({d['excluded_problems']} problems of {', '.join(d['excluded_suites']) or 'no suite'} left out). "
             f"Split by (M, N, K), seed {sp['seed']}, {_pct(sp['test_fraction'])} of shapes held out: "
             f"trained on {sp['train_problems']} problems ({sp['train_shapes']} shapes), scored on "
             f"{sp['test_problems_scored']} held-out problems with >= 20 measured choices "
             f"({sp['test_problems_too_few_choices']} with fewer left out).", "",
             f"Machine: {res['machine']['cpu']}, {res['machine']['cores']} cores. Versions: "
             + ", ".join(f"{k} {v}" for k, v in sorted(res["versions"].items())) + ".", "",
             "## Ranking quality (held-out problems)", "",
             "| model | top-1 within 10% | top-1 regret (geomean) | top-5 regret (geomean) | top-5 within 10% | "
             "tuner top-1 within 10% (+cuBLAS) | Triton-only top-1 within 10% | Spearman (mean) | train s | "
             "rank ms |", "|---|" + "---:|" * 9]
    for name, m in res["models"].items():
        h = m["held_out"]
        lines.append(f"| {name} | {_pct(h['top1_within_10pct'])} | {_pct(h['top1_regret_geomean'])} | "
                     f"{_pct(h['top5_regret_geomean'])} | {_pct(h['top5_within_10pct'])} | "
                     f"{_pct(h['tuner_top1_within_10pct'])} | {_pct(h['rest_top1_within_10pct'])} | "
                     f"{h['spearman_mean']:.3f} | {m['fit_s']:.1f} | {m['rank_ms']:.1f} |")
    lines += ["", f"rank ms: one `predict` of the held-out problem with the most choices "
              f"({next(iter(res['models'].values()))['rank_ms_choices']}), mean of 5.", "",
              "## Top-k replayed (cuBLAS always benchmarked, plus the model's k best others)", "",
              "best fraction = time of the best measured choice / time of the best benchmarked one.", "",
              "| model | policy | best fraction mean | geomean | p10 | min | problems >= 97% | candidates "
              "(total) | per problem |", "|---|---|" + "---:|" * 7]
    for name, m in res["models"].items():
        for pol, t in m["topk"].items():
            lines.append(f"| {name} | {pol} | {_pct(t['best_fraction_mean'])} | {_pct(t['best_fraction_geomean'])} | "
                         f"{_pct(t['best_fraction_p10'])} | {_pct(t['best_fraction_min'])} | "
                         f"{_pct(t['at_least_97pct'])} | {t['candidates']} | {t['candidates_mean']:.2f} |")
    for name, m in res["models"].items():
        ad = m["topk"].get("adaptive", {})
        if ad:
            lines.append(f"\n{name} adaptive: settings {ad['settings']}, k histogram {ad['k_histogram']}, "
                         f"reasons {ad['reasons']}.")
    path = folder / "README.md"
    path.write_text("\n".join(lines) + "\n")
    return path
