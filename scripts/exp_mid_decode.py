"""GPU experiment (one device call): mid-size decode GEMMs (B of 3 to 25 MB, the layers of 0.5-3B
models), where cuBLAS runs at 33-49% of the HBM floor and no gemmtune family beat it in session
26's random suite. How close can any kernel get? Per shape:

- cuBLAS (torch.mm);
- ``stream``: the time to read B's bytes once with nothing else to do (a Triton kernel that sums
  B in contiguous chunks, best of a few grid sizes): what a GEMV of this size could reach;
- the best of skinny's sweep (scripts/exp_skinny.skinny_sweep), every output checked against fp64.

All L2-cold CUDA-graph device time (bench.timing.CudaGraphTimer). Writes mid_decode.json.

    python scripts/exp_mid_decode.py --out DIR
    python scripts/exp_mid_decode.py --drive M N K LAYOUT CHOICE   # one kernel, 20 launches (for ncu)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from exp_skinny import _operands, ceilings, precompile, skinny_sweep  # noqa: E402

from gemmtune import kernels  # noqa: E402
from gemmtune.bench.timing import CudaGraphTimer, sets_for  # noqa: E402
from gemmtune.configs import Choice  # noqa: E402
from gemmtune.device import DeviceInfo  # noqa: E402
from gemmtune.kernels.splitk import SplitKWorkspace  # noqa: E402

SHAPES = [(8, 1536, 4096, "row"), (8, 2816, 896, "row"), (32, 2816, 1536, "col"), (8, 1536, 7168, "row"),
          (1, 2048, 2048, "col"), (1, 8192, 2048, "col"), (1, 2048, 8192, "col"), (1, 896, 4864, "col"),
          (1, 4864, 896, "col"), (16, 2048, 2048, "col")]


@triton.jit
def _read(x_ptr, out_ptr, n, PER, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    start = pid * PER
    acc = tl.zeros([BLOCK], tl.float32)
    for i in range(start, start + PER, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc))


def stream_ms(bufs, timer, sms):
    """Best device ms to read one of ``bufs`` (flat tensors) once, over a few launch shapes."""
    n = bufs[0].numel()
    out = torch.empty(16 * sms, device="cuda", dtype=torch.float32)
    best = None
    for progs in (sms, 2 * sms, 4 * sms, 8 * sms):
        for block, warps in ((2048, 4), (4096, 8), (8192, 8)):
            per = -(-n // progs)
            per = -(-per // block) * block
            grid = (-(-n // per),)
            t = timer.measure(lambda i: _read[grid](bufs[i], out, n, per, BLOCK=block, num_warps=warps),
                              len(bufs)).device_ms
            if best is None or t < best[0]:
                best = (t, f"progs{grid[0]}-B{block}-W{warps}")
    return best


def wide_sweep(m, n, k, dev):
    """Session 26, call 3: more programs per shape than skinny's spaces give. The CUDA-core path
    with narrow strips (BLOCK_N 2..16: N / BLOCK_N programs with no split, where BLOCK_N >= 32 left
    half the SMs idle), and the tl.dot path at BLOCK_N 16 with 2..8 warps; splits 1, 2, 4, both
    reductions. Only configs that skinny's constraint accepts."""
    import itertools

    from gemmtune.kernels.skinny_spec import constraint
    from gemmtune.configs import SkinnyConfig
    from gemmtune.problem import Problem
    prob = Problem.from_sizes(m, n, k, "bf16")
    bm_core = max(1, min(16, 1 << max(0, (m - 1).bit_length())))
    bm_dot = max(16, 1 << max(0, (m - 1).bit_length()))
    out = []
    if m <= 16:
        for bn, bk, w, s, st, det in itertools.product((2, 4, 8, 16), (128, 256, 512, 1024, 2048), (2, 4, 8),
                                                      (1, 2, 4), (1, 3), (True, False)):
            if s == 1 and not det:
                continue
            out.append(SkinnyConfig(bm_core, bn, bk, s, st, w, False, det))
    for bn, bk, w, s, st, det in itertools.product((16, 32), (128, 256, 512), (2, 4, 8), (1, 2, 4), (3, 4, 6),
                                                  (True, False)):
        if s == 1 and not det:
            continue
        out.append(SkinnyConfig(bm_dot, bn, bk, s, st, w, True, det))
    return [c for c in out if -(-k // c.split_k) >= c.block_k and constraint(c, prob, dev) is None]


def drive(m, n, k, lay, cid):
    a, b = _operands(m, n, k, lay)
    out = torch.empty(m, n, device="cuda", dtype=a.dtype)
    if cid == "aten":
        for _ in range(20):
            torch.mm(a, b, out=out)
    else:
        ch, ws = Choice.parse(cid), SplitKWorkspace()
        fam = kernels.get(ch.family)
        for _ in range(20):
            fam.run(a, b, out, ch.config, workspace=ws)
    torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--drive", nargs=5)
    ap.add_argument("--wide", action="store_true", help="wide_sweep instead of exp_skinny's sweep")
    args = ap.parse_args()
    if args.drive:
        m, n, k, lay, cid = args.drive
        return drive(int(m), int(n), int(k), lay, cid)
    dev = DeviceInfo.from_torch()
    bw = ceilings()
    print(f"# {torch.cuda.get_device_name()} copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    timer = CudaGraphTimer(replays=10, target_ms_per_replay=1.0, max_launches=64, eager_calls=5)
    sweep = wide_sweep if args.wide else skinny_sweep
    precompile([((m, n, k, lay), [Choice("skinny", c).id for c in sweep(m, n, k, dev)])
                for m, n, k, lay in SHAPES])
    ws, rows = SplitKWorkspace(), []
    for m, n, k, lay in SHAPES:
        bytes_ = (m * k + k * n + m * n) * 2
        nsets = sets_for(bytes_, dev.l2_bytes, 32)
        ins = [_operands(m, n, k, lay) for _ in range(nsets)]
        outs = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(nsets)]
        ref = ins[0][0].double() @ ins[0][1].double()
        cub = timer.measure(lambda i: torch.mm(ins[i][0], ins[i][1], out=outs[i]), nsets).device_ms
        st = stream_ms([b.t().reshape(-1) if lay == "col" else b.reshape(-1) for _, b in ins], timer, dev.sm_count)
        best, t0, res = None, time.time(), {}
        for cfg in sweep(m, n, k, dev):
            ch = Choice("skinny", cfg)
            fam = kernels.get("skinny")
            try:
                outs[0].fill_(float("nan"))
                fam.run(ins[0][0], ins[0][1], outs[0], cfg, workspace=ws)
                torch.cuda.synchronize()
                err = ((outs[0].double() - ref).norm() / ref.norm()).item()
                if not err < 1e-2:
                    res[ch.id] = f"wrong {err:.1e}"
                    continue
                t = timer.measure(lambda i: fam.run(ins[i][0], ins[i][1], outs[i], cfg, workspace=ws), nsets).device_ms
            except Exception as e:  # noqa: BLE001 - recorded
                res[ch.id] = f"error: {str(e).splitlines()[0][:100]}"
                continue
            res[ch.id] = t
            if best is None or t < best[0]:
                best = (t, ch.id)
        cub2 = timer.measure(lambda i: torch.mm(ins[i][0], ins[i][1], out=outs[i]), nsets).device_ms
        floor = bytes_ / bw * 1e3
        row = {"M": m, "N": n, "K": k, "layout_b": lay, "bytes": bytes_, "floor_ms": floor, "cublas_ms": [cub, cub2],
               "stream_ms": st[0], "stream_cfg": st[1], "best_skinny": best, "skinny": res,
               "sweep_s": time.time() - t0}
        rows.append(row)
        print(f"{m}x{n}x{k} {lay}: {bytes_ / 1e6:.1f} MB floor {floor * 1e3:.2f}us | stream {st[0] * 1e3:.2f}us "
              f"({floor / st[0]:.0%}) {st[1]} | cuBLAS {cub * 1e3:.2f}/{cub2 * 1e3:.2f}us ({floor / cub:.0%}) | "
              f"skinny {best[0] * 1e3:.2f}us ({floor / best[0]:.0%}) {best[1]} [{len(res)} cfgs]", flush=True)
        ins = outs = ref = None  # free before the next shape
        if args.out:  # after every shape: a run cut short keeps what it measured
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / "mid_decode.json").write_text(json.dumps(
                {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                 "copy_bw": bw, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
