"""Can a GEMV read an odd-N row-major B with 16-byte loads? (#15, gpt2_lmhead_m1's class; GPU timing.)

The public decode group's gpt2_lmhead_m1 (1 x 50257 x 768 bf16, B = W as [K, N], N contiguous) runs
at 67% of the HBM floor on skinny's best strip (session 43: 26.8 us against a 17.97 us floor). With N
odd, row k of B starts at an address that is only 2-byte aligned, so no strip can prove a 16-byte
vector: every load of B is a 2-byte one.

The design timed here reads B as the flat array it is. Program p owns output columns
[n0, n0 + BN - VEC) (VEC = 16 bytes / element size). For each row k it loads the BN elements that
start at the 16-byte boundary at or before B[k, n0]: one aligned, unmasked vector run per row (the
columns just before n0 and after the block belong to a neighbour and are thrown away). The row's
window is shifted by s_k = (offset of B[k, n0]) mod VEC; since N * VEC = 0 mod VEC, s_k depends only
on k mod VEC. So the kernel keeps VEC accumulator rows, one per class of k mod VEC, each adding its
rows unshifted, and aligns the VEC rows once at the end (tl.gather) before summing them: the shift is
paid once per program, not once per load.

Every output is checked against fp64 first; times are L2-cold CUDA-graph replays (bench.timing's
CudaGraphTimer, as the tuner times), against cuBLAS and skinny's default-space one-slice strips for
the same problem, in one process.

    python scripts/exp_gemv_oddn.py --out $OUT/gemv_oddn.json             # GPU
    TRITON_INTERPRET=1 python scripts/exp_gemv_oddn.py --dry-run           # CPU: every variant against fp64
    python scripts/exp_gemv_oddn.py --ncu-run 1x50257x768 --choices ID,...  # for Nsight Compute
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@triton.jit
def _window(a_ptr, b_ptr, k0, K, stride_ak, stride_bk, b_off, n0, end,
            BN: tl.constexpr, BK: tl.constexpr, VEC: tl.constexpr, MASKED: tl.constexpr):
    """Rows k0 .. k0 + BK of B, each row's BN-wide window from the 16-byte boundary at or before
    B[k, n0], and a's matching values (zeros past K)."""
    j = tl.arange(0, BN)
    k = k0 + tl.arange(0, BK)
    kmask = k < K
    flat = b_off + k.to(tl.int64) * stride_bk + n0
    offs = ((flat // VEC) * VEC)[:, None] + j[None, :]
    if MASKED:  # the last column block: the last row's window may pass the end of B
        m = kmask[:, None] & (offs < end)
    else:
        m = kmask[:, None]
    tile = tl.load(b_ptr + offs, mask=m, other=0.0)
    x = tl.load(a_ptr + k * stride_ak, mask=kmask, other=0.0)
    return tile, x


@triton.jit
def _accumulate(acc, a_ptr, b_ptr, K, stride_ak, stride_bk, b_off, n0, end,
                BN: tl.constexpr, BK: tl.constexpr, VEC: tl.constexpr, MASKED: tl.constexpr,
                PREFETCH: tl.constexpr):
    """acc[VEC, BN] += rows of B, each row's aligned window in the accumulator row of its class.
    PREFETCH: the next rows' loads are issued before this step's products (Triton pipelines only
    loads that feed a tl.dot; this doubles the bytes in flight per program)."""
    if PREFETCH:
        tile, x = _window(a_ptr, b_ptr, 0, K, stride_ak, stride_bk, b_off, n0, end, BN, BK, VEC, MASKED)
        for k0 in range(BK, K + BK, BK):
            nt, nx = _window(a_ptr, b_ptr, k0, K, stride_ak, stride_bk, b_off, n0, end, BN, BK, VEC, MASKED)
            p = tile.to(tl.float32) * x.to(tl.float32)[:, None]
            acc += tl.sum(tl.reshape(p, (BK // VEC, VEC, BN)), axis=0)
            tile, x = nt, nx
    else:
        for k0 in range(0, K, BK):
            tile, x = _window(a_ptr, b_ptr, k0, K, stride_ak, stride_bk, b_off, n0, end, BN, BK, VEC, MASKED)
            p = tile.to(tl.float32) * x.to(tl.float32)[:, None]
            acc += tl.sum(tl.reshape(p, (BK // VEC, VEC, BN)), axis=0)
    return acc


@triton.jit
def _accumulate_dot(acc, a_ptr, b_ptr, K, stride_ak, stride_bk, b_off, n0, end,
                    BN: tl.constexpr, BK: tl.constexpr, VEC: tl.constexpr, MASKED: tl.constexpr):
    """acc[16, BN] += the same class sums as ``_accumulate``, as one tl.dot a step: row c of the
    [16, BK] left operand holds a[k] where k = c mod VEC and zero elsewhere (rows VEC.. are zero), so
    the product's row c is class c's sum. The tensor cores are idle at M = 1 anyway; what the dot
    buys is Triton's software pipeline, which only streams loads that feed a tl.dot (session 47:
    the elementwise form had one step's loads in flight a program, ~60% of the DRAM bandwidth)."""
    cls = tl.arange(0, 16)[:, None]
    kk = tl.arange(0, BK)[None, :] % VEC
    for k0 in range(0, K, BK):
        tile, x = _window(a_ptr, b_ptr, k0, K, stride_ak, stride_bk, b_off, n0, end, BN, BK, VEC, MASKED)
        a2 = tl.where(cls == kk, x[None, :], 0.0).to(tile.dtype)
        acc = tl.dot(a2, tile, acc)
    return acc


@triton.jit
def _gemv_shift(a_ptr, b_ptr, c_ptr, N, K, stride_ak, stride_bk, b_off,
                BN: tl.constexpr, BK: tl.constexpr, VEC: tl.constexpr, PREFETCH: tl.constexpr,
                DOT: tl.constexpr = False):
    """c[N] = a[K] @ B[K, N]; B[k, n] = b_ptr[b_off + k * stride_bk + n], b_ptr 16-byte aligned."""
    pid = tl.program_id(0)
    OUT: tl.constexpr = BN - VEC
    n0 = pid * OUT
    end = b_off + (K - 1).to(tl.int64) * stride_bk + N
    if DOT:
        acc16 = tl.zeros([16, BN], dtype=tl.float32)
        if n0 + BN <= N:
            acc16 = _accumulate_dot(acc16, a_ptr, b_ptr, K, stride_ak, stride_bk, b_off, n0, end, BN, BK, VEC, False)
        else:
            acc16 = _accumulate_dot(acc16, a_ptr, b_ptr, K, stride_ak, stride_bk, b_off, n0, end, BN, BK, VEC, True)
        # rows VEC.. hold zeros; keep the first VEC (a reshape-free slice: a masked sum of 16 / VEC blocks)
        acc = tl.sum(tl.reshape(acc16, (16 // VEC, VEC, BN)), axis=0)
    else:
        acc = tl.zeros([VEC, BN], dtype=tl.float32)
        if n0 + BN <= N:  # no row's window passes its own row's end
            acc = _accumulate(acc, a_ptr, b_ptr, K, stride_ak, stride_bk, b_off, n0, end, BN, BK, VEC, False, PREFETCH)
        else:
            acc = _accumulate(acc, a_ptr, b_ptr, K, stride_ak, stride_bk, b_off, n0, end, BN, BK, VEC, True, PREFETCH)
    j = tl.arange(0, BN)
    cls = tl.arange(0, VEC).to(tl.int64)
    s = (b_off + cls * stride_bk + n0) % VEC  # the shift of class i (rows k = i mod VEC)
    idx = tl.minimum(j[None, :] + s[:, None], BN - 1).to(tl.int32)
    out = tl.sum(tl.gather(acc, idx, axis=1), axis=0)
    cols = n0 + j
    tl.store(c_ptr + cols, out.to(c_ptr.dtype.element_ty), mask=(j < OUT) & (cols < N))


def launch(v: dict, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    """c[1, N] = a[1, K] @ b[K, N], b with unit column stride (any row stride, any offset)."""
    assert a.shape[0] == 1 and b.stride(1) == 1
    k, n = b.shape
    es = b.element_size()
    vec = 16 // es
    off = (b.data_ptr() % 16) // es
    base = b.as_strided((1,), (1,), b.storage_offset() - off) if off else b  # its 16-byte boundary
    bn = v["bn"]
    grid = (triton.cdiv(n, bn - vec),)
    extra = {"num_stages": v["stages"]} if v.get("dot") else {}
    _gemv_shift[grid](a, base, c, n, k, a.stride(1), b.stride(0), off, BN=bn, BK=v["bk"], VEC=vec,
                      PREFETCH=v.get("pf", False), DOT=bool(v.get("dot")), num_warps=v["warps"], **extra)


def variants(k: int, vec: int, dot_only: bool = False) -> list[dict]:
    """``dot_only``: the tl.dot form, plus session 47's best elementwise window as a reference."""
    out = []
    for bn in (() if dot_only else (64, 128, 256, 512)):
        for bk in (8, 16, 32, 64):
            for w in (2, 4, 8):
                if bk < vec or bn <= vec or bn * bk > 64 * 32 * w:  # at most 64 product values a thread
                    continue
                out.append({"bn": bn, "bk": bk, "warps": w})
                out.append({"bn": bn, "bk": bk, "warps": w, "pf": True})
    if vec == 8:  # the tl.dot form: 16-bit operands only (an fp32 dot would round to TF32)
        for bn in (64, 128, 256):
            for bk in (32, 64, 128):
                for w in (4, 8):
                    for st in (3, 4, 6):
                        if bn * bk * 2 * st > 160 * 1024:  # the stages' B tiles in shared memory
                            continue
                        out.append({"bn": bn, "bk": bk, "warps": w, "dot": True, "stages": st})
    if dot_only:
        out.append({"bn": 64, "bk": 32, "warps": 2})
    return out


def vid(v: dict) -> str:
    if v.get("dot"):
        return f"shift-BN{v['bn']}-BK{v['bk']}-W{v['warps']}-dot{v['stages']}"
    return f"shift-BN{v['bn']}-BK{v['bk']}-W{v['warps']}" + ("-PF" if v.get("pf") else "")


def parse_vid(s: str) -> dict:
    _, bn, bk, w, *more = s.split("-")
    v = {"bn": int(bn[2:]), "bk": int(bk[2:]), "warps": int(w[1:])}
    if more and more[0].startswith("dot"):
        return v | {"dot": True, "stages": int(more[0][3:])}
    return v | ({"pf": True} if more else {})


def dry_run() -> int:
    """Every variant against fp64 on odd shapes, offset and padded-row views (fp32 and fp16)."""
    g = torch.Generator().manual_seed(0)
    worst = 0.0
    cases = [(1, 7, torch.float32, 0, 0), (1, 67, torch.float16, 0, 0), (9, 131, torch.float32, 3, 0),
             (40, 257, torch.float16, 5, 0), (17, 300, torch.float16, 1, 11), (64, 509, torch.float32, 0, 3),
             (100, 1001, torch.float16, 7, 0)]
    for k, n, dt, off, pad in cases:
        store = torch.randn(off + k * (n + pad) + 8, generator=g).to(dt)
        b = store[off:off + k * (n + pad)].view(k, n + pad)[:, :n]
        a = torch.randn(1, k, generator=g).to(dt)
        ref = a.double() @ b.double()
        for v in variants(k, 16 // b.element_size()):
            c = torch.full((1, n), float("nan"), dtype=dt)
            launch(v, a, b, c)
            err = ((c.double() - ref).norm() / ref.norm()).item()
            worst = max(worst, err)
            tol = 1e-5 if dt == torch.float32 else 2e-3
            if not err < tol:
                print(f"WRONG {vid(v)} on {k}x{n} {dt} off {off} pad {pad}: rel err {err:.2e}")
                return 1
    assert all(parse_vid(vid(v)) == v for v in variants(768, 8))
    print(f"all variants match fp64 (worst rel err {worst:.1e})")
    return 0


SHAPES = [(1, 50257, 768, "bf16"), (1, 32001, 4096, "bf16"), (1, 151655, 896, "bf16"), (1, 32003, 2048, "bf16"),
          (1, 50304, 768, "bf16"), (1, 50257, 1024, "fp16"), (1, 20001, 512, "fp16")]
DT = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _skinny_strips(m, n, k, dt, device):
    from gemmtune.kernels.skinny_spec import space
    from gemmtune.problem import Problem
    kept, _ = space(Problem.from_sizes(m, n, k, dt, layout_b="row"), device)
    return [c for c in kept if c.split_k == 1 and not c.stream_k and not c.pdl]


def ncu_run(shape: str, ids: list[str]) -> int:
    from gemmtune import kernels
    from gemmtune.configs import Choice
    m, n, k, dt = shape.split("x")
    m, n, k = int(m), int(n), int(k)
    a = torch.randn(m, k, device="cuda", dtype=DT[dt])
    b = torch.randn(k, n, device="cuda", dtype=DT[dt])
    c = torch.empty(m, n, device="cuda", dtype=DT[dt])
    for _ in range(3):
        torch.mm(a, b, out=c)
    for cid in ids:
        for _ in range(3):
            if cid.startswith("shift-"):
                launch(parse_vid(cid), a, b, c)
            else:
                ch = Choice.parse(cid)
                kernels.get(ch.family).run(a, b, c, ch.config)
    torch.cuda.synchronize()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="JSON to write")
    ap.add_argument("--budget-s", type=float, default=240, help="stop starting new shapes after this")
    ap.add_argument("--dry-run", action="store_true", help="CPU (TRITON_INTERPRET=1): check every variant")
    ap.add_argument("--ncu-run", metavar="MxNxKxDT", help="run --choices on one shape for ncu, no timing")
    ap.add_argument("--choices", default="")
    ap.add_argument("--dot-only", action="store_true", help="time only the tl.dot form (and one reference window)")
    args = ap.parse_args()
    if args.dry_run:
        return dry_run()
    if args.ncu_run:
        return ncu_run(args.ncu_run, [c for c in args.choices.split(",") if c])
    from exp_gemv_wide import read_bandwidth, time_verified, write_rows

    from gemmtune import kernels
    from gemmtune.bench.timing import CudaGraphTimer, sets_for
    from gemmtune.device import DeviceInfo

    dev = DeviceInfo.from_torch()
    t0 = time.time()
    bw = read_bandwidth()
    print(f"# {torch.cuda.get_device_name()}: read bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    timer = CudaGraphTimer(replays=10, target_ms_per_replay=1.0, max_launches=64, eager_calls=5)
    skinny = kernels.get("skinny")
    rows = []
    for m, n, k, dt in SHAPES:
        if time.time() - t0 > args.budget_s:
            print("# budget spent, stopping", flush=True)
            break
        es = 2
        nsets = sets_for((k * n + m * k + m * n) * es, dev.l2_bytes, 32)
        ins = [(torch.randn(m, k, device="cuda", dtype=DT[dt]), torch.randn(k, n, device="cuda", dtype=DT[dt]))
               for _ in range(nsets)]
        outs = [torch.empty(m, n, device="cuda", dtype=DT[dt]) for _ in range(nsets)]
        ref = ins[0][0].double() @ ins[0][1].double()
        floor_us = k * n * es / bw * 1e6
        res = {"cublas": time_verified(timer, lambda i: torch.mm(*ins[i], out=outs[i]), outs[0], ref, nsets)}
        for cfg in _skinny_strips(m, n, k, dt, dev):
            res["skinny:" + cfg.id] = time_verified(
                timer, lambda i, cfg=cfg: skinny.run(ins[i][0], ins[i][1], outs[i], cfg), outs[0], ref, nsets)
        for v in variants(k, 8, args.dot_only):
            res[vid(v)] = time_verified(timer, lambda i, v=v: launch(v, ins[i][0], ins[i][1], outs[i]),
                                        outs[0], ref, nsets)
        timed = {c: t for c, t in res.items() if isinstance(t, float)}
        best_sk = min((t, c) for c, t in timed.items() if c.startswith("skinny:"))
        best_sh = min((t, c) for c, t in timed.items() if c.startswith("shift-"))
        cub = timed.get("cublas")
        print(f"{m}x{n}x{k} {dt}: floor {floor_us:.2f} us | cuBLAS {cub:.2f} | skinny best {best_sk[0]:.2f} "
              f"({best_sk[1]}) | shift best {best_sh[0]:.2f} ({best_sh[1]}) -> {best_sk[0] / best_sh[0]:.3f}x skinny, "
              f"{cub / best_sh[0]:.3f}x cuBLAS, {floor_us / best_sh[0]:.0%} of floor", flush=True)
        bad = {c: t for c, t in res.items() if not isinstance(t, float)}
        if bad:
            print(f"   not timed: {dict(list(bad.items())[:6])}", flush=True)
        rows.append({"M": m, "N": n, "K": k, "dtype": dt, "floor_us": floor_us, "us": res,
                     "best_skinny": best_sk[1], "best_shift": best_sh[1]})
        write_rows(args.out, bw, rows)
        ins.clear()  # free this shape's operand sets before the next shape allocates its own
        outs.clear()
    return 0


if __name__ == "__main__":
    sys.exit(main())
