"""Host cost of a patched layer on its cuBLAS path against torch's nn.Linear, CPU: a stack of 20
Linear(64, 64) layers called on one token, torch's against gemmtune.patch's with every layer's eager
path set to cuBLAS (what the first-sight timing chooses where a Triton launch costs more host time
than it saves). Prints microseconds per layer call, twice each, interleaved.

    TRITON_INTERPRET=1 python scripts/exp_patch_overhead.py
"""
import copy
import time
import warnings

import torch

import gemmtune

LAYERS, CALLS = 20, 2000


def main() -> None:
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(LAYERS)])
    x = torch.randn(1, 1, 64)
    patched = copy.deepcopy(model)
    with torch.no_grad():
        gemmtune.patch(patched, example_inputs=[(x,)],
                       tune_fn=lambda problems, **kw: {p.key: "triton_mm:BM16-BN64-BK64-S1-W4-G8" for p in problems})
        for layer in patched:
            layer._gemmtune_paths[(x.shape, x.dtype)] = "aten"
        for m, name in ((model, "torch"), (patched, "patched")) * 2:
            for _ in range(50):
                m(x)
            t = time.perf_counter()
            for _ in range(CALLS):
                m(x)
            print(f"{name:8s} {(time.perf_counter() - t) / CALLS / LAYERS * 1e6:.2f} us per layer call")


if __name__ == "__main__":
    main()
