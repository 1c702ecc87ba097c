"""What a user's eager ``generate`` gains from ``patch`` with the step gate (GPU).

A HF causal LM (random weights) is patched as the README says, with ``patch(model,
example_inputs=[dict(input_ids=prompt)], fast=True, extra_m=(1,))``: the prompt's pass is gated
there, and the decode step by ``gate_eager(model, {"decode": eager_gate.decode_step(model,
prompt)})``. Then greedy ``generate`` of NEW tokens, un-graphed, is timed against an unpatched
deep copy in paired rounds (order alternating), and the tokens are compared.

    python scripts/exp_generate_gate.py --model llama-1b --out gen.json        # GPU
"""
from __future__ import annotations

import argparse
import copy
import json
import time
import warnings

import torch

import gemmtune
from gemmtune import eager_gate
from gemmtune.benchmodel.models import build_model, parse_model

from exp_eager_gate import paired  # scripts/: the same paired rounds (order alternating)

NEW, ROUNDS = 32, 9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama-1b")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    model = build_model(parse_model(a.model), getattr(torch, a.dtype), "cuda")
    vocab = model.get_input_embeddings().weight.shape[0]
    ctl, pat = copy.deepcopy(model), copy.deepcopy(model)
    del model
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (1, a.prompt), generator=g).cuda()
    t0 = time.perf_counter()
    with torch.no_grad():
        gemmtune.patch(pat, example_inputs=[dict(input_ids=ids)], fast=True, extra_m=(1,), progress=False)
    patch_s = time.perf_counter() - t0
    prompt_gate = list(pat.__dict__.get("_gemmtune_gate", []))
    t0 = time.perf_counter()
    gate = gemmtune.gate_eager(pat, {"decode": eager_gate.decode_step(pat, ids)}, progress=True)
    gate_s = time.perf_counter() - t0

    def gen(m):
        with torch.no_grad():
            return m.generate(ids, max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False, pad_token_id=0)
    toks = {n: gen(m) for n, m in (("copy", ctl), ("patched", pat))}  # warm-up, and the tokens
    same = torch.equal(toks["copy"], toks["patched"])
    r = paired(lambda: gen(ctl), lambda: gen(pat), rounds=ROUNDS, reps=1)  # copy / patched, per round
    out = {"model": a.model, "dtype": a.dtype, "prompt": a.prompt, "new_tokens": NEW, "rounds": ROUNDS,
           "patch_s": patch_s, "gate_s": gate_s, "prompt_gate": prompt_gate,
           "decode_gate": [x.as_dict() for x in gate], "tokens_equal": same,
           "first_divergence": None if same else int((toks["copy"] != toks["patched"]).nonzero()[0, 1]),
           "copy_ms": r["a_ms"], "patched_ms": r["b_ms"], "speedup_median": r["speedup_median"],
           "quartiles": r["quartiles"]}
    print(json.dumps({k: v for k, v in out.items() if k != "decode_gate"}), flush=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
