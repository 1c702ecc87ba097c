"""Does keeping the small M=1 GEMMs on gemmtune's tuned kernels beat handing every one back to
Inductor, inside a compiled decode step? (#17; session 33's kernel profile of the H200's
Llama-1B decode step put Inductor's reductions of the 525 MB head at 95% of the HBM floor and
those of the 8-13 MB q+k+v and o weights at 30-45%.)

The model is fused and patched once (the README's decode recipe), then compiled with
coordinate-descent tuning once per threshold of ``GEMMTUNE_GEMV_HANDBACK_MIN_BYTES`` (0: every
M=1 op handed back, the rule until session 35; 16 MiB: the small ones kept on the tuned kernels;
inf: none handed back; ``default``: the variable unset, gemmtune's default rule, which since
session 35 hands back none in a graph with merged fused groups and all in one without). Each
compiled decode step is captured in a CUDA graph, checked against the unfused eager model (logits,
argmax), profiled (gemmtune's kernels against Inductor's), and the replays are interleaved (benchmodel.time_interleaved). Writes one JSON.

    python scripts/exp_gemv_handback.py --out gemv_handback.json          # GPU
    TRITON_INTERPRET=1 python scripts/exp_gemv_handback.py --dry-run --out /tmp/x.json
        # tiny-llama in fp32 on the CPU, no graphs: the flow only (GEMV_DEVICES is CUDA's, so the
        # thresholds change nothing there)
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import time

import torch

import gemmtune
from gemmtune import benchmodel, torch_ops
from gemmtune.benchmodel.phases import causal_phase
from gemmtune.benchmodel.timing import time_interleaved

from compiled_variant import run_variant  # scripts/, beside this one


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="llama-1b")
    ap.add_argument("--phase", default="decode_b1")
    ap.add_argument("--thresholds", default="0,16777216,inf",
                    help="GEMMTUNE_GEMV_HANDBACK_MIN_BYTES values, comma-separated (0: hand back all; "
                         "default: the variable unset, gemmtune's own rule)")
    ap.add_argument("--no-fuse", action="store_true",
                    help="patch the model unfused (the H100's 0.921x of 2026-11-25, which made the hand-back "
                         "the default, was an unfused patched model)")
    ap.add_argument("--dry-run", action="store_true", help="tiny-llama, fp32, CPU, no graphs: the flow only")
    args = ap.parse_args()
    dry = args.dry_run
    device = "cpu" if dry else "cuda"
    dtype = torch.float32 if dry else torch.bfloat16
    name = "tiny-llama" if dry else args.model

    # Each threshold must compile afresh: no graph from Inductor's or AOTAutograd's caches, whose
    # keys do not hold the environment variable.
    from torch._inductor import config as iconfig
    iconfig.fx_graph_cache = False
    try:
        from torch._functorch import config as fconfig
        fconfig.enable_autograd_cache = False
    except (ImportError, AttributeError):
        pass

    model = benchmodel.build_model(benchmodel.parse_model(name), dtype, device)
    ref = copy.deepcopy(model)
    vocab = model.get_input_embeddings().num_embeddings
    phase = causal_phase(args.phase, vocab, device)
    # (dry: a tile as wide as the tiny model's K and most of its N, few programs for the interpreter to run)
    tune_kw = {"tune_fn": lambda ps, **kw: {p.key: "triton_mm:BM16-BN64-BK64-S1-W4-G8" for p in ps}} if dry \
        else {"fast": True}
    doc = {"model": name, "phase": args.phase, "fused": not args.no_fuse, "dtype": str(dtype), "device": device,
           "torch": torch.__version__, "gemmtune": gemmtune.__version__, "variants": {}}
    if not dry:
        import triton
        doc.update(gpu=torch.cuda.get_device_name(), triton=triton.__version__)
    with torch.no_grad():
        want = phase.run(ref).float()
        t0 = time.perf_counter()
        # fused (unless --no-fuse), tuned and patched in place (the README's recipe)
        if not args.no_fuse:
            gemmtune.fuse_linears(model, fn=lambda: phase.example(model))
        gemmtune.patch(model, dispatchers=gemmtune.tune_model(model, fn=lambda: phase.example(model),
                                                            progress=False, **tune_kw),
                       tune_missing=False, progress=False)
        doc["fuse_tune_patch_s"] = time.perf_counter() - t0
        from gemmtune.fuse import fused_names
        doc["fused_groups"] = len(fused_names(model))
        doc["patched_layers"] = sum(isinstance(m, gemmtune.nn.Linear) for m in model.modules())
        print(f"{'tune' if args.no_fuse else 'fuse + tune'} + patch {doc['fuse_tune_patch_s']:.1f} s: {doc['fused_groups']} groups fused, "
              f"{doc['patched_layers']} layers patched", flush=True)
        replays = {}
        for thr in args.thresholds.split(","):
            if thr == "default":
                os.environ.pop(torch_ops.GEMV_HANDBACK_ENV, None)
            else:
                os.environ[torch_ops.GEMV_HANDBACK_ENV] = thr
            torch._dynamo.reset()
            v = torch.compile(model, dynamic=False, options={"coordinate_descent_tuning": True})
            rec = doc["variants"].setdefault(thr, {})
            replay = run_variant(v, phase, want, rec, f"threshold {thr}", dry=dry)
            if replay is not None:
                replays[thr] = replay
        os.environ.pop(torch_ops.GEMV_HANDBACK_ENV, None)
        if len(replays) >= 2:
            t = time_interleaved(replays, rounds=9)
            doc["interleaved_ms"] = {k: r["ms"] for k, r in t.items()}
            doc["interleaved_spread"] = max(r["spread"] for r in t.values())
            base = t.get("0")
            if base is not None:
                doc["x_today"] = {k: base["ms"] / r["ms"] for k, r in t.items()}
            print("interleaved ms: " + ", ".join(f"{k} {r['ms']:.4f}" for k, r in t.items())
                  + (", x hand back all: " + ", ".join(f"{k} {x:.3f}" for k, x in doc["x_today"].items())
                     if "x_today" in doc else ""), flush=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1, default=float)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
