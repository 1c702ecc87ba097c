"""Python function calls of one un-graphed decode step: a patched model with every layer on its
F.linear path against an unpatched deep copy (tiny-llama, CPU; cProfile call counts, which do not
depend on timing noise). Prints the per-step difference of each function's call count.

    TRITON_INTERPRET=1 python scripts/diag_patched_calls.py
"""
import copy
import cProfile
import pstats
import warnings

import torch

import gemmtune
from gemmtune.benchmodel.models import build_model, parse_model
from gemmtune.benchmodel.phases import causal_phase

STEPS = 10
TRITON = "triton_mm:BM16-BN64-BK64-S1-W4-G8"


def counts(fn) -> dict[str, int]:
    """{file:line:function: calls} over STEPS calls of ``fn``."""
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(STEPS):
        fn()
    pr.disable()
    return {f"{k[0].split('/')[-1]}:{k[1]}:{k[2]}": v[1] for k, v in pstats.Stats(pr).stats.items()}


def main() -> None:
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    model = build_model(parse_model("tiny-llama"), torch.float32, "cpu")
    vocab = model.get_input_embeddings().weight.shape[0]
    ctl, pat = copy.deepcopy(model), copy.deepcopy(model)
    ph = causal_phase("decode_b1", vocab, "cpu")
    with torch.no_grad():
        gemmtune.patch(pat, hints={"m": [1]}, progress=False, convert_aten_layers=True,
                       tune_fn=lambda problems, **kw: {p.key: TRITON for p in problems})
        ph.run(pat)
        ph.run(ctl)
        for m in pat.modules():  # every layer's eager path on F.linear, as the gate leaves a lost step
            if "_gemmtune_eager" in m.__dict__:
                for s in list(m._gemmtune_paths):
                    m._gemmtune_paths[s] = "aten"
        ph.run(pat)
        res = {"ctl": counts(lambda: ph.run(ctl)), "pat": counts(lambda: ph.run(pat))}
    for k in sorted(set(res["ctl"]) | set(res["pat"])):
        d = res["pat"].get(k, 0) - res["ctl"].get(k, 0)
        if d:
            print(f"{d / STEPS:+.1f} calls a step  {k}")


if __name__ == "__main__":
    main()
