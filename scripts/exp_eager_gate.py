"""The step gate (gemmtune.eager_gate) against the worst the per-layer rule can choose: a real HF
model, tuned as bench-model tunes it (``--fast``, one tune call), every layer's first eager call
made to keep its tuned kernel whatever its own timing says (session 50's call 5 kept 74 tuned
calls of Qwen2-0.5B's fp32 prefill this way by the rule itself, and the un-graphed step ran 0.839x
eager). Then each phase's step is gated, and the gated model is timed against an unpatched deep
copy (the control bench-model's eager_copy is), paired rounds, un-graphed.

    python scripts/exp_eager_gate.py --model qwen2-0.5b --dtype float32 --out gate.json   # GPU
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
import warnings

import torch

import gemmtune
from gemmtune import nn as gnn
from gemmtune.benchmodel.models import build_model, parse_model
from gemmtune.benchmodel.phases import causal_phase


def paired(fa, fb, rounds: int = 15, reps: int = 3) -> dict:
    """Median over rounds of time(fb) / time(fa), each round both back to back (order alternating)."""
    ratios, ta, tb = [], [], []
    for r in range(rounds):
        pair = {}
        for name, f in ((("a", fa), ("b", fb)) if r % 2 == 0 else (("b", fb), ("a", fa))):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(reps):
                f()
            torch.cuda.synchronize()
            pair[name] = (time.perf_counter() - t0) / reps
        ta.append(pair["a"])
        tb.append(pair["b"])
        ratios.append(pair["a"] / pair["b"])
    ratios.sort()
    return {"speedup_median": statistics.median(ratios), "quartiles": [ratios[len(ratios) // 4],
            ratios[3 * len(ratios) // 4]], "a_ms": statistics.median(ta) * 1e3, "b_ms": statistics.median(tb) * 1e3}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2-0.5b")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--phases", default="prefill_b1_s512,decode_b1,decode_b16")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    dtype = getattr(torch, a.dtype)
    model = build_model(parse_model(a.model), dtype, "cuda")
    vocab = model.get_input_embeddings().weight.shape[0]
    names = a.phases.split(",")
    control, patched = copy.deepcopy(model), copy.deepcopy(model)
    del model
    ps = [causal_phase(p, vocab, "cuda") for p in names]
    t0 = time.perf_counter()
    with torch.no_grad():
        ds = gemmtune.tune_model(patched, fn=lambda: [p.example(patched) for p in ps], fast=True, extra_m=(1,),
                                 progress=False)
        gemmtune.patch(patched, dispatchers=ds, tune_missing=False, progress=False)
    tune_s = time.perf_counter() - t0
    real = gnn.choose_eager
    gnn.choose_eager = lambda tuned, aten, x: ("tuned",) + real(tuned, aten, x)[1:]  # keep tuned, log its times
    t0 = time.perf_counter()
    gate = gemmtune.gate_eager(patched, {p.name: (lambda p=p: p.run(patched)) for p in ps}, progress=True)
    gate_s = time.perf_counter() - t0
    gnn.choose_eager = real
    out = {"model": a.model, "dtype": a.dtype, "tune_s": tune_s, "gate_s": gate_s,
           "gate": [g.as_dict() for g in gate], "vs_control": {}}
    with torch.no_grad():
        for p in ps:
            p.run(control)
            out["vs_control"][p.name] = r = paired(lambda p=p: p.run(control), lambda p=p: p.run(patched))
            print(f"{p.name}: gated patched vs unpatched copy {r['speedup_median']:.3f}x (quartiles "
                  f"{r['quartiles'][0]:.3f}-{r['quartiles'][1]:.3f}; {r['a_ms']:.2f} / {r['b_ms']:.2f} ms)", flush=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
