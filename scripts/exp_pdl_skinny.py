"""Do skinny's other -pdl paths pay in a chain? (#15, #17; session 37 peeled the first K step of the
tl.dot path and of the N-contiguous CUDA-core strip, as the GEMV strip on a K-contiguous B had
been. Only that one was measured in a model: 1.025-1.061x a compiled Llama-1B decode step.)

A chain of ``LAYERS`` (pointwise -> GEMM) pairs on Llama-3.2-1B's MLP shapes (M x 2048 -> 8192,
then M x 8192 -> 2048), with gemmtune's own skinny kernel (``kernels.skinny.run``) at the config
given, captured in a CUDA graph and replayed interleaved with the others. The pointwise kernel
(x = 0.5 * y, the stand-in for a norm) knows PDL or not. Variants:

- ``cublas``: the pointwise kernel, then ``torch.mm`` (cuBLAS);
- ``plain``: the pointwise kernel, then the skinny config;
- ``pdl``: both launched with PDL: the pointwise kernel waits, then lets the GEMM launch; the
  GEMM is the config's ``-pdl`` twin (its first B tile before its wait);
- ``pdl_unaware``: the pointwise kernel without PDL (as ATen's, or Inductor's with its PDL off),
  the GEMM's ``-pdl`` twin after it;
- ``pdl_nolaunch``: as ``pdl_unaware``, but the twin launched without the PDL attribute (its
  peeled step and ``griddepcontrol`` instructions, no early launch). Against ``plain`` and
  ``pdl_unaware`` it tells the kernel's cost from the launch's: session 37 measured a -pdl strip
  0.3-1.1 us slower than its plain twin after a kernel that knows no PDL.

Every variant's final output is checked against ``plain``'s, one GEMM against fp64. µs per replay,
× plain and × cuBLAS, and the weights' bytes as a % of the nominal 4.8 TB/s floor.

    python scripts/exp_pdl_skinny.py OUT_DIR --m 16 --config skinny:BM16-BN64-BK64-SK1-S3-W4-dot-det
    python scripts/exp_pdl_skinny.py OUT_DIR --m 1 --layout row --config skinny:BM1-BN16-BK256-SK1-S1-W4-core-det
    TRITON_INTERPRET=1 python scripts/exp_pdl_skinny.py OUT_DIR --dry-run --m 16 --config ...   # CPU: arithmetic only

Env: LAYERS (default 32), REPLAYS (default 30, per round), ROUNDS (default 7), INTER (the MLP width,
default 8192: M x 2048 -> INTER, then M x INTER -> 2048).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import time
from dataclasses import replace
from pathlib import Path
from unittest import mock

import torch
import triton
import triton.language as tl

from gemmtune.configs import Choice
from gemmtune.kernels import skinny

from graph_chain import check_against_plain, measure, mlp_chain  # scripts/, beside this one

VARIANTS = ("cublas", "plain", "pdl", "pdl_unaware", "pdl_nolaunch")
_LAUNCH_OPTIONS = skinny._launch_options  # noqa: SLF001 - pdl_nolaunch drops one of its options


def _without_pdl_launch(cfg):
    return {k: v for k, v in _LAUNCH_OPTIONS(cfg).items() if k != "launch_pdl"}


@triton.jit
def _scale(y_ptr, x_ptr, numel, BLOCK: tl.constexpr, PDL: tl.constexpr):
    """x = 0.5 * y over ``numel`` elements (a decode step's pointwise kernel before a GEMM)."""
    if PDL:
        tl.extra.cuda.gdc_wait()  # y is the predecessor's output
        tl.extra.cuda.gdc_launch_dependents()
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < numel
    v = tl.load(y_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(x_ptr + offs, (v * 0.5).to(x_ptr.dtype.element_ty), mask=m)


def chain(bs, x0, variant: str, bufs, cfg, use_pdl: bool = True):
    """One pass of the chain into ``bufs`` (preallocated: a graph replays these). ``use_pdl=False``
    runs the kernels without PDL launches (the interpreter has none; the -pdl twin still runs its
    peeled arithmetic)."""
    pw_pdl = variant == "pdl" and use_pdl
    kw = {"launch_pdl": True} if pw_pdl else {}
    gcfg = replace(cfg, pdl=True) if variant.startswith("pdl") else cfg
    y = x0
    with (mock.patch.object(skinny, "_launch_options", _without_pdl_launch) if variant == "pdl_nolaunch"
          else contextlib.nullcontext()):
        for b, (xb, yb) in zip(bs, bufs):
            n = xb.numel()
            _scale[(triton.cdiv(n, 1024),)](y, xb, n, BLOCK=1024, PDL=pw_pdl, num_warps=4, **kw)
            if variant == "cublas":
                torch.mm(xb, b, out=yb)
            else:
                skinny.run(xb, b, yb, gcfg)
            y = yb
    return y


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--config", required=True, help="a skinny choice id with one K-slice, without -pdl")
    ap.add_argument("--m", type=int, default=1, help="rows (the decode batch)")
    ap.add_argument("--layout", choices=("col", "row"), default="col",
                    help="B K-contiguous (a Linear's weight, x @ W.T) or N-contiguous (x @ W, GPT-2's Conv1D)")
    ap.add_argument("--dry-run", action="store_true", help="CPU, under TRITON_INTERPRET=1: arithmetic only")
    args = ap.parse_args()
    ch = Choice.parse(args.config)
    if ch.family != "skinny" or ch.config.pdl or ch.config.split_k != 1 or ch.config.stream_k:
        raise SystemExit(f"--config: a one-slice skinny choice without -pdl, not {args.config!r}")
    cfg = ch.config
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    c = mlp_chain(args.dry_run, torch.float16)
    layers, replays, rounds, dev, dt, shapes, ws = c.layers, c.replays, c.rounds, c.dev, c.dt, c.shapes, c.weights
    m, hidden, g = args.m, c.hidden, c.g
    # B as the GEMM reads it: the weight transposed (K-contiguous), or a [K, N] row-major copy
    bs = [w.t() if args.layout == "col" else w.t().contiguous() for w in ws]
    x0 = torch.randn(m, hidden, generator=g).to(dev, dt)
    res: dict = {"config": args.config, "m": m, "layout": args.layout, "layers": layers, "shapes": shapes,
                 "dtype": str(dt), "weight_bytes": sum(w.numel() * w.element_size() for w in ws)}
    variants = ("plain", "pdl", "pdl_unaware", "pdl_nolaunch") if args.dry_run else VARIANTS
    bufs = {v: [(torch.empty(m, k, device=dev, dtype=dt), torch.empty(m, n, device=dev, dtype=dt)) for n, k in shapes]
            for v in variants}

    xb, yb = bufs["plain"][0]
    y_end = chain(bs, x0, "plain", bufs["plain"], cfg)
    want = xb.double() @ bs[0].double()
    err = ((yb.double() - want).abs().max() / want.abs().max()).item()
    res["gemm0_rel_err_vs_fp64"] = err
    assert err < 1e-2, err
    ref = y_end.clone()
    check_against_plain(res, variants, lambda v: chain(bs, x0, v, bufs[v], cfg, use_pdl=not args.dry_run), ref)
    print("correctness:", res["gemm0_rel_err_vs_fp64"], res["rel_err_vs_plain"], flush=True)
    if args.dry_run:
        (out / "pdl_skinny.json").write_text(json.dumps(res, indent=1))
        return

    res["device"] = torch.cuda.get_device_name()
    res["versions"] = {"torch": torch.__version__, "triton": triton.__version__}
    measure(res, variants, lambda v: chain(bs, x0, v, bufs[v], cfg), lambda v: bufs[v][-1][1], ref, rounds, replays)
    res["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (out / "pdl_skinny.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
