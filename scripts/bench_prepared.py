"""Eager per-call cost of gemmtune choices: Triton's generic launch against the dispatcher's
prepared launch (kernels.prepare_choice), beside cuBLAS, with each path's device time. GPU only.

    python scripts/bench_prepared.py [--out DIR] [--calls 50] [--rounds 5]

For every case (a shape, a choice, B as a plain tensor or a weight's transposed view, with or
without a fused bias):
* ``cublas``: ``torch.mm(a, b)`` (``torch.addmm`` with a bias), what a model calls without gemmtune;
* ``generic``: ``kernels.run_choice`` into a fresh output, the family looked up and every Triton
  argument bound on each call (the bench's "eager µs" column);
* ``dispatcher``: a ``compile_mm`` dispatcher serving that choice (no tuning, no first-call
  check), the path ``compile_mm``, ``gemmtune.nn.Linear`` and ``patch`` take.
Eager: wall µs per call over ``--calls`` back-to-back calls, synchronised at both ends, the best
of ``--rounds`` rounds, the three paths interleaved round by round. Device: CudaGraphTimer
(L2-cold, CUDA-graph replays, median). Every dispatcher output is checked against fp64.
Writes bench_prepared.json and bench_prepared.md under ``--out`` (default $OUT or .).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import torch

CASES = [  # label, M, N, K, dtype, choice, B ("row" tensor or "weight": W.t() of a Parameter), bias
    ("tiny_mn_32", 32, 32, 28672, "bfloat16", "decompose_k:s64", "row", False),
    ("llama3_8b_down_m1", 1, 4096, 14336, "bfloat16", "decompose_k:s4", "weight", False),
    ("llama3_8b_down_m1 +bias", 1, 4096, 14336, "bfloat16", "decompose_k:s4", "weight", True),
    ("unaligned_333", 333, 4097, 1025, "bfloat16", "pad+persistent_tma:BM128-BN128-BK64-S4-W4-G8-F", "row", False),
    ("unaligned_333 +bias", 333, 4097, 1025, "bfloat16", "pad+persistent_tma:BM128-BN128-BK64-S4-W4-G8-F",
     "row", True),
    ("unaligned_777", 777, 1531, 2049, "float16", "pad+aten", "row", False),
    ("prime_1021", 1021, 2053, 509, "bfloat16", "pad+persistent_tma:BM128-BN128-BK64-S4-W4-G8-F", "row", False),
    ("cube_1000", 1000, 1000, 1000, "bfloat16", "persistent_tma:BM128-BN128-BK64-S4-W8-G8", "row", False),
    ("gpt2_lmhead_m96 weight", 96, 50257, 768, "bfloat16", "pad+triton_mm:BM64-BN128-BK64-S3-W4-G8", "weight", False),
    ("gpt2_lmhead_m96 weight, pad+aten", 96, 50257, 768, "bfloat16", "pad+aten", "weight", False),
    ("tiny_mn_fp32", 64, 64, 32768, "float32", "splitk:BM16-BN32-BK64-S3-W2-G8-SK64-atomic", "row", False),
    ("tiny_mn_32 splitk", 32, 32, 28672, "bfloat16", "splitk:BM32-BN16-BK128-S5-W2-G8-SK64-atomic", "row", False),
]
N_SETS = 4


def run_case(case, calls: int, rounds: int) -> dict:
    from gemmtune import kernels
    from gemmtune.bench.timing import CudaGraphTimer, wall_ms_per_call
    from gemmtune.configs import Choice
    from gemmtune.dispatch import compile_mm
    from gemmtune.epilogue import bind
    from gemmtune.kernels.splitk import SplitKWorkspace
    from gemmtune.verify import compare

    label, m, n, k, dtype, cid, b_kind, with_bias = case
    dt = getattr(torch, dtype)
    choice = Choice.parse(cid)
    sets = []
    for _ in range(N_SETS):
        a = torch.randn(m, k, device="cuda", dtype=dt)
        if b_kind == "weight":
            b = torch.nn.Parameter(torch.randn(n, k, device="cuda", dtype=dt), requires_grad=False).t()
        else:
            b = torch.randn(k, n, device="cuda", dtype=dt)
        sets.append((a, b, torch.randn(n, device="cuda", dtype=dt) if with_bias else None))
    disp = compile_mm(m=m, n=n, k=k, dtype=dtype, layout_b="col" if b_kind == "weight" else "row",
                      tune_fn=lambda ps, **kw: {p: choice for p in ps}, verify=False, progress=False)
    ws = SplitKWorkspace()
    held: list = [None] * N_SETS  # each output kept for a pass over the sets (bench.inductor.held_launch)

    def cublas(i):
        a, b, bias = sets[i]
        held[i] = torch.mm(a, b) if bias is None else torch.addmm(bias, a, b)

    def generic(i):
        a, b, bias = sets[i]
        out = torch.empty(m, n, device="cuda", dtype=dt)
        kernels.run_choice(choice, a, b, out, workspace=ws,
                           epilogue=None if bias is None else bind(m, n, dt, a.device, bias=bias))
        held[i] = out

    def dispatcher(i):
        a, b, bias = sets[i]
        held[i] = disp(a, b) if bias is None else disp(a, b, bias=bias)

    paths = {"cublas": cublas, "generic": generic, "dispatcher": dispatcher}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for f in paths.values():
            for i in range(N_SETS):
                f(i)
        torch.cuda.synchronize()
    not_prepared = [str(w.message) for w in caught if "prepared launch" in str(w.message)]
    errs = []
    for i in range(N_SETS):
        a, b, bias = sets[i]
        dispatcher(i)
        ref = a.double() @ b.double() + (0 if bias is None else bias.double())
        errs.append(compare(held[i], ref, 8e-3 if dt != torch.float32 else 1e-4).ok)
    eager = {p: [] for p in paths}
    for _ in range(rounds):
        for p, f in paths.items():
            eager[p].append(wall_ms_per_call(f, calls) * 1e3)
    timer = CudaGraphTimer()
    device = {p: timer.measure(f, N_SETS).device_ms * 1e3 for p, f in paths.items()}
    # The cached closure (plain or fused) is the prepared one where it closes over ``matches``.
    runs = [*disp._fast.values(), *disp._fast_fused.values()]
    prepared = bool(runs) and all("matches" in getattr(getattr(r, "__code__", None), "co_freevars", ()) for r in runs)
    return {"label": label, "shape": f"{m}x{n}x{k}", "dtype": dtype, "choice": cid, "b": b_kind, "bias": with_bias,
            "eager_us": {p: min(v) for p, v in eager.items()}, "eager_us_all": eager,
            "device_us": device, "correct": all(errs), "prepared_closure": prepared,
            "not_prepared_warnings": not_prepared}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_prepared: needs a CUDA GPU", file=sys.stderr)
        return 2
    rows = []
    for case in CASES:
        try:
            r = run_case(case, args.calls, args.rounds)
        except Exception as e:  # noqa: BLE001 - one case's failure is reported, the rest still run
            r = {"label": case[0], "choice": case[5], "error": f"{type(e).__name__}: {e}"[:400]}
        rows.append(r)
        print(json.dumps(r), flush=True)
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "triton": __import__("triton").__version__, "date": time.strftime("%Y-%m-%d")}
    with open(os.path.join(args.out, "bench_prepared.json"), "w") as f:
        json.dump({"env": env, "calls": args.calls, "rounds": args.rounds, "rows": rows}, f, indent=1)
    lines = [f"# Eager µs per call: generic launch vs prepared (dispatcher), {env['gpu']}, torch {env['torch']}, "
             f"triton {env['triton']}, {env['date']}", "",
             "| case | choice | B | eager cuBLAS | eager generic | eager dispatcher | device cuBLAS | device generic "
             "| device dispatcher | correct | prepared |", "|---|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['label']} | `{r['choice']}` | error: {r['error']} |")
            continue
        e, d = r["eager_us"], r["device_us"]
        lines.append(f"| {r['label']} | `{r['choice']}` | {r['b']} | {e['cublas']:.1f} | {e['generic']:.1f} | "
                     f"{e['dispatcher']:.1f} | {d['cublas']:.2f} | {d['generic']:.2f} | {d['dispatcher']:.2f} | "
                     f"{r['correct']} | {r['prepared_closure'] and not r['not_prepared_warnings']} |")
    with open(os.path.join(args.out, "bench_prepared.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(r.get("correct") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
