"""Session 41: which one-row strips should the M = 1 default space add on wide layers? (CPU.)

Reads exp_gemv_wide sweeps (JSON) and scores tile sets by the geomean, over shapes and sweeps, of
best strip / best strip of the set. Picks are greedy and S1 only (the default space's stages), and
each is scored leave-one-out: picked on all shapes but one, scored on that one. Prints the current
default (_DEFAULT_ONE_ROW) against a greedy set of four over every shape, then, on the layers of
N >= --wide-n, the current four plus 1 or 2 greedy picks.

    python scripts/sessions/s41_one_row_loo.py SWEEP.json [SWEEP.json ...] [--wide-n 8192]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src"))

from gemmtune.configs import Choice, SkinnyConfig  # noqa: E402
from gemmtune.kernels.skinny_spec import _DEFAULT_ONE_ROW  # noqa: E402


def geomean(v):
    return math.exp(sum(map(math.log, v)) / len(v))


def load(path):
    rows = json.load(open(path))["rows"]
    return {(r["M"], r["N"], r["K"]): {c: t for c, t in r["strips"].items() if isinstance(t, float)} for r in rows}


def ratios(sweeps, keys, chosen):
    """best / best of ``chosen`` per (sweep, shape); a set with no strip timed there scores 0."""
    out = []
    for sw in sweeps:
        for key in keys:
            got = min((sw[key][c] for c in chosen if c in sw[key]), default=math.inf)
            out.append(min(sw[key].values()) / got)
    return out


def greedy(sweeps, keys, cands, start, extra):
    chosen = list(start)
    for _ in range(extra):
        chosen.append(max(cands, key=lambda c: sum(math.log(max(r, 1e-9)) for r in ratios(sweeps, keys, chosen + [c]))))
    return chosen


def loo(sweeps, keys, cands, start, extra):
    held = []
    for key in keys:
        chosen = greedy(sweeps, [k for k in keys if k != key], cands, start, extra)
        held += ratios(sweeps, [key], chosen)
        print(f"  held out {key}: picks {[c.split(':')[1] for c in chosen[len(start):]]} -> "
              f"{', '.join(f'{r:.3f}' for r in ratios(sweeps, [key], chosen))}")
    return held


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweeps", nargs="+")
    ap.add_argument("--wide-n", type=int, default=8192)
    args = ap.parse_args()
    sweeps = [load(p) for p in args.sweeps]
    keys = sorted(set.intersection(*(set(sw) for sw in sweeps)))
    cands = sorted(set.intersection(*(set(st) for sw in sweeps for st in sw.values())))
    cands = [c for c in cands if Choice.parse(c).config.num_stages == 1]
    current = [Choice("skinny", SkinnyConfig(1, bn, bk, 1, st, w, False, True, flat=True, sum_each=se)).id
               for bn, bk, w, st, se in _DEFAULT_ONE_ROW]
    print(f"{len(keys)} shapes, {len(sweeps)} sweeps, {len(cands)} S1 candidates timed everywhere")
    cur = ratios(sweeps, keys, current)
    print(f"current four, all shapes: {geomean(cur):.3f} (worst {min(cur):.3f})")
    held = loo(sweeps, keys, cands, [], 4)
    print(f"greedy four, all shapes, leave-one-out: {geomean(held):.3f} (worst {min(held):.3f})")
    wide = [k for k in keys if k[1] >= args.wide_n]
    cur = ratios(sweeps, wide, current)
    print(f"current four, N >= {args.wide_n} ({len(wide)} shapes): {geomean(cur):.3f} (worst {min(cur):.3f})")
    for extra in (1, 2):
        held = loo(sweeps, wide, cands, current, extra)
        print(f"current four + {extra}, N >= {args.wide_n}, leave-one-out: {geomean(held):.3f} (worst {min(held):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
