"""Does programmatic dependent launch (PDL) shorten a decode step's chain of GEMVs? (#15, #17)

A decode step, captured in a CUDA graph, is a chain of small kernels: a norm (or another
pointwise kernel) that writes the activation, then a GEMV that reads it with a weight of
4-32 MB, and so on. Each GEMV streams its weight at the HBM floor only once it runs. Until then,
the GPU pays the launch, the ramp-up and the predecessor's tail. On Hopper, a kernel launched
with PDL can start while its predecessor is still running. It waits (``gdc_wait``) only before
it reads what the predecessor wrote. A GEMV's weight is not written by the norm before it, so
the weight's first tiles can be loaded before that wait.

This script times one chain of ``LAYERS`` (norm -> GEMV) pairs on Llama-3.2-1B's MLP shapes:
2048 -> 8192, then 8192 -> 2048, alternating. The weights total well over L2, so every GEMV
reads from HBM. Each variant is captured in a CUDA graph and replayed interleaved with the
others. Variants:

- ``cublas``: the norm kernel, then ``F.linear`` (cuBLAS), no PDL;
- ``plain``: the norm kernel, then this script's Triton GEMV, no PDL;
- ``pdl_wait``: both kernels launched with PDL. Each waits before any load, and then lets its
  successor launch;
- ``pdl_prefetch``: as ``pdl_wait``, but the GEMV loads its first weight tile before the wait.
  That load is the overlap.
- ``gemv_only``: the norm as in ``plain`` (a predecessor that knows nothing of PDL, as ATen's
  kernels and Inductor's without ``TORCHINDUCTOR_ENABLE_PDL=1``), the GEMV as in ``pdl_prefetch``.
- ``folded``: no norm kernel: each GEMV reads the previous one's output and folds the norm in
  (``W @ (x / rms(x)) = (W @ x) / rms(x)``: it sums ``x * x`` beside the product), no PDL;
- ``folded_pdl``: as ``folded``, every GEMV launched with PDL and its first weight tile loaded
  before the wait: a chain of GEMVs alone, each one's weight starting while the one before ends.
  (How much a decode step's pointwise kernels between GEMVs cost: sessions 36-38 could only hide
  them, and a model's norm could be folded so, its weight g into W's columns.)

Every variant's final output is checked against ``plain``'s, and one GEMV against fp64. The
report gives µs per replay, the speed-up over ``plain`` and ``cublas``, and the GEMVs' weight
bytes as a % of the nominal 4.8 TB/s floor.

With ``--single``, it also times every default GEMV strip of skinny (skinny_spec._DEFAULT_GEMV),
its ``-pdl`` twin (kernels.skinny) and cuBLAS on Llama-1B's decode layers (1 x N x K, a Linear's
weight), the tuner's way (gemmtune.bench.measure: verified, then CUDA-graph replays over rotating
input sets). A replay of one kernel back to back lets each PDL launch overlap the one before,
which no model step does: these times are what a tuner would see, not what a model gets.

    python scripts/exp_pdl.py OUT_DIR                                  # GPU (Hopper)
    TRITON_INTERPRET=1 python scripts/exp_pdl.py OUT_DIR --dry-run     # CPU: the kernels' arithmetic, no PDL, no timing

Env: LAYERS (default 32), REPLAYS (default 30, per round), ROUNDS (default 7).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

from graph_chain import NOMINAL_HBM, check_against_plain, measure, mlp_chain  # scripts/, beside this one

@triton.jit
def _norm(y_ptr, x_ptr, n, eps, BLOCK: tl.constexpr, PDL: tl.constexpr):
    """x = y / rms(y): one program over the whole vector (as a decode step's RMSNorm of one token)."""
    if PDL:
        tl.extra.cuda.gdc_wait()  # y is the predecessor's output
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        v = tl.load(y_ptr + start + offs, mask=start + offs < n, other=0.0).to(tl.float32)
        acc += v * v
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()  # the GEMV may launch and start on its weight
    inv = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n + eps)
    for start in range(0, n, BLOCK):
        m = start + offs < n
        v = tl.load(y_ptr + start + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(x_ptr + start + offs, (v * inv).to(x_ptr.dtype.element_ty), mask=m)


@triton.jit
def _gemv(w_ptr, x_ptr, y_ptr, N, K, stride_wn, eps, BN: tl.constexpr, BK: tl.constexpr, PDL: tl.constexpr,
          PREFETCH: tl.constexpr, FOLD: tl.constexpr = False):
    """y[N] = W[N, K] @ x[K], W row-major (a Linear's weight): BN rows a program, K in BK steps.

    FOLD: x is the un-normalized vector and the norm is folded in. W @ (x / rms(x)) equals
    (W @ x) / rms(x), and a one-slice program reads all of x anyway, so it sums x * x beside the
    product and scales its outputs at the end: no norm kernel between two GEMVs."""
    pid = tl.program_id(0)
    rows = pid * BN + tl.arange(0, BN)
    cols = tl.arange(0, BK)
    rmask = rows < N
    wp = w_ptr + rows[:, None] * stride_wn + cols[None, :]
    acc = tl.zeros([BN], dtype=tl.float32)
    ss = tl.zeros([BK], dtype=tl.float32)
    if PREFETCH:
        # The weight is no predecessor's output: its first tile is read before the wait.
        w0 = tl.load(wp, mask=rmask[:, None] & (cols[None, :] < K), other=0.0)
    if PDL:
        tl.extra.cuda.gdc_wait()  # x is the norm's output (the previous GEMV's, with FOLD)
        tl.extra.cuda.gdc_launch_dependents()
    start = 0
    if PREFETCH:
        x0 = tl.load(x_ptr + cols, mask=cols < K, other=0.0).to(tl.float32)
        acc += tl.sum(w0.to(tl.float32) * x0[None, :], axis=1)
        if FOLD:
            ss += x0 * x0
        start = BK
    for k in range(start, K, BK):
        km = k + cols < K
        w = tl.load(wp + k, mask=rmask[:, None] & km[None, :], other=0.0)
        xv = tl.load(x_ptr + k + cols, mask=km, other=0.0).to(tl.float32)
        acc += tl.sum(w.to(tl.float32) * xv[None, :], axis=1)
        if FOLD:
            ss += xv * xv
    if FOLD:
        acc = acc / tl.sqrt(tl.sum(ss, axis=0) / K + eps)
    tl.store(y_ptr + rows, acc.to(y_ptr.dtype.element_ty), mask=rmask)


VARIANTS = ("cublas", "plain", "pdl_wait", "pdl_prefetch", "gemv_only", "folded", "folded_pdl")


def chain(weights, x0, variant: str, bufs, bn: int, bk: int, use_pdl: bool = True):
    """One pass of the chain, writing into ``bufs`` (preallocated: a graph replays these).
    ``use_pdl=False`` runs a pdl variant's kernels without PDL (the interpreter has none)."""
    pdl = variant.startswith("pdl") and use_pdl
    fold = variant.startswith("folded")
    gemv_pdl = (pdl or variant in ("gemv_only", "folded_pdl")) and use_pdl
    kw = {"launch_pdl": True} if pdl else {}
    gkw = {"launch_pdl": True} if gemv_pdl else {}
    y = x0
    for w, (xb, yb) in zip(weights, bufs):
        n, k = w.shape
        if not fold:
            _norm[(1,)](y, xb, k, 1e-6, BLOCK=1024, PDL=pdl, num_warps=8, **kw)
        if variant == "cublas":
            torch.mm(xb.view(1, -1), w.t(), out=yb.view(1, -1))  # F.linear's cuBLAS call, into the graph's buffer
        else:
            _gemv[(triton.cdiv(n, bn),)](w, y if fold else xb, yb, n, k, w.stride(0), 1e-6, BN=bn, BK=bk,
                                        PDL=gemv_pdl, PREFETCH=variant in ("pdl_prefetch", "gemv_only", "folded_pdl"),
                                        FOLD=fold, num_warps=4, **gkw)
        y = yb
    return y


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--dry-run", action="store_true", help="CPU, under TRITON_INTERPRET=1: arithmetic only")
    ap.add_argument("--bn", type=int, default=8)
    ap.add_argument("--bk", type=int, default=512)
    ap.add_argument("--single", action="store_true", help="also time skinny's GEMV strips and their -pdl twins one by one")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    c = mlp_chain(args.dry_run, torch.float32)
    layers, replays, rounds, dev, dt, shapes, weights = c.layers, c.replays, c.rounds, c.dev, c.dt, c.shapes, c.weights
    x0 = torch.randn(c.hidden, generator=c.g).to(dev, dt)
    res: dict = {"layers": layers, "shapes": shapes, "dtype": str(dt), "bn": args.bn, "bk": args.bk,
                 "weight_bytes": sum(w.numel() * w.element_size() for w in weights)}
    variants = ("plain", "pdl_prefetch", "folded", "folded_pdl") if args.dry_run else VARIANTS
    bufs = {v: [(torch.empty(k, device=dev, dtype=dt), torch.empty(n, device=dev, dtype=dt)) for n, k in shapes]
            for v in variants}

    # Correctness: one GEMV against fp64, then every variant's chain against plain's.
    xb, yb = bufs["plain"][0]
    y_end = chain(weights, x0, "plain", bufs["plain"], args.bn, args.bk)
    want = (weights[0].double() @ xb.double())
    err = ((yb.double() - want).abs().max() / want.abs().max()).item()
    res["gemv0_rel_err_vs_fp64"] = err
    assert err < (1e-2 if dt == torch.bfloat16 else 1e-5), err
    ref = y_end.clone()
    check_against_plain(res, variants, lambda v: chain(weights, x0, v, bufs[v], args.bn, args.bk,
                                                       use_pdl=not args.dry_run), ref)
    print("correctness:", res["gemv0_rel_err_vs_fp64"], res["rel_err_vs_plain"], flush=True)
    if args.dry_run:
        if args.single:
            res["single"] = single(((8, 64), (5, 40)), "fp32")
        (out / "pdl.json").write_text(json.dumps(res, indent=1))
        return

    res["device"] = torch.cuda.get_device_name()
    res["versions"] = {"torch": torch.__version__, "triton": triton.__version__}
    measure(res, variants, lambda v: chain(weights, x0, v, bufs[v], args.bn, args.bk), lambda v: bufs[v][-1][1],
            ref, rounds, replays)
    if args.single:
        res["single"] = single()
    res["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (out / "pdl.json").write_text(json.dumps(res, indent=1))


SINGLE_SHAPES = ((2048, 2048), (512, 2048), (8192, 2048), (2048, 8192), (3072, 2048), (16384, 2048))  # (N, K)


def single(shapes=SINGLE_SHAPES, dtype: str = "bf16") -> dict:
    """Per decode layer (1 x N x K, K-contiguous B): microseconds of cuBLAS and of each default
    GEMV strip with and without -pdl, timed by gemmtune.bench.measure (the dry run: fp32, toy
    sizes, the interpreter's wall times). On a GPU also ``after_spacer``: each launch after a
    one-element ATen add (a kernel that knows no PDL, so a -pdl launch cannot overlap the one
    before it), the add's own time subtracted: a way the tuner could time -pdl configs fairly."""
    from dataclasses import replace

    from gemmtune.bench.measure import WorkerState, measure, verify
    from gemmtune.configs import Choice, SkinnyConfig
    from gemmtune.kernels.skinny_spec import _DEFAULT_GEMV
    from gemmtune.problem import Problem, element_size

    rows = {}
    for n, k in shapes:
        p = Problem.from_sizes(1, n, k, dtype, layout_b="col")
        state = WorkerState()
        row = {}
        ids = ["aten"]
        for bn, bk, w, st in _DEFAULT_GEMV:
            c = SkinnyConfig(1, bn, min(bk, triton.next_power_of_2(k)), 1, st, w, False, True)
            ids += [Choice("skinny", c).id, Choice("skinny", replace(c, pdl=True)).id]
        spaced = {}
        for cid in ids:
            r = measure(p, cid, state.timer, state=state)
            row[cid] = r.device_ms * 1e3 if r.device_ms else f"{r.status.value}: {r.reason[:120]}"
            if torch.cuda.is_available() and r.device_ms:
                _, launch = verify(p, cid, state)
                if launch is not None:
                    sp = torch.zeros(1, device="cuda")
                    n_sets = len(state.inputs)
                    alone = state.timer.measure(lambda i: sp.add_(1.0), n_sets).device_ms
                    both = state.timer.measure(lambda i: (sp.add_(1.0), launch(i)), n_sets).device_ms
                    spaced[cid] = (both - alone) * 1e3
        floor_us = (n * k + k + n) * element_size(dtype) / NOMINAL_HBM * 1e6
        plain = [v for i, v in row.items() if i != "aten" and not i.endswith("-pdl") and isinstance(v, float)]
        pdl = [v for i, v in row.items() if i.endswith("-pdl") and isinstance(v, float)]
        print(f"1x{n}x{k}: cuBLAS {row['aten']:.2f} us; best strip {min(plain):.2f}, best -pdl {min(pdl):.2f} "
              f"({floor_us / min(pdl):.0%} of the floor)", flush=True)
        if spaced:
            sp_plain = [v for i, v in spaced.items() if i != "aten" and not i.endswith("-pdl")]
            sp_pdl = [v for i, v in spaced.items() if i.endswith("-pdl")]
            print(f"    after a spacer: cuBLAS {spaced.get('aten', float('nan')):.2f} us; best strip "
                  f"{min(sp_plain, default=float('nan')):.2f}, best -pdl {min(sp_pdl, default=float('nan')):.2f}",
                  flush=True)
        rows[f"1x{n}x{k}"] = {"us": row, "after_spacer_us": spaced, "floor_us": floor_us}
    return rows


if __name__ == "__main__":
    main()
