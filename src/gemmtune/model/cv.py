"""Cross-validation by shape and shipping a model (``gemmtune train --cv K --ship PATH [--report DIR]``).

``cross_validate`` holds every shape out once: the shapes are dealt into ``k`` folds, group by
group (the collection plan's shape groups: llm, decode, splitk, odd, square, random), and each
learned kind is trained on the other folds and scored on the held-out one, beside the analytic
model. Less noisy than one 20% split. ``choose_kind`` takes the kind with the lower geomean
top-1 regret (then the higher Spearman); ``ship`` trains it on every shape and writes it with
its cross-validation in the provenance (so none of its own shapes is held out from the shipped
model, and the file says so). Besides the summaries over every scored problem, ``families`` holds
one per kernel family: the ranking within that family's choices of each problem, and how often
the family holds the problem's best measured choice (``best_is``) and the model's first
(``top1_is``). ``write_report`` writes them as README.md and cv.json.

>>> folds = folds_by_group({(1, 1, 1), (2, 2, 2), (3, 3, 3), (4, 4, 4)}, {}, 2, seed=0)
>>> sorted(len(f) for f in folds), set().union(*folds) == {(1, 1, 1), (2, 2, 2), (3, 3, 3), (4, 4, 4)}
([2, 2], True)
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from .analytic import AnalyticModel
from .data import Dataset, timed_as
from .errors import ModelError
from .learned import MIN_RANKED_CHOICES, LearnedModel
from .training import _device_for, fit
from .metrics import _predict_ms, shape_metrics, summarize

DEFAULT_KINDS = ("gbt", "mlp")


def shape_groups() -> dict[tuple[int, int, int], str]:
    """(M, N, K) -> its group in the collection plan (gemmtune.collect.shapes)."""
    from ..collect.shapes import shape_plan

    return {(m, n, k): g for g, _, m, n, k, _ in shape_plan()}


def folds_by_group(shapes, groups: dict, k: int, seed: int = 0) -> list[set]:
    """``shapes`` dealt into ``k`` folds, each group's shapes in a seeded order, the deal going
    on from group to group, so that every fold holds about 1/k of every group."""
    if k < 2:
        raise ModelError(f"cross-validation needs at least 2 folds, got {k}")
    rng = np.random.default_rng(seed)
    by = defaultdict(list)
    for s in sorted(shapes):
        by[groups.get(s, "?")].append(s)
    folds: list[set] = [set() for _ in range(k)]
    off = 0
    for name in sorted(by):
        ss = by[name]
        for i, j in enumerate(rng.permutation(len(ss))):
            folds[(i + off) % k].add(ss[j])
        off += len(ss)
    return folds


def _baseline(g) -> np.ndarray:
    return np.array([c.family == "aten" and not c.pad for c in g.choices])


def score(model, data: Dataset) -> list[dict]:
    """Per-problem ranking metrics of ``model`` on ``data`` (model.metrics.shape_metrics), with the
    family of the best measured choice and of the model's first, and ``families``: the metrics of
    the model's ranking within each family that has at least two choices in the problem."""
    out = []
    for g in data.groups:
        with timed_as(g):  # featurized for the arithmetic that timed it (data.timed_as)
            pred = np.asarray(_predict_ms(model, g.problem, g.choices), dtype=np.float64)
        m = shape_metrics(pred, g.times_ms, baseline=_baseline(g))
        m["key"] = g.problem.key
        fams = np.array([c.family for c in g.choices])
        m["best_family"] = str(fams[int(np.argmin(g.times_ms))])
        m["top1_family"] = str(fams[int(np.argsort(np.where(np.isfinite(pred), pred, np.inf), kind="stable")[0])])
        m["families"] = {str(f): shape_metrics(pred[fams == f], g.times_ms[fams == f])
                         for f in np.unique(fams) if (fams == f).sum() >= 2}
        out.append(m)
    return out


def family_summaries(per: list[dict]) -> dict:
    """family -> ``summarize`` of the within-family metrics of ``score``'s problems, plus
    ``best_is`` / ``top1_is``: on how many problems the best measured choice / the model's first
    is of that family."""
    fams = sorted({f for m in per for f in m.get("families", {})} | {m["best_family"] for m in per if "best_family" in m})
    out = {}
    for f in fams:
        s = summarize([m["families"][f] for m in per if f in m.get("families", {})])
        s["best_is"] = sum(m.get("best_family") == f for m in per)
        s["top1_is"] = sum(m.get("top1_family") == f for m in per)
        out[f] = s
    return out


