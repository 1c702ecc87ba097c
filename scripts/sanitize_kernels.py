"""A few launches of every kernel path that uses atomics, a workspace or TMA, for compute-sanitizer.

    compute-sanitizer --tool memcheck python scripts/sanitize_kernels.py [FAMILIES]
FAMILIES: comma-separated subset (e.g. splitk,pad,prepared); all by default.
SANITIZE_DTYPE=float32 runs the cases on fp32 operands instead of bf16: with TF32 off, the Triton
families' fp32 products are 3xTF32 (gemmtune.precision), three tensor-core dots per K block into
the same accumulators and the same atomic workspaces; a config whose fp32 tiles do not fit in
shared memory is reported as such and skipped.
Each output is also checked against fp64; prints one line per launch and 'sanitize: all ok'.
Odd sizes, a transposed weight and an unaligned (offset) operand, so masked edges are exercised.
"""
import os
import sys

import torch

from gemmtune import kernels
from gemmtune.configs import DecomposeKConfig, PersistentConfig, SkinnyConfig, SplitKConfig, StaticConfig, TileConfig
from gemmtune.kernels.splitk import SplitKWorkspace
from gemmtune.verify import compare

CASES = [
    ("skinny", SkinnyConfig(1, 32, 128, 4, 1, 4, False, True), (1, 1531, 2049), "col"),
    ("skinny", SkinnyConfig(4, 64, 128, 8, 1, 4, False, False), (3, 1000, 4097), "row"),
    ("skinny", SkinnyConfig(16, 64, 256, 4, 4, 4, True, True), (13, 777, 3001), "offset"),
    ("skinny", SkinnyConfig(16, 32, 128, 16, 3, 4, True, False), (16, 50, 8191), "col"),
    ("skinny", SkinnyConfig(32, 32, 128, 1, 4, 8, True, True), (29, 4099, 1000), "row"),
    ("skinny", SkinnyConfig(16, 64, 256, 1, 4, 4, True, False, 132), (1, 6150, 4103), "col"),
    ("skinny", SkinnyConfig(16, 32, 128, 1, 3, 4, True, False, 264), (9, 777, 3001), "offset"),
    # GEMV strips (skinny_spec._DEFAULT_GEMV): odd N and K, a whole-K block past K, a split
    ("skinny", SkinnyConfig(1, 2, 1024, 1, 1, 4, False, True), (1, 897, 4867), "col"),
    ("skinny", SkinnyConfig(2, 4, 1024, 2, 1, 4, False, True), (2, 1001, 3001), "col"),
    ("splitk", SplitKConfig(32, 32, 128, 4, 4, 8, 8, True), (33, 45, 9000), "row"),
    ("splitk", SplitKConfig(16, 16, 256, 5, 4, 8, 16, False), (17, 19, 12001), "col"),
    # the tile-major workspace: ragged M, N and K, a K-slice count that leaves a short last slice
    ("splitk", SplitKConfig(64, 64, 64, 4, 4, 8, 4, False), (200, 200, 20000), "row"),
    ("splitk", SplitKConfig(64, 64, 64, 4, 4, 8, 4, True), (200, 200, 20000), "offset"),
    ("splitk", SplitKConfig(32, 64, 128, 3, 4, 8, 7, True), (48, 97, 49153), "col"),
    # hundreds of K-slices on one tile (the space goes past 128 only there), a short last slice
    ("splitk", SplitKConfig(16, 16, 128, 4, 4, 8, 1000, False), (2, 3, 1000003), "row"),
    ("splitk", SplitKConfig(16, 16, 128, 4, 4, 8, 300, True), (5, 7, 38405), "col"),
    # TMA: ragged M, N, K edges (zero-filled boxes, clipped TMA store), a transposed B, the
    # pointer store (N = 1004: 2008-byte output rows; B transposed, so its rows are K = 520 long), warp specialisation and a flattened loop.
    ("persistent_tma", PersistentConfig(128, 256, 64, 3, 8), (1000, 1000, 1000), "row"),
    ("persistent_tma", PersistentConfig(128, 128, 64, 4, 8), (333, 4104, 1032), "col"),
    ("persistent_tma", PersistentConfig(128, 128, 128, 3, 4), (77, 1004, 520), "col"),
    ("persistent_tma", PersistentConfig(128, 256, 64, 3, 8, 8, True, False), (1000, 2056, 1000), "col"),
    ("persistent_tma", PersistentConfig(128, 128, 64, 4, 8, 8, False, True), (1000, 2056, 1000), "row"),
    # A split epilogue (column slices of the tile, TMA-stored or pointer-stored; N = 1004 takes the
    # pointer store), with the 4-stage ring the halved output box makes room for.
    ("persistent_tma", PersistentConfig(128, 256, 64, 4, 8, 8, False, True, 2), (1000, 2056, 1000), "row"),
    ("persistent_tma", PersistentConfig(128, 256, 64, 4, 8, 8, False, False, 4), (333, 1004, 520), "col"),
    # The tiled kernel (no atomics, but rows past M/N wrap around inside the operand rather
    # than being masked, and the output's stores are widened from its stride: both must stay inside
    # the allocations). A fifth field is the output's row stride (a view into a wider buffer,
    # whose other columns must stay untouched).
    ("triton_mm", TileConfig(64, 128, 64, 4, 4), (1000, 1000, 1000), "row"),
    ("triton_mm", TileConfig(64, 128, 64, 4, 4), (1000, 1000, 1000), "col", 1008),
    ("triton_mm", TileConfig(128, 64, 32, 3, 4), (333, 4097, 1025), "offset", 4102),
    ("triton_mm", TileConfig(16, 64, 128, 3, 4, 1), (1, 1531, 2049), "col"),
    ("triton_mm", TileConfig(64, 64, 64, 3, 4, 4), (77, 1004, 520), "col", 1005),
    ("triton_static", TileConfig(64, 128, 64, 3, 4), (300, 20001, 512), "row"),
    # DecomposeK's partials workspace and its sum spread over programs and slices (tiled.sum_blocks)
    ("decompose_k", DecomposeKConfig(112), (32, 32, 28672), "row"),
    ("decompose_k", DecomposeKConfig(7), (33, 65, 7007), "col"),
    ("decompose_k", DecomposeKConfig(13), (129, 67, 1690), "offset", 70),
    # odd N along a row-major B, which wraps (rn % N) where N >= BLOCK_N; M = 1 masks A's rows
    ("triton_mm", TileConfig(16, 128, 64, 4, 4), (1, 50257, 768), "row"),
    ("triton_static", TileConfig(64, 128, 64, 4, 4), (333, 4097, 1025), "row"),
    ("triton_static", TileConfig(128, 64, 32, 4, 8), (1021, 2053, 509), "offset", 2058),
    # triton_static's other forms (configs.STATIC_FORMS): the indexed K loop (its trip count compiled
    # in, a ragged last block masked), and an odd N wrapped with BLOCK_N contiguity stated, no mask
    ("triton_static", StaticConfig(64, 128, 64, 4, 4, 8, "indexed_wrap"), (333, 4097, 1025), "row"),
    ("triton_static", StaticConfig(128, 128, 64, 3, 4, 8, "indexed_wrap"), (300, 20001, 509), "offset", 20008),
    ("triton_static", StaticConfig(128, 128, 64, 3, 4, 8, "indexed"), (96, 50257, 768), "row"),
    ("triton_static", StaticConfig(16, 128, 64, 4, 4, 8, "indexed"), (1, 50257, 767), "col"),
]


