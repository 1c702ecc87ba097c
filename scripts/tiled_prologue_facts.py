#!/usr/bin/env python3
"""Offline (no GPU): compile facts of the tiled kernel over shapes, layouts and modes (sm_90a).

    PYTHONPATH=src python scripts/tiled_prologue_facts.py OUT.json

For each launch (BM64-BN128-BK64-S4-W4-G8, bf16; row/col-major A and B; split-K modes 1 and 2;
the static variant; a bmm): registers, SASS instruction count, index of the first HGMMA,
MUFU.RCP count (runtime integer divisions), cp.async/LDGSTS and global load/store counts, and the
SASS size of the main K loop. Used to check that a prologue change keeps every load width and
the loop (benchmarks/results/2026-11-26-tiled-prologue). Compile facts, not timings.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import triton  # noqa: E402

import parity_ir  # noqa: E402
from gemmtune import kernelinfo  # noqa: E402
from gemmtune.kernels import tiled  # noqa: E402

bf = torch.bfloat16


def op(r, c, layout):
    return torch.empty(r, c, dtype=bf) if layout == "row" else torch.empty(c, r, dtype=bf).t()


def main() -> None:
    CASES = []
    for shp in ["1024x1024x1024", "512x4096x4096", "1000x1000x1000", "333x4097x1025", "1x4096x4096",
                "96x50257x768", "4095x4095x4095", "40x24x96"]:
        for la, lb in [("row", "row"), ("col", "row"), ("row", "col"), ("col", "col")]:
            CASES.append((shp, la, lb, "mm"))
    for shp in ["1024x1024x8192", "200x200x20000"]:
        CASES.append((shp, "row", "row", "split1"))
        CASES.append((shp, "row", "row", "split2"))
    for shp in ["1000x1000x1000", "333x4097x1025"]:
        CASES.append((shp, "row", "row", "static"))
        CASES.append((shp, "row", "row", "bmm"))

    out = {}
    for shp, la, lb, mode in CASES:
        M, N, K = map(int, shp.split("x"))
        a, b, c = op(M, K, la), op(K, N, lb), torch.empty(M, N, dtype=bf)
        kw = dict(block_m=64, block_n=128, block_k=64, group_m=8, num_stages=4, num_warps=4, k_per_split=K)
        if mode.startswith("split"):
            ks = K // 4
            tiles = triton.cdiv(M, 64) * triton.cdiv(N, 128)
            kw.update(k_per_split=ks, split_mode=int(mode[-1]), ws=torch.empty(4 * tiles * 64 * 128),
                      locks=torch.empty(tiles, dtype=torch.int32))
        if mode == "static":
            kw["static"] = True
        if mode == "bmm":
            a, b, c = a.expand(3, M, K), b.expand(3, K, N), torch.empty(3, M, N, dtype=bf)
        with tiled.offline() as launches:
            tiled.launch_tiled(a, b, c, **kw)
        (fn, grid, args, kwargs), = launches
        info = kernelinfo._compile(fn, grid, args, kwargs, 90)
        sass = parity_ir.sass_of(info.asm["cubin"])
        ins = [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", sass) if m.group(1) != "NOP"]
        key = f"{shp} {la}/{lb} {mode}"
        out[key] = {"regs": info.registers, "spill": info.spill_bytes, "smem": info.shared_bytes,
                    "sass": len(ins), "first_hgmma": next((i for i, x in enumerate(ins) if "HGMMA" in x), None),
                    "mufu_rcp": sum("MUFU.RCP" in x for x in ins),
                    "loop": [len(b) for _, b in parity_ir.sass_loops(sass) if any("HGMMA" in x for x in b)],
                    "ldgsts128": sum("LDGSTS.E.BYPASS.128" in x for x in ins),
                    "ldgsts": sum("LDGSTS" in x for x in ins),
                    "ldg": sum(x.startswith("LDG") or " LDG." in x for x in ins),
                    **{k: v for k, v in info.counts.items() if v}}
        print(key, out[key], flush=True)
    json.dump({"triton": triton.__version__, "rows": out}, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
