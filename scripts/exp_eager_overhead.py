"""Where does eager + patch lose its ~4% at decode? (#17: 'eager + patch never slower'; session
34 measured Llama-1B's un-graphed decode step at 0.958x eager (95% CI 0.954-0.963) with 161 of 162
patched layer paths on F.linear.)

Three variants of one model, each step timed interleaved (host-bound: the GPU idles): the model
itself, a deep copy (a control: bench-model's patched model is one), and the copy patched as
bench-model patches it. Then, per variant, cProfile over 20 steps (where host time goes, by
function), and the host time of one layer's call, patched (F.linear path) against torch's
nn.Linear with the same weight. Writes one JSON.

    python scripts/exp_eager_overhead.py --out eager_overhead.json           # GPU
    TRITON_INTERPRET=1 python scripts/exp_eager_overhead.py --dry-run --out /tmp/x.json   # CPU flow
"""
from __future__ import annotations

import argparse
import copy
import cProfile
import json
import pstats
import statistics
import time

import torch

import gemmtune
from gemmtune import benchmodel
from gemmtune.benchmodel.phases import causal_phase
from gemmtune.benchmodel.run import eager_path_summary


def _top(prof: cProfile.Profile, n: int = 40) -> list[dict]:
    st = pstats.Stats(prof)
    rows = []
    for (file, line, fn), (cc, nc, tt, ct, _) in st.stats.items():
        rows.append({"fn": f"{file.rsplit('/', 2)[-1]}:{line}:{fn}", "calls": nc, "tottime_us": tt * 1e6,
                     "cumtime_us": ct * 1e6})
    rows.sort(key=lambda r: -r["tottime_us"])
    return rows[:n]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="llama-1b")
    ap.add_argument("--phase", default="decode_b1")
    ap.add_argument("--rounds", type=int, default=41)
    ap.add_argument("--dry-run", action="store_true", help="tiny-llama, fp32, CPU: the flow only")
    args = ap.parse_args()
    dry = args.dry_run
    device = "cpu" if dry else "cuda"
    dtype = torch.float32 if dry else torch.bfloat16
    name = "tiny-llama" if dry else args.model
    sync = (lambda: None) if dry else torch.cuda.synchronize
    model = benchmodel.build_model(benchmodel.parse_model(name), dtype, device)
    vocab = model.get_input_embeddings().num_embeddings
    phase = causal_phase(args.phase, vocab, device)
    # (dry: a tile as wide as the tiny model's K and most of its N, few programs for the interpreter to run)
    tune_kw = {"tune_fn": lambda ps, **kw: {p.key: "triton_mm:BM16-BN64-BK64-S1-W4-G8" for p in ps}} if dry \
        else {"fast": True}
    doc: dict = {"model": name, "phase": args.phase, "torch": torch.__version__}
    with torch.no_grad():
        copied = copy.deepcopy(model)
        patched = copy.deepcopy(model)
        ds = gemmtune.tune_model(patched, fn=lambda: phase.example(patched), progress=False, **tune_kw)
        gemmtune.patch(patched, dispatchers=ds, tune_missing=False, progress=False)
        variants = {"eager": model, "copy": copied, "patched": patched}
        for v in variants.values():  # first calls: the prompt, eager paths chosen
            for _ in range(3):
                phase.run(v)
        if dry:  # CPU paths run the interpreter untimed: put them on F.linear, as the GPU's timing does
            for m in patched.modules():
                for shape in list(getattr(m, "_gemmtune_paths", {})):
                    m._gemmtune_paths[shape] = "aten"
        sync()
        doc["eager_paths"] = eager_path_summary(patched)["counts"]
        times: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(args.rounds):
            for k, v in variants.items():
                sync()
                t0 = time.perf_counter()
                for _ in range(10):
                    phase.run(v)
                sync()
                times[k].append((time.perf_counter() - t0) / 10 * 1e3)
        doc["step_ms_median"] = {k: statistics.median(t) for k, t in times.items()}
        doc["x_eager"] = {k: doc["step_ms_median"]["eager"] / m for k, m in doc["step_ms_median"].items()}
        print("step ms:", {k: round(x, 4) for k, x in doc["step_ms_median"].items()},
              "x eager:", {k: round(x, 4) for k, x in doc["x_eager"].items()}, flush=True)
        doc["cprofile"] = {}
        for k, v in variants.items():
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(20):
                phase.run(v)
            prof.disable()
            sync()
            doc["cprofile"][k] = _top(prof)
            tot = sum(r["tottime_us"] for r in _top(prof, 100000)) / 20
            print(f"cprofile {k}: {tot:.0f} us host per step (profiled)", flush=True)
        # one layer: the patched call (its cached F.linear path) against nn.Linear, same weight
        lay = next(m for m in patched.modules() if isinstance(m, gemmtune.nn.Linear)
                   and "aten" in set(getattr(m, "eager_paths", {}).values()))
        shape = next(s for (s, _), p in lay.eager_paths.items() if p == "aten")
        plain = torch.nn.Linear(lay.in_features, lay.out_features, bias=lay.bias is not None, device=device, dtype=dtype)
        plain.weight = lay.weight
        plain.bias = lay.bias
        x = torch.randn(shape, device=device, dtype=dtype)
        per = {"nn.Linear": [], "patched": []}
        for _ in range(15):
            for k, f in (("nn.Linear", plain), ("patched", lay)):
                sync()
                t0 = time.perf_counter()
                for _ in range(200):
                    f(x)
                per[k].append((time.perf_counter() - t0) / 200 * 1e6)  # host: launches are queued
                sync()
        doc["layer_host_us"] = {k: statistics.median(t) for k, t in per.items()}
        doc["layer_weight"] = {"stride": list(lay.weight.stride()), "shape": list(lay.weight.shape)}
        print("one layer host us/call:", {k: round(x, 2) for k, x in doc["layer_host_us"].items()}, flush=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1, default=float)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
