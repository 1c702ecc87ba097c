"""Where an un-graphed, host-bound decode step of a patched model spends its extra host time.

    python scripts/diag_eager_host.py [--model llama-1b] [--out DIR]     # GPU

Times, interleaved in paired rounds (benchmodel.timing), the model as built ("eager"), a deep copy
of it left unpatched ("copy": bench-model's patched model is a deep copy, so this separates the
copy from the patch), the deep copy tuned with --fast and patched ("patch"), and a copy of that
with every layer's remembered path set to F.linear ("patch_aten": the forwards' Python without
the tuned kernels), on one decode step at batch 1. Then profiles 30 steps of each of eager and patch with cProfile and writes both
profiles' heaviest functions and the functions whose call counts differ.
"""
from __future__ import annotations

import argparse
import cProfile
import copy
import io
import json
import pstats
from pathlib import Path

import torch

from gemmtune.benchmodel.models import build_model, parse_model
from gemmtune.benchmodel.phases import causal_phase
from gemmtune.benchmodel.run import make_variants
from gemmtune.benchmodel.timing import paired_ratio, time_interleaved


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama-1b")
    ap.add_argument("--out", default="diag-eager")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke run (every layer tuned to cuBLAS, untimed worker-free)")
    ap.add_argument("--rounds", type=int, default=21, help="interleaved rounds per run (two runs)")
    ap.add_argument("--no-profile", action="store_true", help="skip the cProfile pass")
    args = ap.parse_args()
    cuda = args.device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    model = build_model(parse_model(args.model), torch.bfloat16 if cuda else torch.float32, args.device)
    ph = causal_phase("decode_b1", model.config.vocab_size, args.device)
    plain_copy = copy.deepcopy(model)
    rec: dict = {"modes": {}}
    variants = make_variants(model, ["eager", "eager_patch"], lambda m: [ph.example(m)], rec,
                             {"fast": True, "extra_m": (1,)} if cuda else
                             {"tune_fn": lambda ps, **kw: {p.key: "aten" for p in ps}, "extra_m": (1,)})
    # "patch_aten": the patched model with every remembered path set to F.linear after the warm-up,
    # so patch against patch_aten is what the tuned layers cost or save, and patch_aten against
    # copy what the patched forwards' own Python costs.
    # "patch_torch": a copy of the patched model with every patched layer's class set back to
    # torch's (its forward is torch's again; everything else the patch left stays): patch_torch
    # against patch isolates the patched forwards' own Python from any other state of the model.
    # "copy_late": a plain copy made after the tuning, as the patched copy's tensors were placed.
    fns = {"eager": model, "copy": plain_copy, "patch": variants["eager_patch"],
           "patch_aten": copy.deepcopy(variants["eager_patch"]),
           "patch_torch": copy.deepcopy(variants["eager_patch"]), "copy_late": copy.deepcopy(model)}
    for mod in fns["patch_torch"].modules():
        if hasattr(type(mod), "_gemmtune_torch_class"):
            mod.__class__ = type(mod)._gemmtune_torch_class()
    res: dict = {"tune_s": rec.get("tune_s"), "winners": rec.get("winners")}
    with torch.no_grad():
        for m in fns.values():
            for _ in range(5):
                ph.run(m)
        res["tuned_paths"] = _count_paths(fns["patch"])
        for mod in fns["patch_aten"].modules():
            paths = mod.__dict__.get("_gemmtune_paths")
            if paths is not None:
                for shape in paths:
                    paths[shape] = "aten"
        res["patch_aten_paths"] = _count_paths(fns["patch_aten"])
        print("remembered paths:", res["tuned_paths"], "| patch_aten:", res["patch_aten_paths"], flush=True)
        for rep in range(2):
            t = time_interleaved({k: (lambda m=m: ph.run(m)) for k, m in fns.items()}, rounds=args.rounds,
                                 min_round_ms=100.0)
            res[f"run{rep}"] = {k: {"ms": v["ms"], "spread": v["spread"]} for k, v in t.items()}
            for k in ("copy", "patch", "patch_aten"):
                res[f"run{rep}"][f"eager_over_{k}"] = paired_ratio(t["eager"]["rounds"], t[k]["rounds"])
            res[f"run{rep}"]["copy_over_patch"] = paired_ratio(t["copy"]["rounds"], t["patch"]["rounds"])
            res[f"run{rep}"]["copy_over_patch_aten"] = paired_ratio(t["copy"]["rounds"], t["patch_aten"]["rounds"])
            res[f"run{rep}"]["patch_aten_over_patch"] = paired_ratio(t["patch_aten"]["rounds"], t["patch"]["rounds"])
            res[f"run{rep}"]["patch_torch_over_patch_aten"] = paired_ratio(t["patch_torch"]["rounds"],
                                                                          t["patch_aten"]["rounds"])
            res[f"run{rep}"]["copy_over_patch_torch"] = paired_ratio(t["copy"]["rounds"], t["patch_torch"]["rounds"])
            res[f"run{rep}"]["copy_late_over_copy"] = paired_ratio(t["copy_late"]["rounds"], t["copy"]["rounds"])
            print(json.dumps(res[f"run{rep}"], indent=1), flush=True)
        stats = {}
        for k in (() if args.no_profile else ("eager", "patch")):
            m = fns[k]
            sync()
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(30):
                ph.run(m)
            sync()
            pr.disable()
            s = io.StringIO()
            st = pstats.Stats(pr, stream=s)
            st.sort_stats("tottime").print_stats(30)
            (out_dir / f"profile_{k}.txt").write_text(s.getvalue())
            stats[k] = {f"{fn[0].split('/')[-1]}:{fn[1]}:{fn[2]}": (v[1], v[2]) for fn, v in st.stats.items()}
            print(k, "profiled total s", round(st.total_tt, 4), flush=True)
    (out_dir / "diag.json").write_text(json.dumps(res, indent=1))
    if args.no_profile:
        return
    diff = []
    for f in set(stats["eager"]) | set(stats["patch"]):
        ce, te = stats["eager"].get(f, (0, 0.0))
        cp, tp = stats["patch"].get(f, (0, 0.0))
        if ce != cp or abs(tp - te) > 2e-3:
            diff.append((tp - te, f, ce, cp, te, tp))
    diff.sort(reverse=True)
    lines = ["d_tottime_s  function  calls_eager calls_patch tottime_eager tottime_patch"]
    lines += [f"{d:+.4f} {f} {ce} {cp} {te:.4f} {tp:.4f}" for d, f, ce, cp, te, tp in diff[:60]]
    (out_dir / "profile_diff.txt").write_text("\n".join(lines))
    print("\n".join(lines[:30]))


def _count_paths(model) -> dict:
    """{path: number of (layer, shape) entries} over the model's patched layers."""
    out: dict = {}
    for mod in model.modules():
        for p in (mod.__dict__.get("_gemmtune_paths") or {}).values():
            out[p] = out.get(p, 0) + 1
    return out


if __name__ == "__main__":
    main()
