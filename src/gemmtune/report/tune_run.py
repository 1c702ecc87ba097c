"""A GPU tuning-run directory (scripts/gpu_run.sh tune) as Markdown, or as a bench JSON."""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path

from .files import SCHEMA
from .markdown import _us
from .stats import geomean, is_tie, roofline_ms, speedup


def render_tune_run(run_dir: str | os.PathLike, title: str = "gemmtune tune, default space") -> str:
    """Markdown of one GPU tuning run as scripts/gpu_run.sh writes it: tune-summary.json (per
    shape, from the store), tune-run.json (per-shape tuning wall time), env.txt and,
    when present, inductor.json (torch.compile max-autotune in the same call)."""
    d = Path(run_dir)
    summ = json.loads((d / "tune-summary.json").read_text())
    run = json.loads((d / "tune-run.json").read_text())
    ind_doc = json.loads((d / "inductor.json").read_text()) if (d / "inductor.json").exists() else {}
    ind = {r["key"]: r for r in ind_doc.get("rows", [])}
    tune_s = {r["key"]: r["tune_s"] for r in run["shapes"]}
    ctx = run["context"]

    def geo(xs):
        g = geomean(xs)
        return f"{g:.3f}" if g is not None else "-"

    L = [f"# {title}\n",
         f"{ctx['device_name']} (sm {ctx['capability']}), torch {ctx['torch_version']}, "
         f"triton {ctx['triton_version']}, gemmtune {ctx['gemmtune_version']}. Environment: "
         f"`{(d / 'env.txt').read_text().splitlines()[0]}`.\n",
         "Device time: median of 20 CUDA-graph replays, L2-cold (rotating inputs > 2x L2). "
         "Every candidate verified against fp64 first. `x` = cuBLAS time / gemmtune time, same "
         "process; `tie` when the difference is inside the measured spread (IQR/median). "
         "Inductor: torch.compile(mode='max-autotune-no-cudagraphs') with caches disabled, "
         "timed the same way in the same call (its cuBLAS column is its own measurement).\n"]
    hdr = ("| group | shape | M×N×K dtype | best choice | best µs | cuBLAS µs | x | candidates | tune s "
           "| Inductor tune s | Inductor µs | Inductor x |")
    L += [hdr, "|---" * (hdr.count("|") - 1) + "|"]
    groups: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    tot_ours = tot_ind = 0.0
    for r in summ["rows"]:
        key = r["key"]
        m, n, k = key.split(":")[1].replace("M", "").replace("N", "").replace("K", "").split("-")
        x = speedup(r["aten_ms"], r["best_ms"])
        tie = (x is not None and r["best"] != "aten"
               and is_tie(r["aten_ms"], r.get("aten_spread"), r["best_ms"], r.get("best_spread")))
        i = ind.get(key, {})
        # An Inductor kernel whose output failed the fp64 check (inductor_ok False) has no
        # speedup: it was shown and counted in the geomean as if verified.
        wrong = i.get("inductor_ok") is False
        ix = None if wrong else speedup(i.get("aten_ms"), i.get("inductor_ms"))
        ts = tune_s.get(key)
        # null where Inductor's tuning failed: formatting None ended the report with a TypeError
        its = f"{i['inductor_tune_s']:.1f}" if i.get("inductor_tune_s") is not None else "-"
        tot_ours += ts or 0
        tot_ind += i.get("inductor_tune_s", 0) or 0
        groups[r["group"]]["ours"].append(x)
        groups[r["group"]]["ind"].append(ix)
        dtype = key.split(":")[2].split("->")[0]
        # A shape where cuBLAS or every candidate failed (run_summary writes None for its times), or
        # one tune-run.json has no time for: '-' cells. Formatting None ended the whole report with
        # "unsupported format string passed to NoneType.__format__".
        best = f"`{r['best']}`" if r.get("best") else "(no verified choice)"
        xs = f"{x:.2f}{' tie' if tie else ''}" if x is not None else "-"
        L.append(f"| {r['group']} | {r['name']} | {m}×{n}×{k} {dtype} | {best} | {_us(r['best_ms'])} | "
                 f"{_us(r['aten_ms'])} | {xs} | {r['candidates']} | "
                 f"{f'{ts:.1f}' if ts is not None else '-'} | {its} | {_us(i.get('inductor_ms'))} | "
                 f"{'wrong output' if wrong else f'{ix:.2f}' if ix else '-'} |")
    L.append("\n| group | shapes | gemmtune x (geomean) | Inductor x (geomean) |\n|---|---|---|---|")
    for name, g in groups.items():
        L.append(f"| {name} | {len(g['ours'])} | {geo(g['ours'])} | {geo(g['ind'])} |")
    allo = [x for g in groups.values() for x in g["ours"]]
    alli = [x for g in groups.values() for x in g["ind"]]
    L.append(f"| all | {len(allo)} | {geo(allo)} | {geo(alli)} |")
    L.append(f"\nTuning wall time, sum over shapes: gemmtune {tot_ours:.0f} s "
             f"({run['measured']} candidates, compiled in parallel), "
             + (f"Inductor max-autotune {tot_ind:.0f} s." if ind else "Inductor not run in this call."))
    return "\n".join(L) + "\n"


