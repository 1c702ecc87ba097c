"""Per-problem summary of a results store: ``gemmtune report --store STORE.sqlite [--json OUT]``.

For every problem the store holds (per run context: GPU, versions): the fastest verified
choice and its time, cuBLAS's time and the speedup over it, the best choice of every family,
how many candidates were measured and how many failed, by status.

``run_summary`` is a tuning run's summary file (``tune-summary.json``, which ``gemmtune report
--tune-run DIR`` renders): per problem of the store, its suite group and name, the best choice,
cuBLAS, spreads, eager times, each family's best and the run's tuning time per shape
(``gemmtune report --store STORE --run-summary OUT.json --tune-json RUN.json``).

Example::

    >>> from gemmtune.report.store import summarize, markdown
    >>> rows = summarize("gemmtune.sqlite")                  # doctest: +SKIP
    >>> print(markdown(rows))                                # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import math
import os
from collections import Counter, defaultdict
from pathlib import Path

from ..store import GZIP_ERRORS, ResultStore, opened_readonly


@contextlib.contextmanager
def opened(store: str | os.PathLike | ResultStore):
    """``store`` opened read-only (a summary writes nothing), closed after; a ``.gz`` one (what
    collect ships: data/collect/collect.sqlite.gz) through a temporary copy, as ``train --store``
    reads it (report said 'not a SQLite database'). An open ResultStore as it is."""
    if isinstance(store, ResultStore):
        yield store
        return
    with contextlib.ExitStack() as stack:
        try:
            st = stack.enter_context(opened_readonly(store))
        except GZIP_ERRORS as e:
            # A truncated or corrupt .gz: an EOFError traceback before (neither ValueError nor OSError).
            raise ValueError(f"cannot read {Path(store)}: {e} (a truncated or corrupt gzip file)") from None
        yield st


def summarize(store: str | os.PathLike | ResultStore) -> list[dict]:
    """One dict per (run context, problem): key, device, best, best_ms, aten_ms, speedup,
    per-family best ``{family: (choice, ms)}``, measured, failed, statuses."""
    with opened(store) as db:
        by: dict[tuple, list] = defaultdict(list)
        devices, labels = {}, {}
        for ctx, row in db.rows():
            k = (ctx, row.problem_key)
            by[k].append(row)
            devices[k] = ctx.device_name
            labels[k] = (f"{ctx.device_name} (capability {ctx.capability}, torch {ctx.torch_version}, "
                         f"triton {ctx.triton_version}, gemmtune {ctx.gemmtune_version})")
    out = []
    for k, rows in sorted(by.items(), key=lambda kv: kv[0][1]):
        ok = [r for r in rows if r.status == "ok" and r.device_ms is not None and math.isfinite(r.device_ms)]
        best = min(ok, key=lambda r: r.device_ms) if ok else None
        aten = next((r for r in ok if r.choice_id == "aten"), None)
        fams: dict[str, tuple[str, float]] = {}
        for r in ok:
            fam = r.choice_id.removeprefix("pad+").split(":")[0]
            if fam not in fams or r.device_ms < fams[fam][1]:
                fams[fam] = (r.choice_id, r.device_ms)
        statuses = Counter(str(r.status) for r in rows)
        out.append({
            "key": k[1], "device": devices[k], "context": labels[k],
            "best": None if best is None else best.choice_id,
            "best_ms": None if best is None else best.device_ms,
            "aten_ms": None if aten is None else aten.device_ms,
            # (a time of 0 ms, which the store accepts, has no speedup: it divided by zero)
            "speedup": (aten.device_ms / best.device_ms) if best is not None and aten is not None
            and best.device_ms > 0 and aten.device_ms > 0 else None,
            "families": fams, "measured": len(rows), "failed": len(rows) - statuses.get("ok", 0),
            "statuses": dict(statuses),
        })
    return out


def _us(ms) -> str:
    return "-" if ms is None else f"{ms * 1e3:.2f}"


def markdown(rows: list[dict]) -> str:
    """The summary as a Markdown table, with the geomean speedup over cuBLAS at the end. A store of
    several run contexts (GPUs, or torch / triton / gemmtune versions) gets a column naming each
    row's, and a geomean per context: its problems were listed twice, alike, and one geomean mixed
    the GPUs' speedups."""
    contexts = list(dict.fromkeys(r.get("context") for r in rows))
    several = len(contexts) > 1
    head = "| problem | best | best µs | cuBLAS µs | speedup | measured | failed |"
    lines = [head + (" run context |" if several else ""), "|---|---|---|---|---|---|---|" + ("---|" if several else "")]
    for r in rows:
        sp = "-" if r["speedup"] is None else f"{r['speedup']:.2f}×"
        lines.append(f"| `{r['key']}` | `{r['best'] or '-'}` | {_us(r['best_ms'])} | {_us(r['aten_ms'])} | {sp} | "
                     f"{r['measured']} | {r['failed']} |" + (f" {r['context']} |" if several else ""))
    lines_end = []
    for ctx in contexts:
        mine = [r for r in rows if r.get("context") == ctx] if several else rows
        sps = [r["speedup"] for r in mine if r["speedup"]]
        if sps:
            g = math.exp(sum(math.log(s) for s in sps) / len(sps))
            where = f" on {ctx}" if several else ""
            lines_end.append(f"{len(mine)} problems{where}; geomean speedup of the best over cuBLAS: {g:.2f}× "
                             f"({len(sps)} with both).")
    if lines_end:
        lines += [""] + lines_end
    return "\n".join(lines) + "\n"


