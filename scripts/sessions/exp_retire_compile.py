"""Session 61 (#17): patch + torch.compile with the layers converted, against the same model with
the layers given back to torch (nn.retire) and their GEMMs routed by compile_route, and against the
unpatched model compiled. Llama-3.2-1B's config, bf16, decode steps at batch 1 and 16, each model
compiled with dynamic=False (as bench-model's patch_compile). Per step: un-graphed wall time
(interleaved rounds, median) and, under torch.profiler, the GPU kernels (count, summed device time,
and how many are gemmtune's Triton kernels). JSON to --out.

    python3 scripts/sessions/exp_retire_compile.py --out DIR        (GPU only)
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path

import torch

import gemmtune
from gemmtune import compile_route
from gemmtune.benchmodel.models import build_causal
from gemmtune.eager_gate import decode_step


def wall(fn, reps: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps * 1e3


def kernels(fn) -> dict:
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    evs = [e for e in prof.events() if e.device_type.name == "CUDA"]
    names = {}
    for e in evs:
        names[e.name] = names.get(e.name, 0) + e.device_time
    top = sorted(names.items(), key=lambda kv: -kv[1])[:8]
    return {"count": len(evs), "device_us": sum(e.device_time for e in evs),
            "triton_gemm": sum(1 for e in evs if any(k in e.name for k in ("_skinny", "_tiled", "persistent", "splitk",
                                                                             "_static"))),
            "top": [(n[:80], round(t, 1)) for n, t in top]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="llama-1b")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--phases", default="b1,b16")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    base = build_causal(args.model, torch.bfloat16, "cuda")
    batch = {"b1": 1, "b16": 16}
    prompts = {p: torch.randint(0, 1000, (batch[p], 32), device="cuda") for p in args.phases.split(",")}

    def example(m):
        with torch.no_grad():
            for ids in prompts.values():
                decode_step(m, ids)()
    t0 = time.perf_counter()
    ds = gemmtune.tune_model(base, fn=lambda: example(base), fast=True)
    tune_s = time.perf_counter() - t0
    conv = copy.deepcopy(base)
    gemmtune.patch(conv, dispatchers=ds, tune_missing=False)
    ret = copy.deepcopy(base)
    gemmtune.patch(ret, dispatchers=ds, tune_missing=False)
    res = gemmtune.gate_eager(ret, {k: decode_step(ret, ids) for k, ids in prompts.items()}, retire=True)
    n_ret = sum(gemmtune.nn.retired(m) for m in ret.modules())
    n_conv = sum(isinstance(m, gemmtune.nn.Linear) for m in conv.modules())
    print(f"tuned in {tune_s:.1f} s; converted copy: {n_conv} Linear layers converted; retired copy: {n_ret} retired; "
          f"gate {[r.kept for r in res]}", flush=True)
    models = {"compile": base, "patch_compile_converted": conv, "patch_compile_retired": ret}
    compiled = {k: torch.compile(m, dynamic=False) for k, m in models.items()}
    report = {"tune_s": tune_s, "retired_layers": n_ret, "converted_layers": n_conv, "phases": {}}
    for ph, ids in prompts.items():
        steps = {}
        for k, c in compiled.items():
            before = dict(compile_route.STATS)
            t1 = time.perf_counter()
            st = decode_step(c, ids)
            with torch.no_grad():
                y = st()
                st()
            steps[k] = st
            print(f"{ph} {k}: first calls {time.perf_counter() - t1:.1f} s, routes {dict(compile_route.STATS)} "
                  f"(before {before})", flush=True)
            report["phases"].setdefault(ph, {}).setdefault(k, {})["logit_absmax"] = float(y.float().abs().max())
        times = {k: [] for k in steps}
        order = list(steps)
        with torch.no_grad():
            for r in range(args.rounds):
                for k in order[r % len(order):] + order[:r % len(order)]:
                    times[k].append(wall(steps[k], args.reps))
            for k in steps:
                rec = report["phases"][ph][k]
                rec["ms_median"] = statistics.median(times[k])
                rec["ms_rounds"] = times[k]
                rec["vs_compile"] = statistics.median(a / b for a, b in zip(times["compile"], times[k]))
                rec["kernels"] = kernels(steps[k])
                print(f"{ph} {k}: {rec['ms_median']:.3f} ms un-graphed, compile/this {rec['vs_compile']:.3f}; "
                      f"kernels {rec['kernels']['count']} ({rec['kernels']['triton_gemm']} gemmtune Triton), "
                      f"device {rec['kernels']['device_us']:.0f} us; top {rec['kernels']['top'][:4]}", flush=True)
    (out / "retire_compile.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
