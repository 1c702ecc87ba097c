"""Replay --fast with one more candidate where K is short: the ranker's best-ranked tiled choice
whose BLOCK_K covers K in one iteration (or two), on a results store, 5-fold cross-validation by
shape (``fast_replay.replay``), CPU only:

    python scripts/exp_fast_short_k.py STORE.sqlite.gz rows.json [SMS]

fast: what --fast picks (``topk.fast_parts`` with the GPU's SMS, extra by trust: with_other_path,
with_core without skinny's default tiles, with_wave_split, with_padded_cublas, and the next best).
sk<T><c|h><f|p>[a]: where K <= T and no tiled pick (triton_mm / triton_static / persistent_tma,
copy-free or pad+) of the first part covers K already, the ranker's best-ranked tiled choice with
BLOCK_K >= next_pow2(K) (c: one iteration) or >= next_pow2(K) / 2 (h: at most two); f: copy-free
choices only, p: pad+ ones too on an unaligned problem (their K is the padded K); a: the check
also counts the model's next best choices (so it adds nothing where an extra pick covers K). As
``fast_parts`` would: the added choice joins the first part, and the next best are those not
picked yet (so the picks only grow and no score can fall).

Findings (2026-11-27, CPU; each store's replay took 1-2 min on 2 shared cores; run twice, the same
numbers both times). Stores: H100 call 7's of ``benchmarks/results/2026-11-27-h100-s24/`` (rebuilt
from ``call7/collect-delta.sqlite.gz`` as that README's section 3 says; 497 problems scored), H200
``data/collect/collect.sqlite.gz`` (953). Geomean % of the best measured choice, mean candidates
timed (cuBLAS included), problems the rule added a choice on:

    H100                 fast                sk128cf             sk256cf             sk256hf             sk512hf
    all (497)            98.69% 4.79         98.69% 4.79  +3     98.69% 4.80  +7     98.69% 4.80  +5     98.69% 4.82 +18
    K<=128 (34)          98.15% 5.76         98.15% 5.85  +3     98.15% 5.85  +3     98.15% 5.79  +1     98.15% 5.79  +1
    K<=256 (39)          98.37% 5.77         98.37% 5.85  +3     98.39% 5.95  +7     98.37% 5.90  +5     98.37% 5.90  +5
    16<K<=256 (24)       98.58% 5.79         98.58% 5.92  +3     98.61% 6.08  +7     98.58% 6.00  +5     98.58% 6.00  +5
    K<=512 (52)          98.53% 5.69         98.53% 5.75  +3     98.55% 5.83  +7     98.53% 5.79  +5     98.53% 6.04 +18
    H200
    all (953)            98.87% 4.57         98.87% 4.58  +9     98.87% 4.59 +19     98.87% 4.58 +13     98.87% 4.60 +35
    K<=128 (54)          96.28% 4.96         96.28% 5.13  +9     96.28% 5.13  +9     96.28% 5.04  +4     96.28% 5.04  +4
    K<=256 (64)          96.78% 4.97         96.79% 5.11  +9     96.79% 5.27 +19     96.79% 5.17 +13     96.79% 5.17 +13
    16<K<=256 (47)       96.90% 4.79         96.91% 4.98  +9     96.91% 5.19 +19     96.90% 5.06 +13     96.90% 5.06 +13
    K<=512 (86)          97.23% 5.02         97.23% 5.13  +9     97.23% 5.24 +19     97.23% 5.17 +13     97.32% 5.43 +35

- No variant helps measurably. The threshold hardly matters: at K <= 64 a variant fires on one
  problem of the 67 (H200 395x13008x64 bf16, cuBLAS's already; the first part holds a covering
  tiled pick on every other one, and at K <= 16 every tiled config covers K, BLOCK_K's floor being
  16), and above 256 only the two-iteration variant can (the spaces' largest BLOCK_K is 256).
  sk256cf, the best of the one-iteration variants, lifts one H100 problem (2x2160x176 bf16,
  99.3% -> 100%) and one H200 problem (419x4709x89 fp16, 98.6% -> 98.7%) for 0.18 (H100) and 0.30
  (H200) more candidates a K <= 256 problem; sk512hf lifts one H200 problem (22x16x480 bf16,
  90.0% -> 97.5%) for 0.41 more a K <= 512 problem and nothing on the H100 for 0.35 more. The pad+
  variants (p) pick the same score as the copy-free ones (f) on every subset; checking the next best
  picks too (a) saves a few additions and loses sk256cf's H200 gain (96.78%).
- The ranker already picks such configs: the rule fires on 7 of the H100's 24 problems with
  16 < K <= 256 and 19 of the H200's 47. Without any ranker, the best measured copy-free tiled
  choice covers K in one iteration on 15 of 23 (H100) / 25 of 47 (H200) of those problems that have
  a covering one measured, and a covering choice's best reaches 87.7% / 84.3% (geomean) of the best
  tiled one (two iterations: best on 18 of 24 / 33 of 47, 95.0% / 92.3%): a short BLOCK_K is often
  the better tile, so forcing a covering one is no general fix.
- --fast's short-K misses on the H200 (K <= 128: 96.28%, 57.4% at >= 97% of the best) are mostly
  1.5-3 us problems with K <= 64 that the ranker trusts little (trust 0-0.5), not BLOCK_K choices.
- 1500x1500x100 fp16 (section 2 of benchmarks/results/2026-11-27-h100-s24/README.md) has no
  neighbour in either store: the nearest, 1199x6816x112, is cuBLAS's (copy-free BK128 tiles at
  1.69-2.01x its time). The replay can say nothing about that class; collecting short-K, large-MN
  shapes is what would.

So no rule was added to ``topk.fast_parts``. Note the harness (``fast_replay.replay``) computes
features with the H100's facts for both stores; both GPUs have 132 SMs, so with_wave_split is the
same."""
import json
import sys