DTYPE = getattr(torch, os.environ.get("SANITIZE_DTYPE", "bfloat16"))
# Relative tolerance against fp64: bf16's output rounding (2^-8) with room; fp32 as 3xTF32 measured
# 1.8-2.4e-7 on the H200 (gemmtune.precision), so 3e-5 (K up to 10^6 here) still catches a lost or doubled partial.
TOL = 3e-5 if DTYPE == torch.float32 else 8e-3


def operand(rows, cols, layout):
    if layout == "col":
        return torch.randn(cols, rows, device="cuda", dtype=DTYPE).t()
    if layout == "offset":
        return torch.randn(rows * cols + 1, device="cuda", dtype=DTYPE)[1:].view(rows, cols)
    return torch.randn(rows, cols, device="cuda", dtype=DTYPE)


# pad_copy (kernels.pad): (source rows, cols, padded rows, cols, layout); the source is read
# through masks at its own edges, so memcheck sees any read past it.
PAD_CASES = [(4095, 4095, 4096, 4096, "row"), (4095, 4095, 4096, 4096, "col"), (333, 1025, 333, 1032, "offset"),
             (1, 7, 1, 8, "row"), (768, 50257, 768, 50264, "col")]
ONLY = set(sys.argv[1].split(",")) if len(sys.argv) > 1 else None  # e.g. splitk,pad
ws = SplitKWorkspace()
bad = 0
if ONLY is None or "pad" in ONLY:
    from gemmtune.kernels.pad import zero_pad
    for r, c, rp, cp, lay in PAD_CASES:
        src = operand(r, c, lay)
        got = zero_pad(src, rp, cp, backend="triton")
        torch.cuda.synchronize()
        ok = torch.equal(got, torch.nn.functional.pad(src, (0, cp - c, 0, rp - r)))
        bad += not ok
        print(f"pad_copy {r}x{c} -> {rp}x{cp} {lay}: {'ok' if ok else 'WRONG'}", flush=True)
    # pad_pair: two operands in one launch (a pad+ mm's A and B), each through its own masks.
    from gemmtune.kernels.pad import pad_pair
    for (r1, c1, rp1, cp1, l1), (r2, c2, rp2, cp2, l2) in zip(PAD_CASES, PAD_CASES[2:] + PAD_CASES[:2]):
        s1, s2 = operand(r1, c1, l1), operand(r2, c2, l2)
        g1, g2 = pad_pair(s1, rp1, cp1, s2, rp2, cp2)
        torch.cuda.synchronize()
        ok = all(torch.equal(g, torch.nn.functional.pad(s, (0, cp - c, 0, rp - r)))
                 for g, s, r, c, rp, cp in ((g1, s1, r1, c1, rp1, cp1), (g2, s2, r2, c2, rp2, cp2)))
        bad += not ok
        print(f"pad_pair {r1}x{c1} {l1} + {r2}x{c2} {l2}: {'ok' if ok else 'WRONG'}", flush=True)
    # two batches (a pad+ bmm): a transposed batch and an offset one
    s1 = torch.randn(7, 129, 33, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
    s2 = torch.randn(8, 130, 67, device="cuda", dtype=torch.bfloat16)[1:, 1:, 2:]
    g1, g2 = pad_pair(s1, 33, 136, s2, 136, 72)
    torch.cuda.synchronize()
    ok = (torch.equal(g1, torch.nn.functional.pad(s1, (0, 7))) and
          torch.equal(g2, torch.nn.functional.pad(s2, (0, 7, 0, 7))))
    bad += not ok
    print(f"pad_pair batches 7x33x129 transposed + 7x129x65 offset: {'ok' if ok else 'WRONG'}", flush=True)
for fam, cfg, (m, n, k), lay, *ld in CASES:
    if ONLY is not None and fam not in ONLY:
        continue
    a = operand(m, k, "offset" if lay == "offset" else "row")
    b = operand(k, n, lay)
    for _ in range(2):  # the second launch reuses the workspace the first left behind
        buf = torch.full((m, ld[0] if ld else n), float("nan"), device="cuda", dtype=DTYPE)
        out = buf[:, :n]
        try:
            kernels.get(fam).run(a, b, out, cfg, workspace=ws)
        except Exception as e:  # noqa: BLE001 - a knob this triton cannot compile is not a memory error
            if cfg.__class__ is PersistentConfig and (cfg.warp_spec or cfg.flatten):
                print(f"{fam}:{cfg.id}: not compiled by this triton ({type(e).__name__})", flush=True)
                break
            if type(e).__name__ == "OutOfResources":  # fp32 tiles twice bf16's shared memory
                print(f"{fam}:{cfg.id}: skipped, {e}", flush=True)
                break
            raise
        torch.cuda.synchronize()
        res = compare(out, a.double() @ b.double(), TOL)
        spill = ld and not bool(buf[:, n:].isnan().all())  # a store past the view's columns
        bad += (not res.ok) + bool(spill)
        what = "wrote past its view" if spill else "ok" if res.ok else res.reason
        print(f"{fam}:{cfg.id} {m}x{n}x{k} B={lay}{f' ldc={ld[0]}' if ld else ''}: {what}", flush=True)
# Prepared launches (kernels.prepare_choice, what a dispatcher's cached calls run): the compiled
# kernels relaunched with new pointers (kernels.relaunch), the persistent kernel's descriptors
# rebased, the pad copies relaunched; new operands of the same layout on every call.
PREPARED = [("pad+persistent_tma:BM128-BN128-BK64-S4-W8-G8", (333, 4097, 1025), "offset"),
            ("pad+persistent_tma:BM128-BN128-BK32-S3-W8-G8", (333, 4097, 1025), "offset"),  # fits fp32
            ("pad+triton_mm:BM64-BN128-BK64-S3-W4-G8", (77, 1531, 2049), "col"),
            ("pad+aten", (777, 1531, 2049), "row"),
            # a row-major B: under SANITIZE_DTYPE=float32 (3xTF32) pad+ copies it K-major, ragged
            # (1000x777) and aligned with nothing to pad (precision.pads_b_kmajor)
            ("pad+triton_mm:BM64-BN64-BK32-S3-W4-G8", (515, 1000, 777), "row"),
            ("pad+triton_mm:BM64-BN64-BK32-S3-W4-G8", (512, 1024, 1024), "row"),
            ("pad+decompose_k:s8", (33, 65, 7007), "col"),
            ("decompose_k:s7", (33, 65, 7007), "col"),
            ("persistent_tma:BM128-BN128-BK64-S3-W8-G8", (1000, 1000, 1000), "col")]
if ONLY is None or "prepared" in ONLY:
    from gemmtune.configs import Choice
    for cid, (m, n, k), lay in PREPARED:
        choice = Choice.parse(cid)
        a, b = operand(m, k, "offset" if lay == "offset" else "row"), operand(k, n, lay)
        try:
            got = kernels.prepare_choice(choice, a, b, torch.empty(m, n, device="cuda", dtype=DTYPE),
                                         workspace=ws)
        except Exception as e:  # noqa: BLE001 - as above: fp32 tiles that do not fit are skipped, not failed
            if type(e).__name__ != "OutOfResources":
                raise
            print(f"prepared {cid}: skipped, {e}", flush=True)
            continue
        # None: no prepared launch for this choice here (a K-major pad+ copy under 3xTF32, by
        # design): the dispatcher runs it through run_choice, so that path is what is checked.
        via = "prepared" if got is not None else "run_choice"
        ok = got is None or got[0](a, b)
        for _ in range(2):
            a2, b2 = operand(m, k, "offset" if lay == "offset" else "row"), operand(k, n, lay)
            out = torch.empty(m, n, device="cuda", dtype=DTYPE)
            if got is None:
                try:
                    kernels.run_choice(choice, a2, b2, out, workspace=ws)
                except Exception as e:  # noqa: BLE001 - as above: an fp32 tile too big for shared memory
                    if type(e).__name__ != "OutOfResources":
                        raise
                    via = f"skipped ({e})"
                    break
            elif not got[0](a2, b2):
                ok = False
                break
            else:
                got[1](a2, b2, out)
            torch.cuda.synchronize()
            ok = ok and compare(out, a2.double() @ b2.double(), TOL).ok
        if via.startswith("skipped"):
            print(f"run_choice {cid}: {via}", flush=True)
            continue
        bad += not ok
        print(f"{via} {cid} {m}x{n}x{k} B={lay}: {'ok' if ok else 'WRONG or not matched'}", flush=True)
print("sanitize: all ok" if not bad else f"sanitize: {bad} WRONG")
sys.exit(1 if bad else 0)