def bench_from_tune_run(run_dir: str | os.PathLike, names: list[str] | None = None) -> dict:
    """A bench document from a recorded tuning run directory (tune-summary.json, tune-run.json,
    optionally inductor.json), for shapes ``names`` (default all).

    What such a run lacks is said in the document: no ceilings were measured, so they are
    derived from the run itself (per dtype the best cuBLAS FLOP/s, and the best cuBLAS
    minimum-bytes/s: lower bounds of the real peaks); repeats are CudaGraphTimer's default
    20; Inductor ran in a separate call, so its record carries that call's cuBLAS time as
    its baseline; no other method ran.
    """
    from ..problem import Problem

    d = Path(run_dir)
    summ = json.loads((d / "tune-summary.json").read_text())
    run = json.loads((d / "tune-run.json").read_text())
    ind_doc = json.loads((d / "inductor.json").read_text()) if (d / "inductor.json").exists() else {}
    ind = {r["key"]: r for r in ind_doc.get("rows", [])}
    ctx = run["context"]
    reps = 20

    def t(ms, spread, repeats=reps):
        return {"ms": ms, "spread": spread, "repeats": repeats}

    peaks: dict[str, float] = {}
    gbps = 0.0
    for r in summ["rows"]:
        p = Problem.from_key(r["key"])
        if r.get("aten_ms"):
            peaks[p.dtype] = max(peaks.get(p.dtype, 0.0), p.flops / (r["aten_ms"] * 1e9))
            gbps = max(gbps, p.min_bytes / (r["aten_ms"] * 1e6))
    ceilings = {"how": f"derived from the recorded cuBLAS times of {d.name}: lower bounds, not measured",
                "copy": {"gbps": gbps}, "mm": {dt: {"tflops": v} for dt, v in peaks.items()}}
    env_line = (d / "env.txt").read_text().splitlines()[0] if (d / "env.txt").exists() else ""
    header = {"date": ind_doc.get("date") or env_line or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "device_name": ctx["device_name"], "capability": ctx["capability"],
              "torch": ctx["torch_version"], "triton": ctx["triton_version"], "gemmtune": ctx["gemmtune_version"],
              "suite": "public", "groups": None, "limit": None, "repeats": reps,
              "timer": "median of 20 CUDA-graph replays, L2-cold (rotating inputs > 2x L2)",
              "inductor_mode": "max-autotune-no-cudagraphs"}
    shapes = []
    for r in summ["rows"]:
        if names is not None and r["name"] not in names:
            continue
        p = Problem.from_key(r["key"])
        floor = roofline_ms(p.flops, p.min_bytes, peaks.get(p.dtype), gbps)
        compute = p.flops / (peaks[p.dtype] * 1e9) if peaks.get(p.dtype) else 0.0
        cublas = {"status": "ok", "choice": "aten", "kernel": t(r["aten_ms"], r.get("aten_spread")),
                  "eager": t(r.get("aten_eager_ms"), None), "rel_err": None}
        methods = {"gemmtune": {"status": "ok", "choice": r["best"], "kernel": t(r["best_ms"], r.get("best_spread")),
                                "eager": t(r.get("best_eager_ms"), None), "tune_s": r.get("tune_s"),
                                "candidates": r.get("candidates"), "rel_err": None}}
        i = ind.get(r["key"])
        if i and i.get("inductor_ms") and i.get("inductor_ok"):
            methods["inductor"] = {"status": "ok", "choice": None, "kernel": t(i["inductor_ms"], i.get("inductor_spread"),
                                                                           i.get("repeats", reps)),
                                   "eager": t(i.get("inductor_eager_ms"), None), "tune_s": i.get("inductor_tune_s"),
                                   "rel_err": i.get("inductor_rel_err"),
                                   "baseline": t(i["aten_ms"], i.get("aten_spread"), i.get("repeats", reps))}
        elif i:
            methods["inductor"] = {"status": "error" if i.get("inductor_error") else "wrong",
                                   "reason": i.get("inductor_error", "output did not match the fp64 reference")}
        for m in ("gemmtune_fast", "gemmtune_top5", "nvmmh_top1", "nvmmh_top5"):
            methods[m] = {"status": "skipped", "reason": "not part of the recorded run"}
        shapes.append({"group": r["group"], "name": r["name"], "key": r["key"], "m": p.m, "n": p.n, "k": p.k,
                       "dtype": p.dtype, "flops": p.flops, "min_bytes": p.min_bytes, "floor_ms": floor,
                       "bound": "compute" if floor and compute >= floor else "memory",
                       "cublas": cublas, "methods": methods})
    return {"schema": SCHEMA,
            "source": (f"Assembled from the recorded run benchmarks/results/{d.name} (tune-summary.json, "
                       "tune-run.json, inductor.json) by gemmtune.report.bench_from_tune_run; not a "
                       "`gemmtune bench` measurement."),
            "header": header, "ceilings": ceilings,
            "notes": ["Inductor ran in a separate call of the same session; its speedups use that call's own "
                      "cuBLAS time (its baseline), the other methods the tuner's.",
                      "The chosen Inductor kernel was not recorded in inductor.json.",
                      "gemmtune --fast, the model top-5 and nvMatmulHeuristics were not part of the recorded run."],
            "shapes": shapes}