def cross_validate(data: Dataset, *, kinds=DEFAULT_KINDS, folds: int = 5, seed: int = 0, groups: dict | None = None,
                   min_choices: int = MIN_RANKED_CHOICES, weighting: str = "near_best", device=None,
                   say=lambda msg: None) -> dict:
    """k-fold cross-validation by shape: {"folds", "kinds", "summaries": kind -> summary (and
    'analytic'), "families": kind -> family -> summary (``family_summaries``), "fit_s": kind ->
    seconds of training over the folds, "shapes", "problems", "rows", "scored"}.
    Rankings are scored on problems with at least ``min_choices`` measured choices (every
    problem is trained on)."""
    if len(data.shapes) < folds:
        raise ModelError(f"{len(data.shapes)} shapes cannot fill {folds} folds")
    dev = _device_for(data, device)
    analytic = AnalyticModel(dev)
    per: dict[str, list] = defaultdict(list)
    fit_s: dict[str, float] = defaultdict(float)
    for i, fold in enumerate(folds_by_group(data.shapes, groups or {}, folds, seed)):
        train_d = data.subset(data.shapes - fold)
        test_d = data.subset(fold).native().ranked(min_choices)  # pooled problems train, never score
        for kind in kinds:
            t0 = time.perf_counter()
            model, _ = fit(train_d, kind=kind, seed=seed, weighting=weighting, device=dev)
            fit_s[kind] += time.perf_counter() - t0
            per[kind] += score(model, test_d)
        per["analytic"] += score(analytic, test_d)
        say(f"cross-validation fold {i + 1}/{folds} done")
    return {"folds": folds, "seed": seed, "kinds": list(kinds), "shapes": len(data.shapes),
            "problems": len(data.groups), "rows": data.rows,
            "scored": len(per["analytic"]), "min_choices": min_choices, "weighting": weighting,
            "summaries": {name: summarize(p) for name, p in per.items()},
            "families": {name: family_summaries(p) for name, p in per.items()}, "fit_s": dict(fit_s)}


def choose_kind(cv: dict) -> str:
    """The learned kind of ``cv`` with the lower geomean top-1 regret (ties: higher Spearman).

    >>> choose_kind({"kinds": ["gbt", "mlp"], "summaries": {
    ...     "gbt": {"top1_regret_geomean": 0.02, "spearman_mean": 0.8},
    ...     "mlp": {"top1_regret_geomean": 0.03, "spearman_mean": 0.9}}})
    'gbt'
    """
    s = cv["summaries"]
    return min(cv["kinds"], key=lambda k: (s[k].get("top1_regret_geomean", np.inf), -s[k].get("spearman_mean", 0.0)))


def ship(data: Dataset, kind: str, path: str | os.PathLike, *, cv: dict | None = None, seed: int = 0,
         weighting: str = "near_best", device=None, description: dict | None = None) -> tuple[LearnedModel, dict]:
    """Train ``kind`` on every shape of ``data`` and write it to ``path``; its provenance holds
    ``cv`` (that kind's and the analytic model's cross-validated summaries) and notes that
    the file itself was trained on all the shapes. Returns (model, {"path", "bytes", "fit_s"})."""
    t0 = time.perf_counter()
    model, _ = fit(data, kind=kind, seed=seed, weighting=weighting, device=device, description=description)
    fit_s = time.perf_counter() - t0
    model.provenance["training_set"]["which"] = f"all {len(data.shapes)} shapes of the data (after the evaluation)"
    if cv is not None:
        model.provenance["evaluation"] = {
            "how": f"{cv['folds']}-fold cross-validation by shape, seed {cv['seed']}, the same kind and settings "
                   "trained on the other folds; this file was then trained on all the shapes, so none of them is "
                   "held out from it",
            "cv": cv["summaries"][kind], "cv_analytic": cv["summaries"].get("analytic"),
            "kinds_compared": cv["kinds"]}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save(path)
    return model, {"path": str(path), "bytes": path.stat().st_size, "fit_s": fit_s, "kind": kind}


def _pct(x) -> str:
    return "-" if x is None or x != x else f"{100 * x:.1f}%"


