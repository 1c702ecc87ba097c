"""Per shape and per group, each gemmtune mode's kernel as a % of the best kernel any method found in
one `gemmtune bench` JSON (geomean per group; "edge" rows apart from the public ones), with --fast's
and the "model top-1" column's choices side by side (exp_fast_new_model.py puts --fast with a
candidate ranker there). CPU only.

    python scripts/pct_of_best.py "DIR/*.json"
"""
import collections
import glob
import json
import math
import sys

MODES = ("gemmtune", "gemmtune_fast", "gemmtune_top5", "gemmtune_top1")


def main(pattern: str) -> None:
    doc = json.load(open(glob.glob(pattern)[0]))
    agg = collections.defaultdict(lambda: collections.defaultdict(list))
    for s in doc["shapes"]:
        t = {m: s["methods"][m]["kernel"]["ms"] for m in MODES if s["methods"].get(m, {}).get("status") == "ok"}
        t["cublas"] = s["cublas"]["kernel"]["ms"] if isinstance(s["cublas"], dict) else s["cublas"]
        best = min(t.values())
        group = "edge" if s["group"] == "edge" else "public"
        for m in MODES:
            if m in t:
                agg[group][m].append(best / t[m])
                agg["all"][m].append(best / t[m])
        picks = [s["methods"].get(m, {}).get("choice", "-")[:40] for m in ("gemmtune_fast", "gemmtune_top1")]
        print(f'{s["name"][:28]:28s}', " ".join(f"{best / t[m] * 100:6.1f}" for m in MODES if m in t), " | ".join(picks))
    for group, v in agg.items():
        print(group, {m: round(100 * math.exp(sum(map(math.log, x)) / len(x)), 2) for m, x in v.items()}, len(v["gemmtune"]))


if __name__ == "__main__":
    main(sys.argv[1])
