"""Is the GEMV strip's design what holds it at 78% of the floor on wide decode GEMVs? (#15; GPU only.)

Session 39's profile of skinny's best strip on 1 x 16384 x 2048 (BN4-BK512-W2; Nsight Compute,
benchmarks/results/2026-11-29-h200-s39/call2) found two limits that no config of the space
moves (exp_gemv_wide swept BN 2-16, BK 512-2048, 4-8 warps, S1-S3; all at 78% or less):

- occupancy: 79 registers a thread cap it at 12 programs of 2 warps an SM (37.5% theoretical),
  because the CUDA-core path holds the whole [BM, BN, BK] fp32 product in registers across the
  K loop and reduces it after;
- a tail: 4096 programs are 2.59 waves, and the last wave's 0.59 leaves SMs idle.

cuBLAS's kernel there runs one wave of 128 CTAs at 14% occupancy and still reads faster.

This script times script-local GEMV kernels, each a design change, against skinny's default
strips and cuBLAS on the decode GEMVs of exp_gemv_wide (M = 1, a Linear's K-contiguous weight):

- ``prod``: skinny's design, written plainly: the product accumulated over K, reduced at the end;
- ``reduce``: the product reduced to [BN] at every K step (fewer registers: more programs an SM);
- ``persist``: ``reduce`` over a persistent grid of ``per_sm`` programs an SM, each walking the
  strips ``pid, pid + grid, ...`` (no tail wave, no launch of thousands of programs).

Every output is checked against fp64 first. Times are L2-cold CUDA-graph replays
(bench.timing.CudaGraphTimer, as the tuner and exp_gemv_wide time). The floor is the weight's
bytes at the read bandwidth measured in the same run.

    python scripts/exp_gemv_kernel.py --out $OUT/gemv_kernel.json            # GPU
    TRITON_INTERPRET=1 python scripts/exp_gemv_kernel.py --dry-run            # CPU: every kernel against fp64
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import exp_gemv_wide  # noqa: E402 - its ncu runner for skinny's choices
from exp_gemv_wide import (SHAPES, _operands, default_strips, read_bandwidth, time_verified,  # noqa: E402
                           write_rows)


@triton.jit
def _gemv(w_ptr, x_ptr, y_ptr, N, K, stride_wn, BN: tl.constexpr, BK: tl.constexpr,
          REDUCE_EACH: tl.constexpr, PERSIST: tl.constexpr):
    """y[N] = W[N, K] @ x[K] (W row-major): strips of BN rows, K in BK steps.

    REDUCE_EACH: the [BN, BK] product summed over K at each step (acc is [BN]); else accumulated
    as [BN, BK] and summed once after the loop (skinny's CUDA-core design).
    PERSIST: the grid is fixed and each program takes the strips pid, pid + grid, ...; else one
    strip a program (the same loop, run once)."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BK)
    n_strips = tl.cdiv(N, BN)
    if PERSIST:
        start = pid
        stride = tl.num_programs(0)
    else:
        start = pid
        stride = n_strips
    for strip in range(start, n_strips, stride):
        rows = strip * BN + tl.arange(0, BN)
        rmask = rows < N
        wp = w_ptr + rows[:, None] * stride_wn + cols[None, :]
        if REDUCE_EACH:
            acc = tl.zeros([BN], dtype=tl.float32)
            for k in range(0, K, BK):
                km = k + cols < K
                w = tl.load(wp + k, mask=rmask[:, None] & km[None, :], other=0.0)
                xv = tl.load(x_ptr + k + cols, mask=km, other=0.0).to(tl.float32)
                acc += tl.sum(w.to(tl.float32) * xv[None, :], axis=1)
        else:
            prod = tl.zeros([BN, BK], dtype=tl.float32)
            for k in range(0, K, BK):
                km = k + cols < K
                w = tl.load(wp + k, mask=rmask[:, None] & km[None, :], other=0.0)
                xv = tl.load(x_ptr + k + cols, mask=km, other=0.0).to(tl.float32)
                prod += w.to(tl.float32) * xv[None, :]
            acc = tl.sum(prod, axis=1)
        tl.store(y_ptr + rows, acc.to(y_ptr.dtype.element_ty), mask=rmask)


def variants(k: int) -> list[dict]:
    """The designs and tiles timed on a shape of depth K: BK never past K's next power of two,
    and the [BN, BK] tile at most 64 fp32 values a thread (skinny's MAX_CORE_REGS)."""
    kmax = 1 << max(0, (k - 1).bit_length())
    out = []
    for design in ("prod", "reduce"):
        for bn in (2, 4, 8):
            for bk in (512, 1024, 2048):
                for w in (2, 4, 8):
                    if bk > kmax or bn * bk > 64 * 32 * w:
                        continue
                    out.append({"design": design, "bn": bn, "bk": bk, "warps": w, "per_sm": 0})
    for bn, bk, w, per_sm in ((4, 512, 2, 8), (4, 512, 2, 16), (4, 1024, 4, 4), (4, 1024, 4, 8),
                              (2, 1024, 4, 8), (8, 512, 4, 8), (4, 2048, 4, 4), (4, 2048, 8, 4)):
        if bk <= kmax:
            out.append({"design": "persist", "bn": bn, "bk": bk, "warps": w, "per_sm": per_sm})
    uniq = {json.dumps(v, sort_keys=True): v for v in out}
    return list(uniq.values())


def vid(v: dict) -> str:
    s = f"{v['design']}-BN{v['bn']}-BK{v['bk']}-W{v['warps']}"
    return s + (f"-P{v['per_sm']}" if v["per_sm"] else "")


def launch(v: dict, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, sms: int) -> None:
    """y = w @ x with variant v (w [N, K] row-major, x [K], y [N])."""
    n, k = w.shape
    strips = triton.cdiv(n, v["bn"])
    grid = (min(strips, v["per_sm"] * sms),) if v["per_sm"] else (strips,)
    _gemv[grid](w, x, y, n, k, w.stride(0), BN=v["bn"], BK=v["bk"], REDUCE_EACH=v["design"] != "prod",
                PERSIST=bool(v["per_sm"]), num_warps=v["warps"])


def dry_run() -> int:
    """Every variant against fp64 on small odd shapes (the interpreter: fp32 operands)."""
    g = torch.Generator().manual_seed(0)
    worst = 0.0
    for n, k in ((1, 1), (7, 300), (33, 1031), (64, 2048), (131, 517)):
        w = torch.randn(n, k, generator=g)
        x = torch.randn(k, generator=g)
        ref = w.double() @ x.double()
        for v in variants(k):
            y = torch.full((n,), float("nan"))
            launch(v, w, x, y, sms=2)
            err = ((y.double() - ref).norm() / ref.norm()).item()
            worst = max(worst, err)
            if not err < 1e-5:
                print(f"WRONG {vid(v)} on {n}x{k}: rel err {err:.2e}")
                return 1
    assert all(parse_vid(vid(v)) == v for v in variants(2048))
    print(f"all variants match fp64 (worst rel err {worst:.1e})")
    return 0


def parse_vid(s: str) -> dict:
    """The inverse of ``vid``: 'reduce-BN2-BK2048-W2' or 'persist-BN8-BK512-W4-P8'."""
    design, *parts = s.split("-")
    v = {"design": design, "per_sm": 0}
    for p in parts:
        key = {"BN": "bn", "BK": "bk", "W": "warps", "P": "per_sm"}[p.rstrip("0123456789")]
        v[key] = int(p[len(p.rstrip("0123456789")):])
    return v


def ncu_run(shape: str, ids: list[str]) -> int:
    """Each script variant called 3 times on one shape, then the ``skinny:`` choices (and cuBLAS)
    through exp_gemv_wide's runner, for Nsight Compute."""
    from gemmtune.device import DeviceInfo
    m, n, k = (int(x) for x in shape.split("x"))
    a, b = _operands(m, n, k)
    out = torch.empty(m, n, device="cuda", dtype=a.dtype)
    sms = DeviceInfo.from_torch().sm_count
    for cid in ids:
        if not cid.startswith("skinny:"):
            for _ in range(3):
                launch(parse_vid(cid), b.t(), a[0], out[0], sms)
    torch.cuda.synchronize()
    return exp_gemv_wide.ncu_run(shape, [c for c in ids if c.startswith("skinny:")])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="JSON to write")
    ap.add_argument("--budget-s", type=float, default=240, help="stop starting new shapes after this")
    ap.add_argument("--dry-run", action="store_true", help="CPU (TRITON_INTERPRET=1): check every kernel, no timing")
    ap.add_argument("--ncu-run", metavar="MxNxK", help="run --choices on one shape for ncu, no timing")
    ap.add_argument("--choices", default="", help="comma-separated variant ids (vid) and skinny: choice ids")
    args = ap.parse_args()
    if args.ncu_run:
        return ncu_run(args.ncu_run, [c for c in args.choices.split(",") if c])
    if args.dry_run:
        return dry_run()
    if not args.out:
        ap.error("--out is required (except with --dry-run)")
    from gemmtune import kernels
    from gemmtune.bench.timing import CudaGraphTimer, sets_for
    from gemmtune.device import DeviceInfo

    dev = DeviceInfo.from_torch()
    t0 = time.time()
    bw = read_bandwidth()
    print(f"# {torch.cuda.get_device_name()}: read bandwidth {bw / 1e12:.2f} TB/s (fp32 sum, measured)", flush=True)
    timer = CudaGraphTimer(replays=10, target_ms_per_replay=1.0, max_launches=64, eager_calls=5)
    skinny = kernels.get("skinny")
    rows = []
    for m, n, k in SHAPES:
        if time.time() - t0 > args.budget_s:
            print("# budget spent, stopping", flush=True)
            break
        weight = n * k * 2
        nsets = sets_for(weight + (m * k + m * n) * 2, dev.l2_bytes, 32)
        ins = [_operands(m, n, k) for _ in range(nsets)]  # a [1, K], b = W.T [K, N] (W row-major)
        outs = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(nsets)]
        ref = ins[0][0].double() @ ins[0][1].double()
        floor_us = weight / bw * 1e6
        res = {"M": m, "N": n, "K": k, "floor_us": floor_us, "times": {}}
        res["cublas_us"] = timer.measure(lambda i: torch.mm(ins[i][0], ins[i][1], out=outs[i]), nsets).device_ms * 1e3
        for cfg in default_strips(m, n, k, dev):
            res["times"]["skinny:" + cfg.id] = time_verified(
                timer, lambda i, c=cfg: skinny.run(ins[i][0], ins[i][1], outs[i], c), outs[0], ref, nsets)
        for v in variants(k):
            res["times"][vid(v)] = time_verified(
                timer, lambda i, v=v: launch(v, ins[i][1].t(), ins[i][0][0], outs[i][0], dev.sm_count),
                outs[0], ref, nsets)
        res["cublas_us_after"] = timer.measure(lambda i: torch.mm(ins[i][0], ins[i][1], out=outs[i]), nsets).device_ms * 1e3
        ok = {c: t for c, t in res["times"].items() if isinstance(t, float)}
        best = {}
        for group in ("skinny", "prod", "reduce", "persist"):
            g = {c: t for c, t in ok.items() if c.startswith(group)}
            if g:
                c = min(g, key=g.get)
                best[group] = (c, g[c])
        res["best"] = {grp: {"id": c, "us": t} for grp, (c, t) in best.items()}
        cub = res["cublas_us"]
        print(f"{m}x{n}x{k}: floor {floor_us:.1f} us, cuBLAS {cub:.1f} ({floor_us / cub:.0%}) | "
              + " | ".join(f"{grp} {t:.1f} ({floor_us / t:.0%}, {cub / t:.2f}x) {c}" for grp, (c, t) in best.items())
              + f" [cuBLAS after {res['cublas_us_after']:.1f}]", flush=True)
        rows.append(res)
        ins = outs = ref = None
        torch.cuda.empty_cache()
        write_rows(args.out, bw, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
