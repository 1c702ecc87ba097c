"""The README's tables, from results.jsonl (one row per pooled.py run).

    python benchmarks/results/2026-11-26-pooled-ranker/table.py
"""
import json
import os
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = {"base": "base (T only)", "a": "a: + all of other GPU", "b": "b: + other GPU minus held-out shapes",
            "c": "c: b + log2 HBM GB/s column"}
rows = [json.loads(line) for line in open(os.path.join(HERE, "results.jsonl"))]
last = {}
for r in rows:  # a rerun of the same (gpu, variant, seed) replaces the earlier one
    last[(r["gpu"], r["variant"], r["seed"])] = r
rows = sorted(last.values(), key=lambda r: (r["gpu"], list(VARIANTS).index(r["variant"]), r["seed"]))

print("| GPU | variant | ranker seed | top-1 within 10% | top-1 regret (geomean) | top-5 regret (geomean) | "
      "Spearman (mean) | problems scored | extra problems / fold | wall s |")
print("|---|---|---:|---:|---:|---:|---:|---:|---|---:|")
for r in rows:
    ex = r["extra_problems_per_fold"]
    print(f"| {r['gpu'].upper()} | {VARIANTS[r['variant']]} | {r['seed']} | {100 * r['top1_within_10pct']:.1f}% | "
          f"{100 * r['top1_regret_geomean']:.2f}% | {100 * r['top5_regret_geomean']:.2f}% | "
          f"{r['spearman_mean']:.3f} | {r['scored']} | {min(ex)}-{max(ex)} | {r['wall_s']:.0f} |")

print()
print("| GPU | variant | seeds | top-1 within 10% (mean) | top-1 regret (mean of geomeans) | "
      "top-5 regret (mean of geomeans) | Spearman (mean) |")
print("|---|---|---|---:|---:|---:|---:|")
by = defaultdict(list)
for r in rows:
    by[(r["gpu"], r["variant"])].append(r)
for (gpu, v), rs in by.items():
    def mean(k):
        return sum(r[k] for r in rs) / len(rs)
    print(f"| {gpu.upper()} | {VARIANTS[v]} | {','.join(str(r['seed']) for r in rs)} | "
          f"{100 * mean('top1_within_10pct'):.1f}% | {100 * mean('top1_regret_geomean'):.2f}% | "
          f"{100 * mean('top5_regret_geomean'):.2f}% | {mean('spearman_mean'):.3f} |")