def run_summary(store: str | os.PathLike, tune_json: str | os.PathLike | None = None,
                suite: str = "public") -> dict:
    """{"context", "rows"}: one row per problem key of ``store`` (a store of one run context; more
    are refused, as their times do not pair), named by
    ``suite`` (a preset or a suite CSV; '?' and the key where it has no such shape), in the
    suite's order; ``tune_s`` from the tune run's ``--summary`` JSON ``tune_json``."""
    import json

    from ..shapes import load_suite

    tune_s = {}
    if tune_json is not None:
        with open(tune_json) as f:
            tune_s = {r["key"]: r["tune_s"] for r in json.load(f)["shapes"]}
    # A file by that name, else a preset (load_suite, as tune's and bench's --suite): by the .csv
    # suffix, a suite.CSV or shapes.txt was "unknown preset".
    shapes = load_suite(suite)
    names = {s.problem.key: (s.group, s.name) for s in shapes}
    by: dict[str, list] = defaultdict(list)
    contexts = []
    with opened(store) as st:
        for ctx, r in st.rows():
            by[r.problem_key].append(r)
            if ctx not in contexts:
                contexts.append(ctx)
    if len(contexts) > 1:
        # One run's summary: rows of two GPUs or versions would pair one's best with the other's cuBLAS.
        names = "; ".join(f"{c.device_name}, torch {c.torch_version}, triton {c.triton_version}" for c in contexts)
        raise ValueError(f"{store} holds {len(contexts)} run contexts ({names}); a run summary is one run's: "
                         "give a store of one run (gemmtune report --store without --run-summary summarizes "
                         "each context apart)")
    ctx0 = contexts[0] if contexts else None
    rows = []
    for key, rs in by.items():
        ok = [r for r in rs if r.status == "ok" and r.device_ms and math.isfinite(r.device_ms)]
        best = min(ok, key=lambda r: r.device_ms) if ok else None
        # cuBLAS's time among the finite ones, as summarize takes it: an ok row of inf ms (the store
        # keeps inf) went into the JSON as Infinity, which strict readers refuse.
        aten = next((r for r in ok if r.choice_id == "aten"), None)
        fam_best: dict = {}
        for r in ok:
            if r.family not in fam_best or r.device_ms < fam_best[r.family].device_ms:
                fam_best[r.family] = r
        g, n = names.get(key, ("?", key))
        rows.append({"group": g, "name": n, "key": key, "candidates": len(rs),
                     "statuses": dict(Counter(r.status for r in rs)),
                     "best": best.choice_id if best else None, "best_ms": best.device_ms if best else None,
                     "best_spread": best.spread if best else None,
                     "aten_ms": aten.device_ms if aten else None, "aten_spread": aten.spread if aten else None,
                     "aten_eager_ms": aten.eager_ms if aten else None,
                     "best_eager_ms": best.eager_ms if best else None,
                     "tune_s": tune_s.get(key),
                     "family_best_ms": {f: r.device_ms for f, r in fam_best.items()}})
    order = {k: i for i, k in enumerate(names)}
    rows.sort(key=lambda r: order.get(r["key"], 1e9))
    return {"context": ctx0.__dict__ if ctx0 else None, "rows": rows}


def run_summary_text(doc: dict) -> str:
    """``run_summary``'s rows as a fixed-width table, with the geomean speedup per group."""
    nan = float("nan")
    lines = [f"{'group':8} {'name':24} {'best choice':52} {'best us':>8} {'aten us':>8} {'x':>6} {'n':>4} "
             f"{'fail':>4} {'tune s':>6}"]
    geo = defaultdict(list)
    for r in doc["rows"]:
        sp = r["aten_ms"] / r["best_ms"] if r["best_ms"] and r["aten_ms"] else nan
        geo[r["group"]].append(sp)
        fail = sum(v for k, v in r["statuses"].items() if k != "ok")
        lines.append(f"{r['group']:8} {r['name']:24} {str(r['best']):52} "
                     f"{r['best_ms'] * 1e3 if r['best_ms'] else nan:8.2f} "
                     f"{r['aten_ms'] * 1e3 if r['aten_ms'] else nan:8.2f} {sp:6.2f} {r['candidates']:4} {fail:4} "
                     f"{r['tune_s'] if r['tune_s'] is not None else nan:6.1f}")
    for g, v in geo.items():
        v = [x for x in v if x == x]
        if v:
            lines.append(f"geomean speedup over aten, {g}: {math.exp(sum(map(math.log, v)) / len(v)):.3f} "
                         f"({len(v)} shapes)")
    return "\n".join(lines) + "\n"


__all__ = ["summarize", "markdown", "run_summary", "run_summary_text"]
