"""Do ``-pdl`` GEMV strips speed up a compiled decode step? (#15, #17; scripts/exp_pdl.py measured
1.24x cuBLAS on a norm -> GEMV chain, 1.12x when the norm knows no PDL.)

The model is fused and tuned once (``--fast``), the README's decode recipe. Then two copies are
patched:
- ``tuned``: with the tuner's winners as they are;
- ``pdl``: with every one-slice CUDA-core skinny winner on a K-contiguous weight swapped for its
  ``-pdl`` twin (the same strip, launched with programmatic dependent launch, its first weight
  tile loaded before the wait; kernels.skinny).

Each copy is compiled (dynamic=False; ``--cdt``: with coordinate-descent tuning). The M=1
hand-back is left at gemmtune's default: none in a fused graph. Each is compiled with Inductor's
own PDL off, and with ``--inductor-pdl``, also with it on (``torch._inductor.config.triton.enable_pdl``,
``TORCHINDUCTOR_ENABLE_PDL=1``). With it on, the Inductor kernels before each GEMV let it launch
early.

``--pdl-all`` adds a third copy, ``pdl_all``: every GEMM at M <= 8 on a K-contiguous weight is
tuned again among skinny's strips only (``--fast``) and served by the winner's ``-pdl`` twin, even
where cuBLAS won the first tuning (session 37: a ``-pdl`` strip gains ~1 us only after a kernel
that lets it launch early, which back-to-back tuning cannot see). ``--only`` keeps the named
variants (e.g. ``tuned,pdl_all+inductor_pdl``) to save compile time.

``--max-autotune`` adds the unpatched, unfused model under max-autotune, with the same Inductor
PDL settings: the #17 comparison, side by side.

Every variant's step is:
- captured in a CUDA graph;
- checked against the eager model (logits, argmax);
- profiled;
- replayed interleaved with the others.

The script writes one JSON.

    python scripts/exp_pdl_model.py --out pdl_model.json --inductor-pdl            # GPU (Hopper)
    TRITON_INTERPRET=1 python scripts/exp_pdl_model.py --dry-run --out /tmp/x.json
        # tiny-llama in fp32 on the CPU, eager, no graphs: the flow, and the twins' arithmetic
"""
from __future__ import annotations

import argparse
import copy
import json
import time

import torch

import gemmtune
from gemmtune import benchmodel
from gemmtune.benchmodel.phases import causal_phase
from gemmtune.benchmodel.timing import time_interleaved
from gemmtune.pdl import pdl_twin

from compiled_variant import run_variant  # scripts/, beside this one

# the dry run's winner at M=1 on a Linear's weight (16 columns a program: few programs for the interpreter)
DRY_GEMV = "skinny:BM1-BN16-BK64-SK1-S1-W4-core-det"


def dry_winner(p) -> str:
    """The dry run's tuning: the GEMV strip at M=1 on a Linear's weight, cuBLAS elsewhere."""
    return DRY_GEMV if p.m == 1 and p.layout_b == "col" else "aten"


