"""Which M=1 GEMVs should gemmtune hand back to Inductor under coordinate-descent tuning? (#17)

Session 9's profile of Llama-3.2-1B's decode step (max-autotune, CUDA graphs, H100) put Inductor's
fused M=1 reductions at very different fractions of the HBM floor: gate+up (RMSNorm fused) ~95%, the
LM head ~100%, but the down projection, with SiLU(gate)*up fused into it, at ~56% (19.75 us against
an 11 us floor), and q / o at ~54%. This script compiles one patched model several times with
coordinate-descent tuning, each time under another hand-back rule, captures each decode step in a
CUDA graph, times the replays interleaved with the unpatched compile, and profiles each replay.

Rules (POLICIES, comma-separated): ``all`` (hand back every static M=1 GEMV: the shipped rule),
``none`` (keep every tuned kernel), ``k_gt_n`` (keep where K > N: down projections),
``k_ge_n`` (keep where K >= N).

GPU only. Env: LAYERS (default 4: Llama-1B's sizes with fewer layers, to compile faster), POLICIES,
MA=1 (also time max-autotune). Usage: python scripts/exp_gemv_keep.py OUT_DIR
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from pathlib import Path

import torch

from gemmtune import torch_ops
from gemmtune.benchmodel import graphs, models, phases, profile, timing

brun = importlib.import_module("gemmtune.benchmodel.run")  # the package's ``run`` is a function

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else "gemv-keep")
OUT.mkdir(parents=True, exist_ok=True)
LAYERS = int(os.environ.get("LAYERS", "4"))
POLICIES = [p for p in os.environ.get("POLICIES", "all,none,k_gt_n,k_ge_n").split(",") if p]
KNOWN = ("all", "none", "k_gt_n", "k_ge_n")
for p in POLICIES:
    if p not in KNOWN:
        raise SystemExit(f"unknown policy {p!r}; known: {', '.join(KNOWN)}")

_shipped = torch_ops.gemv_to_inductor
state = {"policy": "all", "seen": []}


def keeps(policy: str, n: int, k: int) -> bool:
    return policy == "none" or (policy == "k_gt_n" and k > n) or (policy == "k_ge_n" and k >= n)


def rule(a, b=None):
    if not _shipped(a, b):
        return False
    n, k = int(b.shape[1]), int(a.shape[1])
    keep = keeps(state["policy"], n, k)
    state["seen"].append((state["policy"], n, k, "kept" if keep else "handed back"))
    return not keep


torch_ops.gemv_to_inductor = rule
# Each rule must compile afresh: the AOT and FX graph caches key the graph before the
# decomposition that applies the rule, so a second compile could return the first rule's code.
torch._inductor.config.fx_graph_cache = False
if hasattr(torch._functorch.config, "enable_autograd_cache"):
    torch._functorch.config.enable_autograd_cache = False


def log(msg: str) -> None:
    print(msg, flush=True)
    with open(OUT / "log.txt", "a") as f:
        f.write(msg + "\n")


def main() -> None:
    import transformers as tf
    cfg = models._config("llama-1b")
    cfg.num_hidden_layers = LAYERS
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = tf.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="sdpa")
    model = model.to(torch.bfloat16).eval()
    vocab = model.get_input_embeddings().weight.shape[0]
    ph = phases.causal_phase("decode_b1", vocab, "cuda")
    brun._roomy_dynamo()
    out: dict = {"layers": LAYERS, "policies": POLICIES, "modes": {}, "device": torch.cuda.get_device_name(),
                 "torch": torch.__version__}
    t0 = time.perf_counter()
    variants = brun.make_variants(model, ["eager_patch"], lambda m: [ph.example(m)], out,
                                  {"fast": True, "extra_m": (1,)})
    log(f"tuned in {time.perf_counter() - t0:.1f} s: {out.get('winners')}")
    patched = variants["patched"]

    replays, ref = {}, None
    names = ["compile_cdt"] + [f"patch_cdt_{p}" for p in POLICIES] + (["max_autotune"] if os.environ.get("MA") else [])
    for name in names:
        if name == "compile_cdt":
            m = torch.compile(model, dynamic=False, options=brun.CDT)
        elif name == "max_autotune":
            m = torch.compile(model, mode="max-autotune-no-cudagraphs", dynamic=False)
        else:
            state["policy"] = name[len("patch_cdt_"):]
            m = torch.compile(patched, dynamic=False, options=brun.CDT)
        t1 = time.perf_counter()
        with torch.no_grad():
            replay, info = graphs.capture(lambda m=m: ph.run(m), keep=lambda m=m: ph.state(m))
        y = replay().float()
        if ref is None:
            ref = y.clone()
        err = float((y - ref).norm() / ref.norm())
        out["modes"][name] = {"compile_and_capture_s": time.perf_counter() - t1, **info, "rel_err_vs_compile_cdt": err}
        log(f"{name}: compiled and captured in {time.perf_counter() - t1:.1f} s; logits rel err vs compile_cdt {err:.2e}")
        replays[name] = replay
    out["rule_log"] = sorted(set(state["seen"]))
    for r in out["rule_log"]:
        log(f"rule: {r}")
    with torch.no_grad():
        t = timing.time_interleaved(replays, rounds=9, min_round_ms=30.0)
    base = t["compile_cdt"]["ms"]
    for name, r in t.items():
        out["modes"][name]["timing"] = r
        log(f"{name:22s} {r['ms']:.4f} ms/step  spread {r.get('spread', float('nan')):.3%}  "
            f"x compile_cdt {base / r['ms']:.4f}")
    for name, fn in replays.items():
        pr = profile.profile_replay(fn, 20, top=60)
        out["modes"][name]["profile"] = pr
        log(f"--- {name}: {pr['us']:.1f} us/replay, {pr['kernels']:.0f} kernels")
        for k in pr["top"][:24]:
            log(f"  {k['us'] / max(k['per_replay'], 1):8.2f} us x{k['per_replay']:4.0f}  {k['name'][:110]}")
    (OUT / "gemv_keep.json").write_text(json.dumps(out, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