import numpy as np

from gemmtune.configs import next_pow2
from gemmtune.model.topk import fast_extra, fast_parts
from fast_replay import policy_line, replay

SMS = int(sys.argv[3]) if len(sys.argv) > 3 else 132
TILED = ("triton_mm", "triton_static", "persistent_tma")
VARIANTS = [(t, half, pad, also_more) for t in (64, 128, 256, 512) for half in (False, True)
            for pad in (False, True) for also_more in (False, True) if half or t <= 256]
ADDED: dict = {}  # (problem key, policy) -> the choice ids a variant added


def name_of(t, half, pad, also_more):
    return f"sk{t}{'h' if half else 'c'}{'p' if pad else 'f'}{'a' if also_more else ''}"


def covers(choice, problem, half: bool) -> bool:
    """A tiled choice whose BLOCK_K takes K (the padded K for pad+) in one iteration (two: half)."""
    if choice.family not in TILED:
        return False
    k = problem.padded().k if choice.pad else problem.k
    need = next_pow2(k) // (2 if half else 1)
    return choice.config.block_k >= max(need, 1)


def policies(others, keys, order, trust, problem):
    extra = fast_extra(trust)
    first, more = fast_parts(others, keys, extra=extra, problem=problem, sms=SMS)
    pol = {"fast": first + more}
    for t, half, pad, also_more in VARIANTS:
        name = name_of(t, half, pad, also_more)
        seen = first + more if also_more else first
        add = []
        if problem.k <= t and not any(covers(others[i], problem, half) for i in seen):
            add = [int(i) for i in order if covers(others[int(i)], problem, half)
                   and (pad or not others[int(i)].pad)][:1]
        grown = first + add
        taken = set(grown)
        pol[name] = grown + [int(i) for i in order if int(i) not in taken][:extra]
        if add:
            ADDED[(problem.key, name)] = [others[i].id for i in add]
    return pol


def gm(rows, name):
    f = np.array([r["pol"][name][0] for r in rows])
    return float(np.exp(np.log(f).mean()))


def oracle(store):
    """No ranker: on each problem with 16 < K <= 256 (where BLOCK_K's floor of 16 does not cover K
    already), the best measured copy-free tiled choice against the best covering one (c) and the
    best of at most two iterations (h), and the best of all choices."""
    from gemmtune.model import cv as cvmod
    from gemmtune.model.data import load_dataset
    data = load_dataset(store).native().ranked(cvmod.MIN_RANKED_CHOICES)
    out = {"c": [], "h": []}
    wins = {"c": 0, "h": 0}
    n = 0
    for g in data.groups:
        p = g.problem
        if not 16 < p.k <= 256:
            continue
        tiled = [(t, c) for c, t in zip(g.choices, g.times_ms) if c.family in TILED and not c.pad]
        if not tiled:
            continue
        n += 1
        best_tiled = min(t for t, _ in tiled)
        for v, half in (("c", False), ("h", True)):
            cov = [t for t, c in tiled if covers(c, p, half)]
            if cov:
                out[v].append(best_tiled / min(cov))
                wins[v] += min(cov) == best_tiled
    print(f"== oracle, 16<K<=256, copy-free tiled: {n} problems")
    for v in ("c", "h"):
        f = np.array(out[v])
        print(f"  {v}: {len(f)} with such a choice measured; best tiled is one on {wins[v]}; best tiled / best of "
              f"those: geomean {np.exp(np.log(f).mean()) * 100:.1f}%, min {f.min() * 100:.1f}%")


def main():
    oracle(sys.argv[1])
    rows = replay(sys.argv[1], policies)
    for r in rows:
        r["added"] = {name: ADDED.get((r["key"], name), []) for name in r["pol"]}
    json.dump(rows, open(sys.argv[2], "w"))
    names = list(rows[0]["pol"])
    subsets = [("all", rows)] + [(f"K<={t}", [r for r in rows if r["shape"][2] <= t]) for t in (16, 64, 128, 256, 512)] \
        + [("16<K<=256", [r for r in rows if 16 < r["shape"][2] <= 256])]
    for title, sub in subsets:
        if not sub:
            continue
        print(f"== {title} ({len(sub)})")
        for name in names:
            n_add = sum(bool(r["added"][name]) for r in sub)
            print(f"  {name:9s} {policy_line(sub, name)} added on {n_add}")
    print("== problems where a variant added a choice (K <= 512): baseline % -> variant %, added choice")
    for r in sorted(rows, key=lambda r: r["shape"][2]):
        adds = {n: r["added"][n] for n in names if r["added"][n]}
        if not adds:
            continue
        base = r["pol"]["fast"][0]
        print(f"  {r['key']}  fast {base * 100:.1f}%")
        by_choice: dict = {}
        for n, ids in adds.items():
            by_choice.setdefault((ids[0], round(r["pol"][n][0], 4)), []).append(n)
        for (cid, frac), ns in by_choice.items():
            print(f"     {frac * 100:6.1f}%  {cid}  <- {' '.join(ns)}")


if __name__ == "__main__":
    main()