def twin_id(choice_id: str | None, layout_b: str) -> str | None:
    """gemmtune.pdl.pdl_twin's id (None stays None: no winner)."""
    return pdl_twin(choice_id, layout_b).id if choice_id else choice_id


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="llama-1b")
    ap.add_argument("--phase", default="decode_b1")
    ap.add_argument("--cdt", action="store_true", help="compile with coordinate-descent tuning")
    ap.add_argument("--inductor-pdl", action="store_true", help="also compile each copy with Inductor's PDL on")
    ap.add_argument("--max-autotune", action="store_true",
                    help="also the unpatched model under torch.compile max-autotune (with Inductor's PDL off, and on "
                         "too with --inductor-pdl): ~6 min of compiling each on an H200")
    ap.add_argument("--pdl-all", action="store_true",
                    help="also a copy with every M<=8 GEMM on a K-contiguous weight served by a -pdl skinny strip")
    ap.add_argument("--only", default="", help="comma-separated variant names to run (default: all)")
    ap.add_argument("--dry-run", action="store_true",
                    help="tiny-llama (or --model tiny-*), fp32, CPU, no graphs: the flow only")
    args = ap.parse_args()

    def save(doc: dict) -> None:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1, default=float)

    dry = args.dry_run
    device, dtype = ("cpu", torch.float32) if dry else ("cuda", torch.bfloat16)
    # a dry run takes a tiny-* model (tiny-qwen2: biases on q/k/v, so addmm problems), else tiny-llama
    name = (args.model if args.model.startswith("tiny-") else "tiny-llama") if dry else args.model

    from torch._inductor import config as iconfig
    iconfig.fx_graph_cache = False  # each variant compiles afresh (the cache keys hold no PDL flag of ours)
    model = benchmodel.build_model(benchmodel.parse_model(name), dtype, device)
    ref = copy.deepcopy(model)
    phase = causal_phase(args.phase, model.get_input_embeddings().num_embeddings, device)
    doc: dict = {"model": name, "phase": args.phase, "dtype": str(dtype), "device": device, "cdt": args.cdt,
                 "torch": torch.__version__, "gemmtune": gemmtune.__version__, "variants": {}}
    if not dry:
        import triton
        doc.update(gpu=torch.cuda.get_device_name(), triton=triton.__version__)
    with torch.no_grad():
        want = phase.run(ref).float()
        gemmtune.fuse_linears(model, fn=lambda: phase.example(model))
        result: dict = {}

        def tune_once(problems, **kw):
            if dry:
                return {p.key: dry_winner(p) for p in problems}
            result["r"] = gemmtune.tune(problems, **kw)
            return result["r"]

        t0 = time.perf_counter()
        ds_tuned = gemmtune.tune_model(model, fn=lambda: phase.example(model), tune_fn=tune_once,
                                       progress=False, **({} if dry else {"fast": True}))
        doc["tune_s"] = time.perf_counter() - t0
        r = result.get("r")
        winners = {s.problem.key: (s.best, s.problem.layout_b) for s in r.shapes} if r is not None else {}
        copies = {"tuned": model, "pdl": copy.deepcopy(model)}
        if args.pdl_all:
            copies["pdl_all"] = copy.deepcopy(model)
        plain = copy.deepcopy(ref) if args.max_autotune else None  # max-autotune's model: unfused, unpatched
        gemmtune.patch(copies["tuned"], dispatchers=ds_tuned, tune_missing=False, progress=False)
        if dry:
            def twins(problems, **kw):
                return {p.key: twin_id(dry_winner(p), p.layout_b) for p in problems}
        else:
            def twins(problems, **kw):
                return {p.key: twin_id(*winners.get(p.key, ("aten", p.layout_b))) for p in problems}
        ds_pdl = gemmtune.tune_model(copies["pdl"], fn=lambda: phase.example(copies["pdl"]), tune_fn=twins,
                                     progress=False)
        gemmtune.patch(copies["pdl"], dispatchers=ds_pdl, tune_missing=False, progress=False)
        if args.pdl_all:
            def strips(problems, **kw):
                rows = [p for p in problems if p.m <= 8 and p.layout_b == "col"]
                if dry:
                    best = {p.key: DRY_GEMV for p in rows}
                elif rows:
                    best = {s.problem.key: s.best for s in gemmtune.tune(rows, families=["skinny"], **kw).shapes}
                else:
                    best = {}
                return {p.key: twin_id(best[p.key], p.layout_b) if p.key in best
                        else winners.get(p.key, ("aten",))[0] if not dry else dry_winner(p) for p in problems}
            t0 = time.perf_counter()
            ds_all = gemmtune.tune_model(copies["pdl_all"], fn=lambda: phase.example(copies["pdl_all"]),
                                         tune_fn=strips, progress=False, **({} if dry else {"fast": True}))
            doc["pdl_all_tune_s"] = time.perf_counter() - t0
            gemmtune.patch(copies["pdl_all"], dispatchers=ds_all, tune_missing=False, progress=False)
            doc["pdl_all_winners"] = sorted({h.choice.id for d in ds_all.values() for h in d.hint_choices})
            print(f"pdl_all: {doc['pdl_all_winners']}", flush=True)
        doc["winners"] = sorted({h.choice.id for d in ds_tuned.values() for h in d.hint_choices})
        doc["pdl_winners"] = sorted({h.choice.id for d in ds_pdl.values() for h in d.hint_choices})
        doc["swapped"] = sum(i.endswith("-pdl") for i in doc["pdl_winners"])
        print(f"fuse + tune {doc['tune_s']:.1f} s; winners {doc['winners']}; -pdl twins: {doc['swapped']}",
              flush=True)

        replays = {}
        flags = (False, True) if args.inductor_pdl else (False,)
        only = {x for x in args.only.split(",") if x}
        # max-autotune first: its ~6 min compile is the part a timeout would otherwise lose
        runs = ([("max_autotune", plain)] if plain is not None else []) + list(copies.items())
        for key, m in runs:
            for ipdl in flags:
                vname = key + ("+inductor_pdl" if ipdl else "")
                if only and vname not in only:
                    continue
                rec = doc["variants"].setdefault(vname, {})
                torch._dynamo.reset()
                iconfig.triton.enable_pdl = ipdl
                # (the dry run runs each copy eagerly: Inductor's CPU build of the model takes minutes on 2 cores)
                if dry:
                    v = m
                elif key == "max_autotune":
                    v = torch.compile(m, dynamic=False, mode="max-autotune-no-cudagraphs")  # graphs: benchmodel.capture
                else:
                    v = torch.compile(m, dynamic=False, options={"coordinate_descent_tuning": True} if args.cdt else None)
                replay = run_variant(v, phase, want, rec, vname, dry=dry)
                if replay is not None:
                    replays[vname] = replay
                save(doc)  # each variant's record as it comes: a run cut short keeps what it measured
        iconfig.triton.enable_pdl = False
        if len(replays) >= 2:
            t = time_interleaved(replays, rounds=9)
            doc["interleaved_ms"] = {k: x["ms"] for k, x in t.items()}
            doc["interleaved_spread"] = max(x["spread"] for x in t.values())
            base = t["tuned"]["ms"] if "tuned" in t else next(iter(t.values()))["ms"]
            doc["x_tuned"] = {k: base / x["ms"] for k, x in t.items()}
            print("interleaved ms: " + ", ".join(f"{k} {x['ms']:.4f}" for k, x in t.items())
                  + "; x tuned: " + ", ".join(f"{k} {x:.3f}" for k, x in doc["x_tuned"].items()), flush=True)
    save(doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