def write_report(res: dict, folder: str | os.PathLike, *, command: str = "", data: Dataset | None = None,
                 shipped: dict | None = None) -> Path:
    """README.md (tables) and cv.json (everything) of ``cross_validate``'s ``res`` in ``folder``;
    returns the README. ``shipped``: ``ship``'s info when a model was written."""
    import platform

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    doc = dict(res, date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), command=command,
               machine={"cores": os.cpu_count(), "python": platform.python_version()},
               data={"source": data.source, "context": data.context} if data is not None else None,
               shipped=shipped)
    (folder / "cv.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    names = [*res["kinds"], "analytic"]
    lines = [f"# {res['folds']}-fold cross-validation by shape ({doc['date']})", ""]
    if command:
        lines += [f"Reproduce: `{command}`", ""]
    src = f"`{data.source}` ({data.context.get('device_name')}, triton {data.context.get('triton_version')}): " \
        if data is not None else ""
    lines += [f"Data: {src}{res.get('rows', '?')} rows, {res.get('problems', '?')} problems, {res['shapes']} shapes; "
              f"every shape held out once (folds dealt per collection-plan shape group, seed {res['seed']}); "
              f"{res['scored']} problems with >= {res.get('min_choices', '?')} measured choices scored. "
              f"Machine: {doc['machine']['cores']} cores.", "",
              "| model | top-1 within 10% | top-1 regret (geomean) | top-5 regret (geomean) | top-5 within 10% | "
              "tuner top-1 within 10% (+cuBLAS) | Triton-only top-1 within 10% | Spearman (mean) | train s (all folds) |",
              "|---|" + "---:|" * 8]
    for name in names:
        h = res["summaries"][name]
        fit = res["fit_s"].get(name)
        lines.append(f"| {name} | {_pct(h.get('top1_within_10pct'))} | {_pct(h.get('top1_regret_geomean'))} | "
                     f"{_pct(h.get('top5_regret_geomean'))} | {_pct(h.get('top5_within_10pct'))} | "
                     f"{_pct(h.get('tuner_top1_within_10pct'))} | {_pct(h.get('rest_top1_within_10pct'))} | "
                     f"{h.get('spearman_mean', float('nan')):.3f} | {'-' if fit is None else f'{fit:.1f}'} |")
    lines += ["", "## Per family", "",
              "Within each family: the model's ranking of that family's choices of a problem (problems with two "
              "or more of them). best is / top-1 is: on how many scored problems the best measured choice / "
              "the model's first choice is of that family.", "",
              "| model | family | problems | top-1 within 10% | top-1 regret (geomean) | top-5 regret (geomean) | "
              "Spearman (mean) | best is | top-1 is |", "|---|---|" + "---:|" * 7]
    for name in names:
        for fam, h in res.get("families", {}).get(name, {}).items():
            sp = h.get("spearman_mean", float("nan"))
            lines.append(f"| {name} | {fam} | {h.get('shapes', 0)} | {_pct(h.get('top1_within_10pct'))} | "
                         f"{_pct(h.get('top1_regret_geomean'))} | {_pct(h.get('top5_regret_geomean'))} | "
                         f"{'-' if sp != sp else f'{sp:.3f}'} | {h['best_is']} | {h['top1_is']} |")
    if shipped:
        lines += ["", f"Shipped: `{shipped['path']}` ({shipped['kind']}, trained on all {res['shapes']} shapes in "
                  f"{shipped['fit_s']:.1f} s, {shipped['bytes'] / 1024:.0f} KiB)."]
    path = folder / "README.md"
    path.write_text("\n".join(lines) + "\n")
    return path


# Families a problem may measure that only some problems have: the study also reports the
# problems that hold each (the families the tuner's --fast misses most on the public suite).
RARE_FAMILIES = ("skinny", "persistent_tma", "triton_static")


def policy_study(data: Dataset, *, kind: str = "lgbm_rank", folds: int = 5, seed: int = 0, groups: dict | None = None,
                 ks=(1, 2, 3, 5), diverse=(2, 3), min_choices: int = MIN_RANKED_CHOICES, device=None,
                 others: dict | None = None, say=lambda msg: None) -> dict:
    """The tuner's selection policies (``topk.study_rows``: fixed top k, adaptive, family-diverse)
    replayed on every shape held out once: per fold, ``kind`` is trained on the other folds and
    each held-out problem with at least ``min_choices`` measured choices is scored with it.
    ``others``: name -> Dataset measured elsewhere (a public-suite store), each replayed with
    ``kind`` trained on every shape of ``data`` but its own (summary "store:NAME").
    Returns {"rows": per-problem rows (with their ``group``), "summaries": {"all", "group:NAME",
    "has:FAMILY", "store:NAME"} -> ``topk.summarize_policies``, and the settings}."""
    from .topk import study_rows, summarize_policies

    if len(data.shapes) < folds:
        raise ModelError(f"{len(data.shapes)} shapes cannot fill {folds} folds")
    dev = _device_for(data, device)
    groups = groups or {}
    rows: list[dict] = []
    fit_s = 0.0
    for i, fold in enumerate(folds_by_group(data.shapes, groups, folds, seed)):
        t0 = time.perf_counter()
        model, _ = fit(data.subset(data.shapes - fold), kind=kind, seed=seed, device=dev)
        fit_s += time.perf_counter() - t0
        for r in study_rows(model, data.subset(fold).native().ranked(min_choices), ks, diverse=diverse):
            r["group"] = groups.get(r["shape"], "?")
            r["fold"] = i
            rows.append(r)
        say(f"policy study fold {i + 1}/{folds} done")
    subsets = {"all": rows}
    for name in sorted({r["group"] for r in rows}):
        subsets[f"group:{name}"] = [r for r in rows if r["group"] == name]
    for fam in RARE_FAMILIES:
        subsets[f"has:{fam}"] = [r for r in rows if fam in r["families"]]
    for name, other in (others or {}).items():
        model, _ = fit(data.subset(data.shapes - other.shapes), kind=kind, seed=seed, device=dev)
        subsets[f"store:{name}"] = study_rows(model, other.ranked(min_choices), ks, diverse=diverse)
        say(f"policy study on {name} done")
    return {"kind": kind, "folds": folds, "seed": seed, "ks": list(ks), "diverse": list(diverse),
            "min_choices": min_choices, "shapes": len(data.shapes), "problems": len(data.groups), "rows": rows,
            "fit_s": fit_s, "summaries": {k: summarize_policies(v) for k, v in subsets.items() if v}}


def write_policy_report(res: dict, folder: str | os.PathLike, *, command: str = "", data: Dataset | None = None) -> Path:
    """README.md (one table per subset of problems) and policies.json (everything) of
    ``policy_study``'s ``res`` in ``folder``; returns the README."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rows = [dict(r, policies={k: [round(f, 5), n] for k, (f, n) in r["policies"].items()}) for r in res["rows"]]
    doc = dict(res, rows=rows, date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), command=command,
               machine={"cores": os.cpu_count()},
               data={"source": data.source, "context": data.context} if data is not None else None)
    # one line per problem row: the 865 rows of the 2026-11-25 study took 0.78 MB indented, 0.46 MB so
    (folder / "policies.json").write_text(json.dumps(doc, sort_keys=True, separators=(",", ":"), default=list)
                                          .replace(',{"best_family"', ',\n{"best_family"') + "\n")
    src = f"`{data.source}` ({data.context.get('device_name')}, triton {data.context.get('triton_version')}), " \
        if data is not None else ""
    lines = [f"# Selection policies replayed, {res['folds']}-fold cross-validation by shape ({doc['date']})", ""]
    if command:
        lines += [f"Reproduce: `{command}`", ""]
    lines += [f"Data: {src}{res['problems']} problems, {res['shapes']} shapes; model {res['kind']} trained on the "
              f"other folds (seed {res['seed']}, {res['fit_s']:.0f} s of training in all); "
              f"{len(res['rows'])} held-out problems with >= {res['min_choices']} measured choices scored.", "",
              "best fraction = best measured time of the problem / best measured time among what the policy "
              "benchmarks (cuBLAS always, plus its picks). candidates: benchmarked per problem, cuBLAS included. "
              "k=K: the model's K best; adaptive: choose_k; diverse=K: each family's first by the model, the K best "
              "of those (pad+ a family of its own; ',nopad': not).", ""]
    losses = [r for r in res["rows"] if r["policies"]["k=1"][0] < 0.97 - 1e-12]
    same = sum(r["top1_family"] == r["best_family"] for r in losses)
    lines += [f"Of the {len(losses)} problems where k=1 reaches less than 97% of the best, the model's first "
              f"choice is of the best measured choice's family (pad+ a family of its own) on {same}: there a "
              "wrong config, not a wrong family, loses.", ""]
    for sub, summ in res["summaries"].items():
        lines += [f"## {sub} ({next(iter(summ.values()))['problems']} problems)", "",
                  "| policy | best fraction geomean | mean | p10 | min | >= 97% | >= 90% | candidates / problem |",
                  "|---|" + "---:|" * 7]
        for name, t in summ.items():
            lines.append(f"| {name} | {_pct(t['best_fraction_geomean'])} | {_pct(t['best_fraction_mean'])} | "
                         f"{_pct(t['best_fraction_p10'])} | {_pct(t['best_fraction_min'])} | "
                         f"{_pct(t['at_least_97pct'])} | {_pct(t['at_least_90pct'])} | {t['candidates_mean']:.2f} |")
        lines.append("")
    path = folder / "README.md"
    path.write_text("\n".join(lines))
    return path
