"""#15: what a read of B bytes costs in the bench's own harness, as B shrinks to decode sizes.

The bench's floor for a memory-bound shape is bytes / the read ceiling, and the ceiling is measured on
1 GiB. Decode GEMMs read 8-235 MB, and at 33 MB (8 x 4096 x 4096 bf16) the best kernel sits at 67% of
that floor while at 235 MB (16 x 28672 x 4096) it sits at 98%. This script times, with the bench's
timer (CUDA graphs of back-to-back launches cycling through input sets beyond the L2), kernels that
only read: torch.sum (fp32), a Triton streaming reduction over a few grid sizes, and torch.mv (cuBLAS's
GEMV); beside them cuBLAS mm and gemmtune's skinny strips at M = 8 on a Linear's weight (K-contiguous
B). For each kernel it fits time = t0 + bytes / bw over the ladder: t0 is the fixed cost per launch
that a bytes-only floor leaves out.

    python3 scripts/sessions/exp_read_ladder.py            (GPU only)
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import triton

from gemmtune.bench.readtime import _stream_sum  # the kernel the bench's read reference runs (session 60 wrote it here)
from gemmtune.bench.timing import CudaGraphTimer, sets_for
from gemmtune.configs import Choice
from gemmtune.kernels import skinny
from gemmtune.kernels.splitk import SplitKWorkspace

K = 4096
NS = (512, 1024, 2048, 4096, 6144, 8192, 14336, 28672)
SKINNY = ("BM16-BN64-BK256-SK1-S5-W4-dot-det", "BM16-BN32-BK512-SK1-S3-W4-dot-det",
          "BM16-BN64-BK256-SK2-S5-W4-dot-det", "BM8-BN4-BK1024-SK1-S1-W4-core-det")


def _fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares of time_us = t0 + bytes / (bw GB/s * 1e3): (t0 us, bw GB/s)."""
    xs = [b for b, _ in points]
    ys = [t for _, t in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, 1.0 / slope / 1e3


def _row(n: int, timer, l2: int, sms: int, ws) -> dict:
    """Every kernel's time at N = n (a [n, K] bf16 weight): one line of the ladder."""
    wbytes = n * K * 2
    sets = sets_for(wbytes, l2)
    ws_w = [torch.randn(n, K, dtype=torch.bfloat16, device="cuda") for _ in range(sets)]
    xs8 = [torch.randn(8, K, dtype=torch.bfloat16, device="cuda") for _ in range(sets)]
    v = [torch.randn(K, dtype=torch.bfloat16, device="cuda") for _ in range(sets)]
    out8 = torch.empty(8, n, dtype=torch.bfloat16, device="cuda")
    outv = torch.empty(n, dtype=torch.bfloat16, device="cuda")
    f32 = [w.view(torch.float32) for w in ws_w]  # the same bytes as fp32 for torch.sum
    acc = torch.empty((), dtype=torch.float32, device="cuda")
    res: dict[str, float] = {}

    def t(name, fn):
        try:
            res[name] = timer.measure(fn, sets).device_ms * 1e3
        except Exception as e:  # noqa: BLE001 - one kernel's failure must not lose the ladder
            print(f"  {name} at N={n}: {type(e).__name__}: {e}", flush=True)
            res[name] = float("inf")

    t("sum_fp32", lambda i: torch.sum(f32[i].view(-1), dim=0, out=acc))
    flat = [w.view(-1) for w in ws_w]
    numel = flat[0].numel()
    for progs_per_sm in (1, 2, 4, 8):
        for block in (2048, 8192):
            progs = sms * progs_per_sm
            per = triton.cdiv(triton.cdiv(numel, progs), block) * block
            grid = triton.cdiv(numel, per)
            part = torch.empty(grid, dtype=torch.float32, device="cuda")
            t(f"tri_read_p{progs_per_sm}_b{block}",
              lambda i, per=per, grid=grid, part=part, block=block:
              _stream_sum[(grid,)](flat[i], part, numel, per, BLOCK=block, num_warps=8))
    t("mv_cublas", lambda i: torch.mv(ws_w[i], v[i], out=outv))
    t("mm8_cublas", lambda i: torch.mm(xs8[i], ws_w[i].t(), out=out8))
    for cid in SKINNY:
        cfg = Choice.parse("skinny:" + cid).config
        t("skinny8_" + cid, lambda i, cfg=cfg: skinny.run(xs8[i], ws_w[i].t(), out8, cfg, workspace=ws))
    ref = torch.mm(xs8[0].double(), ws_w[0].t().double())
    skinny.run(xs8[0], ws_w[0].t(), out8, Choice.parse("skinny:" + SKINNY[0]).config, workspace=ws)
    err = ((out8.double() - ref).norm() / ref.norm()).item()
    tri_best = min(v_ for k, v_ in res.items() if k.startswith("tri_read"))
    res["tri_read_best"] = tri_best
    res["skinny8_best"] = min(v_ for k, v_ in res.items() if k.startswith("skinny8_"))
    floor = wbytes / 4368e3  # the bench's read ceiling on the H200 in session 58 (GB/s -> us)
    line = {"n": n, "mbytes": wbytes / 1e6, "sets": sets, "floor_us_4368": floor, "rel_err": err, **res}
    print(f"N={n:6d} {wbytes / 1e6:6.1f} MB floor {floor:6.2f} us | sum {res['sum_fp32']:6.2f} "
          f"tri {tri_best:6.2f} mv {res['mv_cublas']:6.2f} mm8 {res['mm8_cublas']:6.2f} "
          f"skinny8 {res['skinny8_best']:6.2f} | floor/tri {floor / tri_best:5.1%} "
          f"tri/skinny {tri_best / res['skinny8_best']:5.1%} err {err:.1e}", flush=True)
    return line


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    l2 = props.L2_cache_size
    sms = props.multi_processor_count
    timer = CudaGraphTimer(replays=15)
    rows = []
    ws = SplitKWorkspace()
    for n in NS:
        rows.append(_row(n, timer, l2, sms, ws))
        torch.cuda.empty_cache()
    print("\nfit time = t0 + bytes / bw over N >= 2048 (16-235 MB):")
    fits = {}
    for key in ("sum_fp32", "tri_read_best", "mv_cublas", "mm8_cublas", "skinny8_best"):
        pts = [(r["mbytes"] * 1e6, r[key]) for r in rows if r["n"] >= 2048]
        t0, bw = _fit(pts)
        fits[key] = {"t0_us": t0, "gbps": bw}
        print(f"  {key:14s} t0 {t0:5.2f} us  bw {bw:7.0f} GB/s")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"gpu": props.name, "torch": torch.__version__, "triton": triton.__version__,
                       "rows": rows, "fits": fits}, f, indent=1)


if __name__ == "__main__":
    main()
