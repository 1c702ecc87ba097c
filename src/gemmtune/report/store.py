"""Per-problem summary of a results store: ``gemmtune report --store STORE.sqlite [--json OUT]``.

For every problem the store holds (per run context: GPU, versions): the fastest verified
choice and its time, cuBLAS's time and the speedup over it, the best choice of every family,
how many candidates were measured and how many failed, by status. This is what
``scripts/summarize_store.py`` computed for the committed H200 runs, now in the package.

Example::

    >>> from gemmtune.report.store import summarize, markdown
    >>> rows = summarize("gemmtune.sqlite")                  # doctest: +SKIP
    >>> print(markdown(rows))                                # doctest: +SKIP
"""

from __future__ import annotations

import math
import os
from collections import Counter, defaultdict

from ..store import ResultStore


def summarize(store: str | os.PathLike | ResultStore) -> list[dict]:
    """One dict per (run context, problem): key, device, best, best_ms, aten_ms, speedup,
    per-family best ``{family: (choice, ms)}``, measured, failed, statuses."""
    own = not isinstance(store, ResultStore)
    db = ResultStore(store) if own else store
    try:
        by: dict[tuple, list] = defaultdict(list)
        devices = {}
        for ctx, row in db.rows():
            k = (ctx, row.problem_key)
            by[k].append(row)
            devices[k] = ctx.device_name
    finally:
        if own:
            db.close()
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
            "key": k[1], "device": devices[k],
            "best": None if best is None else best.choice_id,
            "best_ms": None if best is None else best.device_ms,
            "aten_ms": None if aten is None else aten.device_ms,
            "speedup": (aten.device_ms / best.device_ms) if best is not None and aten is not None else None,
            "families": fams, "measured": len(rows), "failed": len(rows) - statuses.get("ok", 0),
            "statuses": dict(statuses),
        })
    return out


def _us(ms) -> str:
    return "-" if ms is None else f"{ms * 1e3:.2f}"


def markdown(rows: list[dict]) -> str:
    """The summary as a Markdown table, with the geomean speedup over cuBLAS at the end."""
    lines = ["| problem | best | best µs | cuBLAS µs | speedup | measured | failed |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        sp = "-" if r["speedup"] is None else f"{r['speedup']:.2f}×"
        lines.append(f"| `{r['key']}` | `{r['best'] or '-'}` | {_us(r['best_ms'])} | {_us(r['aten_ms'])} | {sp} | "
                     f"{r['measured']} | {r['failed']} |")
    sps = [r["speedup"] for r in rows if r["speedup"]]
    if sps:
        g = math.exp(sum(math.log(s) for s in sps) / len(sps))
        lines += ["", f"{len(rows)} problems; geomean speedup of the best over cuBLAS: {g:.2f}× ({len(sps)} with both)."]
    return "\n".join(lines) + "\n"


__all__ = ["summarize", "markdown"]
