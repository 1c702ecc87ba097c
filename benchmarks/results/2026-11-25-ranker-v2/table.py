"""The experiment table (markdown) from sweep.jsonl: one row per setting, H100 and H200 side by side."""
import json
import sys
from pathlib import Path

rows = [json.loads(x) for x in Path(sys.argv[1] if len(sys.argv) > 1 else
                                    "benchmarks/results/2026-11-25-ranker-v2/sweep.jsonl").read_text().splitlines() if x]
by: dict = {}
for r in rows:
    by.setdefault((r["name"], r.get("features", "v2"), json.dumps(r["params"], sort_keys=True)), {})[r["gpu"]] = r


def cell(r):
    if r is None:
        return "- | - | -"
    return f"{100 * r['top1_within_10pct']:.1f}% | {100 * r['top5_regret_geomean']:.2f}% | {r['spearman_mean']:.3f}"


print("| setting | features | params | H100 top-1 within 10% | H100 top-5 regret | H100 Spearman "
      "| H200 top-1 within 10% | H200 top-5 regret | H200 Spearman |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
for (name, feats, params), d in by.items():
    print(f"| {name} | {feats} | `{params}` | {cell(d.get('h100'))} | {cell(d.get('h200'))} |")
