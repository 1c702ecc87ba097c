#!/usr/bin/env python3
"""GPU experiment (#15, splitk group): where a fused split-K launch spends its time on small M x N
with a long K. For each shape and each sampled tile/split, four timings in one process (L2-cold
CUDA-graph device time, bench.timing.CudaGraphTimer), beside cuBLAS:

* ``atomic``: the fused split-K, fp32 atomics into one tile-major block per tile (SPLIT_MODE 2);
* ``det``: the fused split-K, one block per slice, the last arriver sums them (SPLIT_MODE 1);
* ``part``: the same programs with no reduction at all: each slice's fp32 partial is stored to its
  own [S, M, N] plane (SPLIT_MODE 0, DecomposeK's first launch). It streams A and B exactly as the
  fused kernels do, so ``atomic - part`` is the price of the reduction, and ``part`` against the
  floor is what the streaming itself reaches;
* ``sum``: the separate sum kernel over those planes (DecomposeK's second launch);
* ``fixup``: SPLIT_MODE 3, the partials stored as in ``det`` and summed by all of the tile's programs
  at once (tile_epilogue.parallel_fixup), on grids of at most one program per SM.

    python scripts/exp_splitk_reduce.py --out $OUT/splitk_reduce.json
    ncu --profile-from-start off ... python scripts/exp_splitk_reduce.py --ncu $OUT/splitk_reduce.json

Every fused output is checked against fp64 before it is timed, and the plane sum of ``part``.
``--ncu`` re-runs, once each inside one profiled range, the best atomic config of the chosen shapes,
its ``part`` twin and cuBLAS.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

SHAPES = [(32, 32, 28672, "bfloat16"), (64, 64, 65536, "bfloat16"), (128, 128, 32768, "bfloat16"),
          (256, 256, 16384, "bfloat16"), (200, 200, 20000, "bfloat16"), (64, 64, 32768, "float32")]
TILES = ((16, 16, 128, 4, 2), (32, 32, 128, 4, 4), (32, 64, 128, 4, 4), (64, 64, 64, 4, 4),
         (64, 64, 128, 3, 4), (128, 64, 64, 4, 4), (128, 128, 64, 4, 8), (64, 128, 64, 4, 4))
SPLITS = (8, 16, 32, 64, 128)
NCU_SHAPES = {(128, 128, 32768), (256, 256, 16384), (32, 32, 28672)}


def configs(m, n, k, dtype, sms):
    from gemmtune.configs import SplitKConfig, cdiv
    out = []
    for (bm, bn, bk, st, w), s in itertools.product(TILES, SPLITS):
        if bm > 2 * max(16, m) or bn > 2 * max(16, n):
            continue
        if dtype == "float32":
            bk = min(bk, 64)
        tiles = cdiv(m, bm) * cdiv(n, bn)
        per = cdiv(cdiv(k, s), bk) * bk
        if not sms // 2 <= tiles * s <= 4 * sms or per < 2 * bk:
            continue
        out.append(SplitKConfig(bm, bn, bk, st, w, 8, s, False))
    return out


def launches(a, b, out, cfg, ws, planes):
    """(name, launch(a, b, out)) for the four variants of ``cfg``."""
    from dataclasses import replace

    from gemmtune.kernels import splitk
    from gemmtune.kernels.tiled import launch_sum_splits, launch_tiled, tile_kwargs
    det = replace(cfg, deterministic=True)
    per = splitk.k_per_split(a.shape[1], cfg)

    def part(a, b, out):
        launch_tiled(a, b, planes, k_per_split=per, split_mode=0, stride_cz=planes.stride(0),
                     **tile_kwargs(cfg, False))
    p = splitk.plan(a.shape[0], b.shape[1], a.shape[1], det)

    def fixup(a, b, out):
        launch_tiled(a, b, out, k_per_split=per, split_mode=3,
                     ws=ws.partials(p["workspace_numel"], True, a.device), locks=ws.counters(p["tiles"], a.device),
                     **tile_kwargs(cfg, False))
    out = [("atomic", lambda a, b, o: splitk.run(a, b, o, cfg, workspace=ws)),
           ("det", lambda a, b, o: splitk.run(a, b, o, det, workspace=ws)),
           ("part", part),
           ("sum", lambda a, b, o: launch_sum_splits(planes, o))]
    # Mode 3 waits for the tile's programs: only grids that one wave holds (a cooperative launch
    # would refuse the rest; this keeps a hang out of the experiment even if it did not).
    if p["tiles"] * p["splits"] <= torch.cuda.get_device_properties(a.device).multi_processor_count:
        out.append(("fixup", fixup))
    return out


def read_bandwidth():
    """Bytes/s of a bf16 GEMV over a 1 GiB matrix (cuBLAS): the read ceiling the bench uses."""
    w = torch.randn(2**15, 2**14, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(2**14, 1, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        w @ x
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    s.record()
    for _ in range(20):
        w @ x
    e.record()
    e.synchronize()
    bw = w.numel() * 2 * 20 / (s.elapsed_time(e) * 1e-3)
    del w
    torch.cuda.empty_cache()
    return bw


def sweep(args):
    from gemmtune.bench.timing import CudaGraphTimer, sets_for
    from gemmtune.device import DeviceInfo
    from gemmtune.kernels.splitk import SplitKWorkspace, plan
    dev = DeviceInfo.from_torch()
    bw = read_bandwidth()
    print(f"# {torch.cuda.get_device_name()}: read bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    timer = CudaGraphTimer(replays=10, target_ms_per_replay=1.0, max_launches=64, eager_calls=1)
    ws = SplitKWorkspace()
    rows = []
    t0 = time.time()
    for m, n, k, dt in SHAPES:
        dtype = getattr(torch, dt)
        size = dtype.itemsize
        bytes_ = (m * k + k * n + m * n) * size
        floor_ms = bytes_ / bw * 1e3
        nsets = sets_for(bytes_, dev.l2_bytes, 32)
        ins = [(torch.randn(m, k, device="cuda", dtype=dtype), torch.randn(k, n, device="cuda", dtype=dtype))
               for _ in range(nsets)]
        outs = [torch.empty(m, n, device="cuda", dtype=dtype) for _ in range(nsets)]
        ref = ins[0][0].double() @ ins[0][1].double()
        cub = timer.measure(lambda i: torch.mm(*ins[i], out=outs[i]), nsets).device_ms
        row = {"M": m, "N": n, "K": k, "dtype": dt, "floor_ms": floor_ms, "cublas_ms": cub, "configs": {}}
        for cfg in configs(m, n, k, dt, dev.sm_count):
            if time.time() - t0 > args.budget_s:
                break
            p = plan(m, n, k, cfg)
            planes = torch.empty((p["splits"], m, n), device="cuda", dtype=torch.float32)
            res = {"splits": p["splits"], "tiles": p["tiles"], "programs": p["tiles"] * p["splits"]}
            for name, fn in launches(ins[0][0], ins[0][1], outs[0], cfg, ws, planes):
                try:
                    if name != "sum":
                        outs[0].fill_(float("nan"))
                    fn(ins[0][0], ins[0][1], outs[0])
                    torch.cuda.synchronize()
                    got = planes.double().sum(0) if name == "part" else outs[0].double()
                    err = ((got - ref).norm() / ref.norm()).item()
                    if name != "sum" and not err < 1e-2:
                        res[name] = f"wrong {err:.2e}"
                        continue
                    res[name] = timer.measure(lambda i, fn=fn: fn(ins[i][0], ins[i][1], outs[i]), nsets).device_ms
                except Exception as e:  # noqa: BLE001 - recorded per variant
                    res[name] = f"error: {str(e).splitlines()[0][:160]}"
            row["configs"][cfg.id] = res
            del planes
        row["cublas_ms_after"] = timer.measure(lambda i: torch.mm(*ins[i], out=outs[i]), nsets).device_ms
        ok = {c: r for c, r in row["configs"].items() if isinstance(r.get("atomic"), float)}
        line = f"{m}x{n}x{k} {dt}: floor {floor_ms * 1e3:.2f} us, cuBLAS {cub * 1e3:.2f} us ({floor_ms / cub:.0%})"
        if ok:
            best = min(ok, key=lambda c: ok[c]["atomic"])
            r = ok[best]
            row["best_atomic"] = best
            f = {x: r[x] * 1e3 if isinstance(r.get(x), float) else float("nan")
                 for x in ("atomic", "det", "part", "sum", "fixup")}
            line += (f" | best atomic {best}: atomic {f['atomic']:.2f} det {f['det']:.2f} part {f['part']:.2f} "
                     f"sum {f['sum']:.2f} fixup {f['fixup']:.2f} us ({floor_ms * 1e3 / f['atomic']:.0%} of floor, "
                     f"{cub * 1e3 / f['atomic']:.2f}x)")
            fx = {c: ok[c]["fixup"] for c in ok if isinstance(ok[c].get("fixup"), float)}
            if fx:
                bf = min(fx, key=fx.get)
                row["best_fixup"] = bf
                line += (f" | best fixup {bf}: {fx[bf] * 1e3:.2f} us ({floor_ms / fx[bf]:.0%} of floor, "
                         f"{cub / fx[bf]:.2f}x)")
            bp = min((c for c in ok if isinstance(ok[c].get("part"), float)), key=lambda c: ok[c]["part"], default=None)
            if bp:
                row["best_part"] = bp
                line += f" | fastest part {bp}: {ok[bp]['part'] * 1e3:.2f} us ({floor_ms / ok[bp]['part']:.0%} of floor)"
        print(line, flush=True)
        rows.append(row)
        ins = outs = ref = None  # frees the operands before the next shape
        torch.cuda.empty_cache()
        Path(args.out).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                                              "triton": __import__("triton").__version__, "read_bw": bw,
                                              "rows": rows}, indent=1))
    return 0


def profile(path):
    from gemmtune.configs import Choice
    from gemmtune.kernels.splitk import SplitKWorkspace, plan
    ws = SplitKWorkspace()
    for row in json.loads(Path(path).read_text())["rows"]:
        m, n, k = row["M"], row["N"], row["K"]
        if (m, n, k) not in NCU_SHAPES or "best_atomic" not in row:
            continue
        dtype = getattr(torch, row["dtype"])
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(k, n, device="cuda", dtype=dtype)
        out = torch.empty(m, n, device="cuda", dtype=dtype)
        picks = [row["best_atomic"]] + ([row["best_part"]] if row.get("best_part") not in (None, row["best_atomic"]) else [])
        runs = []
        for cid in picks:
            cfg = Choice.parse(f"splitk:{cid}").config
            planes = torch.empty((plan(m, n, k, cfg)["splits"], m, n), device="cuda", dtype=torch.float32)
            for name, fn in launches(a, b, out, cfg, ws, planes):
                if name in ("atomic", "part", "fixup") and (cid == row["best_atomic"] or name == "part"):
                    fn(a, b, out)
                    runs.append((f"{m}x{n}x{k} {name} {cid}", fn))
        torch.mm(a, b, out=out)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        for label, fn in runs:
            print("ncu:", label, file=sys.stderr, flush=True)
            fn(a, b, out)
        torch.mm(a, b, out=out)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--ncu", help="profile the picks of this sweep JSON (run under ncu --profile-from-start off)")
    ap.add_argument("--budget-s", type=float, default=240)
    args = ap.parse_args()
    if args.ncu:
        return profile(args.ncu)
    return sweep(args)


if __name__ == "__main__":
    sys.exit(main())
