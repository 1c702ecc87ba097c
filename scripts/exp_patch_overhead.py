"""Host cost of a patched layer on its cuBLAS path against torch's nn.Linear, CPU: a stack of 20
Linear(64, 64) layers called on one token, torch's against gemmtune.patch's with every layer's eager
path set to cuBLAS (what the first-sight timing chooses where a Triton launch costs more host time
than it saves). Prints microseconds per layer call over interleaved rounds, and the paired
difference.

    TRITON_INTERPRET=1 python scripts/exp_patch_overhead.py
    python scripts/exp_patch_overhead.py --device cuda --dtype bfloat16 --features 2048   # GPU
"""
import argparse
import copy
import statistics
import time
import warnings

import torch

import gemmtune

LAYERS, CALLS, ROUNDS = 20, 2000, 11


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--features", type=int, default=64)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    f, dt = a.features, getattr(torch, a.dtype)
    model = torch.nn.Sequential(*[torch.nn.Linear(f, f) for _ in range(LAYERS)]).to(a.device, dt)
    x = torch.randn(1, 1, f, device=a.device, dtype=dt)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    patched = copy.deepcopy(model)
    with torch.no_grad():
        gemmtune.patch(patched, example_inputs=[(x,)], eager_gate=False,
                       tune_fn=lambda problems, **kw: {p.key: "triton_mm:BM16-BN64-BK64-S1-W4-G8" for p in problems})
        for layer in patched:
            # The forwards look the remembered path up by the input's shape (session 29; keyed
            # (shape, dtype) before, which this script still wrote: it timed the tuned path since).
            layer._gemmtune_paths[x.shape] = "aten"
        assert all(set(layer.eager_paths.values()) == {"aten"} for layer in patched)
        per = {"torch": [], "patched": []}
        for _ in range(ROUNDS):
            for m, name in ((model, "torch"), (patched, "patched")):
                for _ in range(50):
                    m(x)
                sync()
                t = time.perf_counter()
                for _ in range(CALLS):
                    m(x)
                sync()
                per[name].append((time.perf_counter() - t) / CALLS / LAYERS * 1e6)
        diffs = sorted(p - t for p, t in zip(per["patched"], per["torch"]))
        for name, v in per.items():
            print(f"{name:8s} median {statistics.median(v):.2f} us per layer call (min {min(v):.2f}, max {max(v):.2f})")
        print(f"patched - torch, paired by round: median {statistics.median(diffs):+.2f} us "
              f"(quartiles {diffs[len(diffs) // 4]:+.2f} to {diffs[3 * len(diffs) // 4]:+.2f}), {ROUNDS} rounds")


if __name__ == "__main__":
    main()
