"""Per shape and per group, each gemmtune mode's kernel as a % of the best kernel any method found in
one `gemmtune bench` JSON (geomean per group; "edge" rows apart from the public ones), with --fast's
and the "model top-1" column's choices side by side (exp_fast_new_model.py puts --fast with a
candidate ranker there). CPU only.

    python scripts/pct_of_best.py "DIR/*.json"
    python scripts/pct_of_best.py "DIR/*.json" --gemmtune-only   # sessions 19-20's figures

"Best" is the fastest verified kernel of any method on the shape, cuBLAS, Inductor, TunableOp and
nvMMH included (``gemmtune.report.best_ms``, as the report's "% of best kernel" column). Before
this change the script took the best of cuBLAS and the gemmtune modes only, which rates a mode
higher wherever Inductor (or another peer) was faster; ``--gemmtune-only`` computes that figure,
which sessions 19 and 20 quote. Each group line gives, per mode, the % and the shapes it ran on.
"""
import collections
import glob
import sys

from gemmtune.report import best_ms, geomean, kernel

MODES = ("gemmtune", "gemmtune_fast", "gemmtune_top5", "gemmtune_top1")


def fractions(doc: dict, gemmtune_only: bool = False) -> tuple[dict, list]:
    """({group: {mode: [best / time per shape]}}, [(shape name, {mode: fraction}, picks)]): per
    shape, each mode that ran's best / its time; "best" over every method (``gemmtune_only``: over
    cuBLAS and the gemmtune modes)."""
    agg = collections.defaultdict(lambda: collections.defaultdict(list))
    rows = []
    for s in doc["shapes"]:
        t = {m: k["ms"] for m in MODES if (k := kernel(s.get("methods", {}).get(m)))}
        if gemmtune_only:
            cb = kernel(s.get("cublas"))
            best = min([*t.values(), *([cb["ms"]] if cb else [])], default=None)
        else:
            best = best_ms(s)
        if best is None:
            continue
        group = "edge" if s["group"] == "edge" else "public"
        fr = {m: best / t[m] for m in MODES if m in t}
        for m, f in fr.items():
            agg[group][m].append(f)
            agg["all"][m].append(f)
        picks = [str(s.get("methods", {}).get(m, {}).get("choice", "-"))[:40] for m in ("gemmtune_fast", "gemmtune_top1")]
        rows.append((s["name"], fr, picks))
    return agg, rows


def main(pattern: str, gemmtune_only: bool = False) -> None:
    from gemmtune.report import load_bench

    doc = load_bench(glob.glob(pattern)[0])
    agg, rows = fractions(doc, gemmtune_only)
    for name, fr, picks in rows:
        print(f"{name[:28]:28s}", " ".join(f"{f * 100:6.1f}" for f in fr.values()), " | ".join(picks))
    for group, v in agg.items():
        print(group, {m: (round(100 * geomean(x), 2), len(x)) for m, x in v.items()})


if __name__ == "__main__":
    main(sys.argv[1], "--gemmtune-only" in sys.argv[2:])
