"""Compare two runs of scripts/exp_gemv_wide.py strip by strip (CPU; reads their JSON).

Two sweeps of the same strips on the same shapes, before and after a kernel change: for each
layout of the one-row product (3-D, -flat, -flat-sum), the geomean over every (shape, strip) pair
timed in both of (before / after), each time first divided by its own run's cuBLAS time for that
shape, so that a change of machine or clock between the runs cancels. A layout whose code did not
change is the control: it should read about 1.00. Then, per shape, both runs' best strip and
the best of a given set of choices (``--choices``, e.g. the default space's GEMV tiles), with
the percentage of the floor.

    python scripts/compare_gemv_sweeps.py BEFORE.json AFTER.json [--choices ID,ID,...]

Session 40 compared call 3 against call 7 this way (benchmarks/results/2026-11-29-h200-s40):
-flat-sum 1.129, -flat 1.102, 3-D 1.001.
"""
from __future__ import annotations

import argparse
import json
import sys

from gemmtune.report.stats import geomean

LAYOUTS = ("3-D", "-flat", "-flat-sum")


def layout(choice_id: str) -> str:
    """Which one-row layout a skinny choice id names.

    >>> [layout(c) for c in ("skinny:BM1-BN2-BK1024-SK1-S1-W4-core-det", "skinny:BM1-BN2-BK1024-SK1-S1-W4-core-det-flat",
    ...                      "skinny:BM1-BN2-BK1024-SK1-S1-W4-core-det-flat-sum-pdl")]
    ['3-D', '-flat', '-flat-sum']
    """
    if "-flat-sum" in choice_id:
        return "-flat-sum"
    return "-flat" if "-flat" in choice_id else "3-D"


def _key(row: dict) -> tuple[int, int, int]:
    return row["M"], row["N"], row["K"]


def ratios(before: dict, after: dict) -> dict[str, list[float]]:
    """Per layout, (before / cuBLAS) / (after / cuBLAS) of every strip timed on a shape in both."""
    out: dict[str, list[float]] = {name: [] for name in LAYOUTS}
    after_rows = {_key(r): r for r in after["rows"]}
    for r in before["rows"]:
        s = after_rows.get(_key(r))
        if s is None:
            continue
        for cid, t in r["strips"].items():
            u = s["strips"].get(cid)
            if u is not None and t > 0 and u > 0:
                out[layout(cid)].append((t / r["cublas_us"]) / (u / s["cublas_us"]))
    return out


def _best(row: dict, ids: list[str] | None) -> tuple[str, float] | None:
    items = [(c, t) for c, t in row["strips"].items() if ids is None or c in ids]
    return min(items, key=lambda ct: ct[1]) if items else None


def report(before: dict, after: dict, ids: list[str] | None = None) -> str:
    lines = ["layout | pairs | before / after (each over its cuBLAS), geomean", "---|---:|---:"]
    for name, xs in ratios(before, after).items():
        g = geomean(xs)
        lines.append(f"{name} | {len(xs)} | {'nan' if g is None else f'{g:.3f}'}")
    after_rows = {_key(r): r for r in after["rows"]}
    lines += ["", "shape | cuBLAS before / after | best before | best after"
              + (" | choices' best before | after" if ids else ""), "---|---|---|---" + ("|---|---" if ids else "")]
    for r in before["rows"]:
        s = after_rows.get(_key(r))
        if s is None:
            continue
        cells = [f"{r['M']}x{r['N']}x{r['K']}", f"{r['cublas_us']:.1f} / {s['cublas_us']:.1f} us"]
        for subset in ([None, ids] if ids else [None]):
            for row in (r, s):
                b = _best(row, subset)
                cells.append("-" if b is None else
                             f"{b[1]:.1f} us ({100 * row['floor_us'] / b[1]:.0f}%) {b[0].split(':')[-1]}")
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--choices", default="", help="comma-separated skinny choice ids to report the best of")
    args = ap.parse_args(argv)
    try:
        with open(args.before) as f:
            before = json.load(f)
        with open(args.after) as f:
            after = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"compare_gemv_sweeps: cannot read a sweep: {e}", file=sys.stderr)
        return 2
    ids = [c for c in args.choices.split(",") if c] or None
    print(report(before, after, ids))
    return 0


if __name__ == "__main__":
    sys.exit(main())
