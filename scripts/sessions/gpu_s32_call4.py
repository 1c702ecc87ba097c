"""Session 32, call 4: the README's decode recipe (fuse, patch, compile with coordinate descent and
Inductor's CUDA graphs) run as written on Llama-1B; with ``--no-cudagraphs`` (session 33's first
call), the recipe as the README has it since (coordinate descent only), its logits checked against the same model
unfused and unpatched in eager mode, and the step's time against that eager step (CUDA events,
median of 20 after warm-up; a sanity figure, not an interleaved comparison)."""
import copy
import sys
import time

import torch
import transformers

import gemmtune
from gemmtune import benchmodel, fuse_compile

model = benchmodel.build_model(benchmodel.parse_model("llama-1b"), torch.bfloat16, "cuda")
ids = torch.randint(0, 1000, (1, 16), device="cuda")
ref = copy.deepcopy(model)


def example():  # a prompt, then one decode step on its KV cache
    cache = transformers.DynamicCache()
    model(input_ids=ids, past_key_values=cache, use_cache=True)
    return model(input_ids=ids[:, -1:], past_key_values=cache, use_cache=True).logits


def run_ref():
    cache = transformers.DynamicCache()
    ref(input_ids=ids, past_key_values=cache, use_cache=True)
    return ref(input_ids=ids[:, -1:], past_key_values=cache, use_cache=True).logits


def ms(fn):
    for _ in range(3):
        fn()
    times = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[10]


with torch.no_grad():
    want = run_ref().float()
    t0 = time.perf_counter()
    gemmtune.fuse_linears(model, fn=example)
    gemmtune.patch(model, dispatchers=gemmtune.tune_model(model, fn=example, fast=True), tune_missing=False)
    t1 = time.perf_counter()
    # As run in call 4, Inductor's CUDA graphs raised in the decode step: the README recipe now
    # leaves them out, and so does --no-cudagraphs.
    options = {"coordinate_descent_tuning": True}
    if "--no-cudagraphs" not in sys.argv[1:]:
        options["triton.cudagraphs"] = True
    model.forward = torch.compile(model.forward, dynamic=False, options=options)
    got = example()
    t2 = time.perf_counter()
    print(got.shape)
    err = ((got.float() - want).norm() / want.norm()).item()
    top = (got.float().argmax(-1) == want.argmax(-1)).float().mean().item()
    print(f"fuse + tune + patch {t1 - t0:.1f} s, first compiled call {t2 - t1:.1f} s")
    print(f"logits rel err vs unfused eager {err:.2e}, argmax agreement {top:.3f}, groups merged {fuse_compile.STATS}")
    print(f"prompt + step: eager unfused {ms(run_ref):.3f} ms, recipe {ms(example):.3f} ms")
