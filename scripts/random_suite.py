"""A seeded random shape suite in the public suite's five groups, for measuring gemmtune on shapes
nobody chose (the public suite is a sample; a user's shapes are not in it). Any machine.

    python scripts/random_suite.py --seed 26 --out rand26.csv [--per-group decode=7,splitk=5,...]
    gemmtune bench --suite rand26.csv --skip-inductor --out DIR      # GPU

Each group draws from the class the public suite samples, not from its rows:
- decode: M in 1..32, N and K from the widths transformer layers use (hidden, MLP, fused QKV and
  vocabulary sizes, some odd), B column-major half the time (``x @ W.T``, the Linear case);
- splitk: M and N in 8..512, K in 8K..128K;
- odd: M, N and K odd (primes, ragged sizes) in 70% of rows; in the other 30%, an odd M against
  a vocabulary head (N from every other vocabulary size, mostly even, or 50257 / 32001; K a layer
  width, always even); any layout;
- prefill: M in 128..4096 (multiples of 16, some odd), N and K layer widths;
- square: cubes of 512..6144, a third of them off the 64-grid.
Two classes the public suite has no row of, drawn only when asked for (``--per-group tall=4``), so
a seed's default suite is what it always was:
- tall: M in 1K..32K tokens, N <= 64 (MoE routers' expert counts, LoRA ranks, value and
  classifier heads), K a layer width: the decode shape's transpose, A streamed once;
- smallk: M and N layer widths or token counts (512..16K), K in 8..256 (LoRA up-projections,
  attention-like head widths, rank-k updates): C's write is most of the bytes.
A tenth of the rows outside splitk are fp16, a tenth fp32, the rest bf16. Names carry the sizes,
so two seeds never collide.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
from pathlib import Path

# Layer widths of public transformer configs (hidden sizes, MLP widths, fused QKV widths) and
# vocabulary sizes, the odd ones included: what N and K are in a model.
HIDDEN = [768, 896, 1024, 1536, 2048, 2560, 3072, 3584, 4096, 5120, 6144, 8192]
MLP = [2816, 3072, 4864, 5632, 6912, 8960, 11008, 13824, 14336, 18944, 28672]
QKV = [1152, 2304, 2560, 3072, 4608, 5120, 6144, 7168, 9216, 10240]
VOCAB = [32000, 32001, 32064, 49152, 50257, 50304, 65024, 100352, 128256, 151936]
PRIMES = [97, 251, 509, 1021, 1531, 2053, 3001, 4093, 5003, 7001, 8191]
GROUPS = {"decode": 7, "splitk": 5, "odd": 6, "prefill": 4, "square": 3}
EXTRA_GROUPS = ("tall", "smallk")  # 0 rows unless --per-group names them
SMALL_N = [1, 2, 4, 8, 8, 16, 16, 32, 64, 64, 3, 5, 24, 48]
SMALL_K = [8, 16, 16, 24, 32, 32, 48, 64, 64, 96, 128, 128, 192, 256, 13, 40, 80]


def _log_int(rng: random.Random, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def _dtype(rng: random.Random) -> str:
    r = rng.random()
    return "float16" if r < 0.1 else "float32" if r < 0.2 else "bfloat16"


def _width(rng: random.Random) -> int:
    return rng.choice(HIDDEN + MLP + QKV)


def draw(group: str, rng: random.Random) -> dict:
    """One row of ``group``: sizes, dtype and layouts (see the module docstring)."""
    la, lb, dtype = "row", rng.choice(["row", "col"]), _dtype(rng)
    if group == "decode":
        m = rng.choice([1, 1, 2, 3, 4, 8, 8, 16, 16, 24, 32])
        n, k = (rng.choice(VOCAB), rng.choice(HIDDEN)) if rng.random() < 0.2 else (_width(rng), _width(rng))
    elif group == "splitk":
        m, n, k = _log_int(rng, 8, 512), _log_int(rng, 8, 512), _log_int(rng, 8192, 131072)
        if rng.random() < 0.5:
            m, n, k = (max(16, x - x % 16) for x in (m, n, k))
        dtype = "float32" if rng.random() < 0.2 else "bfloat16"
    elif group == "odd":
        la = rng.choice(["row", "col"])
        pick = rng.random()
        if pick < 0.3:
            m, n, k = _log_int(rng, 17, 2047) | 1, rng.choice(VOCAB[1::2] + [50257, 32001]), rng.choice(HIDDEN)
        else:
            m, n, k = (rng.choice(PRIMES) if rng.random() < 0.5 else _log_int(rng, 65, 6000) | 1 for _ in range(3))
    elif group == "prefill":
        m = _log_int(rng, 128, 4096)
        m = m - m % 16 if rng.random() < 0.7 else m
        n, k = _width(rng), _width(rng)
    elif group == "tall":
        m, n, k = _log_int(rng, 1024, 32768), rng.choice(SMALL_N), _width(rng)
        m = m - m % 16 if rng.random() < 0.7 else m
    elif group == "smallk":
        m, n = (_width(rng) if rng.random() < 0.5 else _log_int(rng, 512, 16384) for _ in range(2))
        k = rng.choice(SMALL_K)
    elif group == "square":
        s = _log_int(rng, 512, 6144)
        s = s | 1 if rng.random() < 1 / 3 else max(512, s - s % 64)
        m = n = k = s
    else:
        raise ValueError(f"unknown group {group!r}; expected one of {', '.join((*GROUPS, *EXTRA_GROUPS))}")
    while m * n * k > 2**36:  # keep a default-mode tune of one row under a minute
        m = max(1, m // 2) | (1 if group == "odd" else 0)
    short = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}[dtype]
    return {"group": group, "M": m, "N": n, "K": k, "dtype": dtype, "layout_a": la, "layout_b": lb,
            "name": f"{group}_{m}x{n}x{k}_{short}_{la[0]}{lb[0]}"}


def suite(seed: int, per_group: dict[str, int]) -> list[dict]:
    """The rows, deduplicated by name (a repeat is drawn again)."""
    rng, rows, seen = random.Random(seed), [], set()
    for group, count in per_group.items():
        while sum(r["group"] == group for r in rows) < count:
            row = draw(group, rng)
            if row["name"] not in seen:
                seen.add(row["name"])
                rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True, help="the CSV to write")
    ap.add_argument("--per-group", default="", help="e.g. decode=7,splitk=5 (default: %s)" %
                    ",".join(f"{g}={n}" for g, n in GROUPS.items()))
    args = ap.parse_args(argv)
    per = dict(GROUPS)
    for item in filter(None, args.per_group.split(",")):
        g, _, n = item.partition("=")
        if g not in (*GROUPS, *EXTRA_GROUPS) or not n.isdigit():
            ap.error(f"--per-group: {item!r} is not GROUP=COUNT with GROUP one of {', '.join((*GROUPS, *EXTRA_GROUPS))}")
        per[g] = int(n)
    rows = suite(args.seed, per)
    with args.out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["group", "name", "M", "N", "K", "dtype", "layout_a", "layout_b"])
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} shapes -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
