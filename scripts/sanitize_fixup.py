"""SPLIT_MODE 3 (tile_epilogue.parallel_fixup: spin-wait, then every program of a tile sums a share of
its partials) on odd shapes, for compute-sanitizer; each launch twice on one workspace (the counter
must come back to zero), each output checked against fp64.

    compute-sanitizer --tool memcheck python scripts/sanitize_fixup.py
"""
import torch

from gemmtune.configs import cdiv
from gemmtune.kernels.splitk import SplitKWorkspace
from gemmtune.kernels.tiled import launch_tiled
from gemmtune.verify import compare

# (M, N, K, BM, BN, BK, S, layout of B, epilogue bias): ragged M, N, K; a short last slice; a
# transposed B; S not a power of two; one split per SM at most.
CASES = [(200, 200, 20000, 64, 64, 64, 7, "row"), (33, 45, 9001, 32, 32, 128, 13, "col"),
         (1, 17, 4099, 16, 16, 128, 5, "row"), (128, 128, 32768, 64, 64, 64, 32, "row"),
         (100, 300, 12289, 64, 64, 64, 11, "col")]
ws = SplitKWorkspace()
bad = 0
for m, n, k, bm, bn, bk, s, lay in CASES:
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) if lay == "row" else \
        torch.randn(n, k, device="cuda", dtype=torch.bfloat16).t()
    per = cdiv(cdiv(k, s), bk) * bk
    splits, tiles = cdiv(k, per), cdiv(m, bm) * cdiv(n, bn)
    ref = a.double() @ b.double()
    for rep in range(2):
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        launch_tiled(a, b, out, block_m=bm, block_n=bn, block_k=bk, group_m=8, num_stages=3, num_warps=4,
                     k_per_split=per, split_mode=3, ws=ws.partials(splits * tiles * bm * bn, True, a.device),
                     locks=ws.counters(tiles, a.device))
        torch.cuda.synchronize()
        ok = compare(out, ref, 2e-2).ok and int(ws.counters(tiles, a.device).abs().sum()) == 0
        bad += not ok
        print(f"fixup {m}x{n}x{k} {lay} S={splits} tiles={tiles} launch {rep}: {'ok' if ok else 'WRONG'}", flush=True)
print("sanitize: all ok" if not bad else f"sanitize: {bad} WRONG")
