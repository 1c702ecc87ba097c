"""Why do skinny's GEMV strips lose to cuBLAS on the widest decode GEMVs? (#15, #17; GPU only.)

Sessions 36-38 measured the one-slice CUDA-core strips on a Linear's K-contiguous weight (M = 1)
at 1.07-1.14x cuBLAS in a chain of Llama-1B's MLP GEMMs. Yet on the widest ones, the fused
gate_up (1 x 16384 x 2048) and the LM head, cuBLAS won: the best strip ran 20.1 us against
17.9 us for 1 x 16384 x 2048 (70% against 78% of the weight floor; session 37, `--single`). The
tuner then keeps cuBLAS for them, and `pdl=True` has no strip to twin there.

The default space offers four strips (skinny_spec._DEFAULT_GEMV: BN 2-4, BK 512-2048, 2-4
warps, S1). On wide N its cap of 32 programs per SM refused them all until session 39: 1 x 28672 x
4096 and the LM heads kept only BN 32-64, BK 128-256 CUDA-core tiles. (Session 39's run of this
script measured the refused strips faster there, and the cap now applies to K splits only.) The exhaustive space has BN 2-8, S1. This
sweep adds wider strips (BN 16), 8 warps and pipelined K loops (S2, S3) on the decode GEMVs of
three model sizes. Each is timed L2-cold from CUDA graphs
(bench.timing.CudaGraphTimer, as the tuner does), with cuBLAS before and after each shape's
sweep. Every output is checked against fp64 first. The floor is the weight's bytes at the
measured read bandwidth.

    python scripts/exp_gemv_wide.py --out $OUT/gemv_wide.json
    python scripts/exp_gemv_wide.py --ncu-run 1x16384x2048 --choices ID[,ID...]   # under ncu: 3 calls each
    TRITON_INTERPRET=1 python scripts/exp_gemv_wide.py --dry-run                    # CPU: the plan only

Prints one line per shape: cuBLAS, the default space's best strip, the sweep's best, each with %
of the floor, and the sweep's five best.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import exp_skinny  # noqa: E402 - its precompile pool and operands

from gemmtune import kernels  # noqa: E402
from gemmtune.configs import Choice, SkinnyConfig  # noqa: E402
from gemmtune.kernels.skinny_spec import MAX_CORE_REGS, constraint, core_regs, space  # noqa: E402

# (M, N, K) of the decode GEMVs on a Linear's weight (N x K, K-contiguous), fused groups included:
# Llama-3.2-1B (qkv 3072, gate_up 16384, down, LM head 128256), Llama-3.1-8B (qkv 6144, gate_up
# 28672, down), Qwen2-0.5B (qkv 1152, gate_up 9728, down, LM head 151936).
SHAPES = [(1, 2048, 2048), (1, 3072, 2048), (1, 16384, 2048), (1, 2048, 8192), (1, 128256, 2048),
          (1, 6144, 4096), (1, 28672, 4096), (1, 4096, 14336),
          (1, 1152, 896), (1, 9728, 896), (1, 896, 4864), (1, 151936, 896)]


def _problem(m: int, n: int, k: int):
    from gemmtune.problem import Problem
    return Problem.from_sizes(m, n, k, "bf16", layout_b="col")


def default_strips(m: int, n: int, k: int, device) -> list[SkinnyConfig]:
    """The default space's one-slice CUDA-core configs on this problem: what the tuner tries; at
    M > 1 its one-slice tl.dot strips as well (the 16-wide ones were --fast's picks at M = 3-16)."""
    kept, _ = space(_problem(m, n, k), device)
    return [c for c in kept if (m > 1 or not c.dot) and c.split_k == 1 and not c.stream_k and not c.pdl]


def sweep_strips(k: int, m: int = 1) -> list[SkinnyConfig]:
    """Wider, deeper and pipelined strips: BN 2-16, BK 512-2048, 2, 4 or 8 warps, S1-S3, each in
    every layout of the product (kernels.skinny) at BLOCK_M = m: at m = 1 the 3-D one, -flat's 2-D
    one and -flat-sum (summed each K step); at m = 2-8 the 3-D one and -flat-sum, which takes the
    rows one at a time. Within the register bound the space applies (core_regs <= MAX_CORE_REGS
    fp32 product registers per thread). The space's other rules are not applied: on wide N its cap
    of 32 programs per SM ("the split is too fine") refused every strip of the default space
    (1 x 28672 x 4096, the LM heads) until session 39, whose run of this sweep settled that
    question (the cap is now on K splits only)."""
    layouts = ((False, False), (True, False), (True, True)) if m == 1 else ((False, False), (True, True))
    out = []
    for bn, bk, w, st in itertools.product((2, 4, 8, 16), (512, 1024, 2048), (2, 4, 8), (1, 2, 3)):
        bk = min(bk, _pow2_at_least(k))
        if st > 1 and k <= bk:  # one K step: nothing to pipeline
            continue
        out += [c for flat, sum_each in layouts
                if core_regs(c := SkinnyConfig(m, bn, bk, 1, st, w, False, True, flat=flat, sum_each=sum_each))
                <= MAX_CORE_REGS]
    return list(dict.fromkeys(out))


def _pow2_at_least(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


def _operands(m, n, k):
    return exp_skinny._operands(m, n, k, "col")  # B = W.T: K-contiguous, as F.linear reads a Linear's weight


def read_bandwidth() -> float:
    """Bytes/s of a large fp32 sum (a read, as a GEMV's weight is read), L2-cold."""
    x = torch.randn(2 * 2**30 // 4, device="cuda")
    for _ in range(2):
        x.sum()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(10):
        x.sum()
    e.record()
    e.synchronize()
    bw = x.numel() * 4 * 10 / (s.elapsed_time(e) * 1e-3)
    del x
    return bw


def time_verified(timer, fn, out0: torch.Tensor, ref: torch.Tensor, nsets: int):
    """``fn(i)`` writes input set i's output (``out0`` is set 0's): checked against the fp64
    ``ref`` once (``out0`` NaN-filled first), then timed over the sets. Device µs per call, or why
    not ("wrong <rel err>", "error: <first line>")."""
    try:
        out0.fill_(float("nan"))
        fn(0)
        torch.cuda.synchronize()
        err = ((out0.double() - ref).norm() / ref.norm()).item()
        if not err < 1e-2:
            return f"wrong {err:.2e}"
        return timer.measure(fn, nsets).device_ms * 1e3
    except Exception as e:  # noqa: BLE001 - recorded per config
        return f"error: {str(e).splitlines()[0][:120]}"


def write_rows(path: str, bw: float, rows: list) -> None:
    """The run so far, with the GPU, versions, date and measured read bandwidth: written after each
    shape, so that a run cut by its time limit keeps what finished."""
    import triton
    with open(path, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                   "read_bw": bw, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows},
                  f, indent=1)


def ncu_run(shape: str, ids: list[str]) -> int:
    """Each choice (and cuBLAS) called 3 times on one shape, for Nsight Compute's kernel filter."""
    m, n, k = (int(v) for v in shape.split("x"))
    a, b = _operands(m, n, k)
    out = torch.empty(m, n, device="cuda", dtype=a.dtype)
    for _ in range(3):
        torch.mm(a, b, out=out)
    for cid in ids:
        ch = Choice.parse(cid)
        for _ in range(3):
            kernels.get(ch.family).run(a, b, out, ch.config)
    torch.cuda.synchronize()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="JSON to write")
    ap.add_argument("--budget-s", type=float, default=400, help="stop starting new shapes after this")
    ap.add_argument("--workers", type=int, default=14, help="compile processes")
    ap.add_argument("--dry-run", action="store_true", help="print the plan (configs per shape) and exit")
    ap.add_argument("--ncu-run", metavar="MxNxK", help="run --choices on one shape for ncu, no timing")
    ap.add_argument("--choices", default="", help="comma-separated choice ids for --ncu-run")
    ap.add_argument("--m", type=int, default=1, choices=range(1, 9), metavar="1-8",
                    help="rows (the decode batch) in place of SHAPES' M = 1; the strips take BLOCK_M = M")
    ap.add_argument("--shapes", default="", metavar="NxK,...",
                    help="these weights (N x K: N outputs, K inputs) in place of SHAPES")
    ap.add_argument("--default-only", action="store_true",
                    help="time the default space's strips only, not the sweep's")
    args = ap.parse_args()
    if args.ncu_run:
        return ncu_run(args.ncu_run, [c for c in args.choices.split(",") if c])
    from gemmtune.device import DeviceInfo
    dev = DeviceInfo.lookup("h200") if args.dry_run else DeviceInfo.from_torch()
    try:
        weights = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",") if s]
        assert all(len(w) == 2 and min(w) > 0 for w in weights)
    except (ValueError, AssertionError):
        ap.error(f"--shapes {args.shapes!r}: expected NxK[,NxK...] of positive integers, e.g. 32000x4096")
    shapes = [(args.m, n, k) for n, k in weights] or [(args.m, n, k) for _, n, k in SHAPES]
    defaults = {s: [Choice("skinny", c).id for c in default_strips(*s, dev)] for s in shapes}
    plan = [((m, n, k), list(dict.fromkeys(defaults[(m, n, k)] + (
        [] if args.default_only else [Choice("skinny", c).id for c in sweep_strips(k, m)]))))
            for m, n, k in shapes]
    if args.dry_run:
        for (m, n, k), ids in plan:
            refused = sum(constraint(Choice.parse(c).config, _problem(m, n, k), dev) is not None for c in ids)
            print(f"{m}x{n}x{k}: {len(ids)} strips ({refused} outside the default space's rules), "
                  f"default {[c.split(':')[1] for c in defaults[(m, n, k)]]}")
        return 0
    if not args.out:
        ap.error("--out is required (except with --dry-run or --ncu-run)")
    from gemmtune.bench.timing import CudaGraphTimer, sets_for
    t_start = time.time()
    bw = read_bandwidth()
    print(f"# {torch.cuda.get_device_name()}: read bandwidth {bw / 1e12:.2f} TB/s (fp32 sum, measured)", flush=True)
    exp_skinny.precompile([((m, n, k, "col"), ids) for (m, n, k), ids in plan], args.workers)
    timer = CudaGraphTimer(replays=10, target_ms_per_replay=1.0, max_launches=64, eager_calls=5)
    rows = []
    for (m, n, k), ids in plan:
        if time.time() - t_start > args.budget_s:
            print("# budget spent, stopping", flush=True)
            break
        weight = n * k * 2
        nsets = sets_for(weight + (m * k + m * n) * 2, dev.l2_bytes, 32)
        ins = [_operands(m, n, k) for _ in range(nsets)]
        outs = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(nsets)]
        ref = ins[0][0].double() @ ins[0][1].double()
        floor_us = weight / bw * 1e6
        cub = timer.measure(lambda i: torch.mm(ins[i][0], ins[i][1], out=outs[i]), nsets).device_ms * 1e3
        res = {"M": m, "N": n, "K": k, "floor_us": floor_us, "cublas_us": cub, "strips": {},
               "default_space": defaults[(m, n, k)],
               "refused_by_space": {c: why for c in ids
                                    if (why := constraint(Choice.parse(c).config, _problem(m, n, k), dev))}}
        fam = kernels.get("skinny")
        for cid in ids:
            cfg = Choice.parse(cid).config
            res["strips"][cid] = time_verified(timer, lambda i, c=cfg: fam.run(ins[i][0], ins[i][1], outs[i], c),
                                               outs[0], ref, nsets)
        res["cublas_us_after"] = timer.measure(lambda i: torch.mm(ins[i][0], ins[i][1], out=outs[i]), nsets).device_ms * 1e3
        ok = {c: v for c, v in res["strips"].items() if isinstance(v, float)}
        dflt = {c: ok[c] for c in defaults[(m, n, k)] if c in ok}
        line = f"{m}x{n}x{k}: floor {floor_us:.1f} us, cuBLAS {cub:.1f} us ({floor_us / cub:.0%})"
        if dflt:
            d = min(dflt, key=dflt.get)
            res["default_best"] = d
            line += f" | default space best {dflt[d]:.1f} us ({floor_us / dflt[d]:.0%}, {cub / dflt[d]:.2f}x) {d}"
        if ok:
            top = sorted(ok, key=ok.get)[:5]
            res["sweep_top5"] = top
            out_of_space = " (outside the space's rules)" if top[0] in res["refused_by_space"] else ""
            line += (f" | sweep best {ok[top[0]]:.1f} us ({floor_us / ok[top[0]]:.0%}, {cub / ok[top[0]]:.2f}x) "
                     f"{top[0]}{out_of_space}")
            line += " | next: " + ", ".join(f"{c.split(':')[1]} {ok[c]:.1f}" for c in top[1:])
        line += f" [{len(ok)} ok of {len(ids)}; cuBLAS after {res['cublas_us_after']:.1f}]"
        print(line, flush=True)
        rows.append(res)
        ins = outs = ref = None  # freed before the next shape's operands
        torch.cuda.empty_cache()
        write_rows(args.out, bw, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
