"""Why the norm fold (kernels.skinny.run(..., norm_weight=g, norm_eps=e)) was slower than the plain
strip in a Llama-1B decode step (session 43, call 3: 454 us for its 32 launches against ~366 us for
the same strips unfolded, the step 1.179 against 1.116 ms): the two kernels side by side on the
step's two folded shapes and its tuned strip configs, plus torch's RMSNorm before the plain strip.

  python scripts/exp_fold_ncu.py time    # CUDA graphs, interleaved: us per launch, % of the HBM floor
  ncu --kernel-name regex:skinny ... python scripts/exp_fold_ncu.py once   # one launch of each, to profile

GPU only. Each graph holds COPIES launches over distinct weights (more bytes than L2 holds), so each
launch streams its weight from HBM as in the model. ``fold-unit`` is the fold on weights that
hold the norm's weight already (``skinny.run(..., norm_eps=e)`` alone: no g loads). Session 43's
call 5 ran the fold of then, which summed x^2 inside its K loop; the fold now sums them after it
(fold 40 / 64 / 64 registers, unit-weight 39 / 64 / 48, plain 38 / 56 / 49 on the first three
cases, offline for sm_90 and under Nsight Compute on the H200: session 44, call 1). ``norm+plain`` and ``cublas`` run torch's
RMSNorm (eager ops, ~6 small kernels) before each launch: they bound what a fold competes with
from above, not Inductor's one fused norm kernel. (Session 43's call 5 ran this at commit 4f9bfb2, where
``norm+plain`` ran the norm once per graph of 8 launches: only its plain and fold rows compare.)"""

from __future__ import annotations

import sys

import torch

from graph_chain import NOMINAL_HBM, capture, rel_err, time_interleaved  # scripts/, beside this one

from gemmtune.configs import Choice
from gemmtune.kernels import skinny

# Llama-3.2-1B at decode b1: fused q/k/v and fused gate/up (K = hidden = 2048), with the configs
# its tuning picked in session 43 (pdl_winners, here without -pdl).
CASES = [
    (3072, 2048, "skinny:BM1-BN2-BK1024-SK1-S1-W4-core-det-flat-sum"),
    (3072, 2048, "skinny:BM1-BN2-BK2048-SK1-S1-W4-core-det-flat-sum"),
    (16384, 2048, "skinny:BM1-BN8-BK512-SK1-S1-W4-core-det-flat-sum"),
    (16384, 2048, "skinny:BM1-BN2-BK1024-SK1-S1-W4-core-det-flat-sum"),
]
COPIES = 8
EPS = 1e-5


def setup(n: int, k: int):
    torch.manual_seed(0)
    ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * k ** -0.5 for _ in range(COPIES)]
    x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
    g = (1 + 0.1 * torch.randn(k, device="cuda")).to(torch.bfloat16)
    outs = [torch.empty(1, n, device="cuda", dtype=torch.bfloat16) for _ in range(COPIES)]
    return ws, x, g, outs


def with_g(ws, g):
    """The weights with the norm's weight multiplied in once (W diag(g)), for the unit-weight fold."""
    return [(w.float() * g.float()).to(w.dtype) for w in ws]


def rms(x, g):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).to(x.dtype) * g


def variants(ws, x, g, outs, cfg):
    wgs = with_g(ws, g)

    def run(v: str) -> None:
        for w, wg, o in zip(ws, wgs, outs):
            if v == "fold-unit":  # g in the weight already: the fold reads no g
                skinny.run(x, wg.t(), o, cfg, norm_eps=EPS)
            elif v == "fold":
                skinny.run(x, w.t(), o, cfg, norm_weight=g, norm_eps=EPS)
            elif v == "cublas":
                torch.mm(rms(x, g), w.t(), out=o)
            elif v == "norm+plain":
                skinny.run(rms(x, g), w.t(), o, cfg)
            else:
                skinny.run(x, w.t(), o, cfg)
    return run


def main(mode: str) -> None:
    for n, k, choice in CASES:
        cfg = Choice.parse(choice).config
        ws, x, g, outs = setup(n, k)
        run = variants(ws, x, g, outs, cfg)
        if mode == "once":  # one launch of each kernel on one weight (ncu profiles each launch)
            skinny.run(x, ws[0].t(), outs[0], cfg)
            skinny.run(x, ws[0].t(), outs[0], cfg, norm_weight=g, norm_eps=EPS)
            skinny.run(x, with_g(ws[:1], g)[0].t(), outs[0], cfg, norm_eps=EPS)
            torch.cuda.synchronize()
            continue
        ref = (rms(x, g).double() @ ws[-1].double().t())
        vs = ["plain", "fold", "fold-unit", "norm+plain", "cublas"]
        graphs = capture(vs, run)
        errs = {}
        for v in vs:
            graphs[v].replay()
            torch.cuda.synchronize()
            errs[v] = rel_err(outs[-1], ref) if v != "plain" else None
        med, _ = time_interleaved(graphs, rounds=15, replays=20)
        floor = n * k * 2 / NOMINAL_HBM * 1e6
        print(f"{n}x{k} {choice}")
        for v in vs:
            us = med[v] / COPIES
            e = "" if errs[v] is None else f"  rel err {errs[v]:.1e}"
            print(f"   {v:11s} {us:7.2f} us a launch  {floor / us:5.0%} of the nominal HBM floor{e}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "time")
