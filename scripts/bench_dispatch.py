"""The dynamic-shape dispatcher on a GPU: hint kernels vs dispatcher modes, an M sweep
against the per-shape oracle and cuBLAS, and per-call eager overhead. GPU only.

    python scripts/bench_dispatch.py [--sections table,sweep,overhead] [--oracle]
        [--points 30] [--max-minutes 8] [--store bench_dispatch.sqlite] [--out $OUT]

Sections (N = K = 4096, bf16 unless said):

* ``table``: rows = one kernel tuned at hint M = 64, 256, 4096 used for every M, the
  dispatcher in each mode (similarity, benchmark, table) and cuBLAS; columns =
  runtime M = 64, 256, 4096; cells = device time in us (CudaGraphTimer: L2-cold,
  CUDA graphs, median), all timed in this process by the tuner's own runner
  (``gemmtune.bench.runner.handle``: verify against fp64, then time).
* ``sweep``: 30 log-spaced M from 1 to 16384: the kernel each dispatcher mode picks,
  cuBLAS and, with ``--oracle``, the per-shape oracle (``gemmtune.tune`` on that
  exact shape, families ``--oracle-families``). Oracle tuning is resumable through
  ``--store``: when ``--max-minutes`` runs out the JSON is written with the points
  done so far and a later call continues (keep the store file between calls).
  In table mode the dispatcher's table holds the hint winners plus every oracle
  winner tuned so far, so its exact hits show what a full table buys.
* ``overhead``: per-call eager wall time (``--calls`` back-to-back calls, one sync at
  the end, best of 5) on three tiny shapes: torch.mm, a torch.compile'd ``a @ b``,
  the dispatcher (tuned choice), and a dispatcher forced to cuBLAS (its pure Python
  overhead over torch.mm).

Writes ``bench_dispatch.json`` (and a copy of the store) under ``--out`` (default $OUT).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path

import torch

N = K = 4096
DTYPE = "bfloat16"
HINTS = (64, 256, 4096)
TABLE_MS = (64, 256, 4096)
TINY = ((1, 256, 256), (16, 512, 512), (64, 1024, 1024))
DEVICE = "cuda"  # a module constant so a CPU dry run can swap it


def sweep_points(n: int, lo: int = 1, hi: int = 16384) -> list[int]:
    """``n`` log-spaced integer M in [lo, hi], strictly increasing (small M that collide
    when rounded are bumped up by one, so there are exactly ``n``)."""
    pts: list[int] = []
    for i in range(n):
        x = int(round(math.exp(math.log(lo) + i * (math.log(hi) - math.log(lo)) / (n - 1))))
        pts.append(max(x, pts[-1] + 1) if pts else x)
    return pts


def time_choice(state, problem, choice_id: str) -> dict:
    """Verify then time one choice on ``problem`` (the tuner's own method)."""
    from gemmtune.bench.runner import handle

    res = handle("bench", {"problem": problem.key, "choice": choice_id, "seed": 0}, state)
    return {"status": res.get("status"), "device_us": (res["device_ms"] * 1e3 if res.get("device_ms") else None),
            "eager_us": (res["eager_ms"] * 1e3 if res.get("eager_ms") else None),
            "reason": res.get("reason", "")[:300]}


def make_dispatchers(args, table_extra=None) -> dict:
    from gemmtune.dispatch import compile_mm
    from gemmtune.table import LookupTable

    hints = {"m": list(HINTS)}
    kw = dict(n=N, k=K, dtype=DTYPE, hints=hints, store=args.store, progress=False,
              families=args.families.split(",") if args.families else None)
    out = {mode: compile_mm(mode=mode, **kw) for mode in ("similarity", "benchmark")}
    table = None
    if table_extra:
        table = LookupTable(dict(next(iter(table_extra.values()))[1]))
        for key, (entry, _prov) in table_extra.items():
            table.entries[key] = entry
    out["table"] = compile_mm(mode="table", table=table, **kw)
    return out


def section_table(args, ds) -> dict:
    from gemmtune.bench.runner import WorkerState
    from gemmtune.problem import Problem

    rows: dict[str, dict] = {}
    hint_winner = {h.sizes[0]: h.choice.id for h in ds["similarity"].hint_choices}
    for m in TABLE_MS:
        p = Problem.from_sizes(m, N, K, DTYPE)
        state = WorkerState()
        for h in HINTS:
            rows.setdefault(f"kernel tuned at M={h} ({hint_winner[h]})", {})[m] = time_choice(state, p, hint_winner[h])
        for mode, d in ds.items():
            d.warmup(m=[m])
            dec = d.decision(m=m)
            r = time_choice(state, p, dec.choice.id)
            r.update(choice=dec.choice.id, source=dec.source)
            rows.setdefault(f"dispatcher mode={mode}", {})[m] = r
        rows.setdefault("cuBLAS (aten)", {})[m] = time_choice(state, p, "aten")
        del state
        torch.cuda.empty_cache()
    return {"columns_M": list(TABLE_MS), "N": N, "K": K, "dtype": DTYPE, "rows": rows}


def section_sweep(args, t_end: float) -> dict:
    import gemmtune
    from gemmtune.bench.runner import WorkerState
    from gemmtune.problem import Problem

    points = sweep_points(args.points)
    oracle: dict[int, dict] = {}
    table_extra = {}
    if args.oracle:
        fams = args.oracle_families.split(",") if args.oracle_families else None
        for m in points:
            if time.monotonic() > t_end:
                break
            p = Problem.from_sizes(m, N, K, DTYPE)
            r = gemmtune.tune([p], families=fams, store=args.store, progress=False)
            s = r.shapes[0]
            oracle[m] = {"best": s.best, "best_us_tuner": s.best_ms * 1e3 if s.best_ms else None,
                         "tune_s": s.tune_s}
            if r.table is not None and p.key in r.table.entries:
                table_extra[p.key] = (r.table.entries[p.key], r.table.provenance)
    ds = make_dispatchers(args, table_extra)
    out = []
    for m in points:
        if time.monotonic() > t_end:
            break
        p = Problem.from_sizes(m, N, K, DTYPE)
        state = WorkerState()
        row = {"M": m, "cublas": time_choice(state, p, "aten")}
        for mode, d in ds.items():
            d.warmup(m=[m])
            dec = d.decision(m=m)
            row[mode] = {**time_choice(state, p, dec.choice.id), "choice": dec.choice.id, "source": dec.source}
        if m in oracle and oracle[m]["best"]:
            row["oracle"] = {**time_choice(state, p, oracle[m]["best"]), **oracle[m]}
        out.append(row)
        del state
        torch.cuda.empty_cache()

    def geomean_ratio(mode, base):
        rs = [r[mode]["device_us"] / r[base]["device_us"] for r in out
              if r.get(mode, {}).get("device_us") and r.get(base, {}).get("device_us")]
        return math.exp(sum(map(math.log, rs)) / len(rs)) if rs else None

    summary = {f"{mode}_vs_{base}_geomean": geomean_ratio(mode, base)
               for mode in ("similarity", "benchmark", "table") for base in ("cublas", "oracle")}
    return {"points": points, "done": len(out), "oracle_done": len(oracle), "rows": out,
            "summary": summary, "dispatchers": {m: d.to_json() for m, d in ds.items()}}


def _per_call_us(fn, a, b, calls: int) -> float:
    for _ in range(20):
        fn(a, b)
    torch.cuda.synchronize()
    best = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(a, b)
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) * 1e6 / calls)
    return best


def section_overhead(args) -> dict:
    from gemmtune.dispatch import compile_mm
    from gemmtune.problem import DTYPES

    rows = []
    for m, n, k in TINY:
        a = torch.randn(m, k, device=DEVICE, dtype=DTYPES[DTYPE])
        b = torch.randn(k, n, device=DEVICE, dtype=DTYPES[DTYPE])
        tuned = compile_mm(n=n, k=k, dtype=DTYPE, hints={"m": [m]}, store=args.store, progress=False)
        forced = compile_mm(n=n, k=k, dtype=DTYPE, hints={"m": [m]},
                            tune_fn=lambda ps, **kw: {p.key: "aten" for p in ps})
        compiled = torch.compile(lambda x, y: x @ y)
        compiled_dyn = torch.compile(lambda x, y: x @ y, dynamic=True)
        fns = {"torch.mm": torch.mm, "torch.compile(a @ b)": compiled,
               "torch.compile(a @ b, dynamic=True)": compiled_dyn,
               "dispatcher (tuned)": tuned, "dispatcher (forced aten)": forced}
        row = {"M": m, "N": n, "K": k, "tuned_choice": None}
        for name, fn in fns.items():
            row[name + " us/call"] = _per_call_us(fn, a, b, args.calls)
        row["tuned_choice"] = tuned.decision(m=m).choice.id
        row["dispatcher python overhead us"] = row["dispatcher (forced aten) us/call"] - row["torch.mm us/call"]
        rows.append(row)
    return {"rows": rows, "calls": args.calls}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="table,sweep,overhead")
    ap.add_argument("--oracle", action="store_true", help="tune every sweep point (slow; resumable)")
    ap.add_argument("--oracle-families", default="triton_mm,aten",
                    help="families the per-shape oracle searches (all: '')")
    ap.add_argument("--families", default="", help="families for the hint kernels (default: all)")
    ap.add_argument("--points", type=int, default=30)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--max-minutes", type=float, default=8.0)
    ap.add_argument("--store", default="bench_dispatch.sqlite")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_dispatch.py needs a CUDA GPU (timings in the CPU interpreter mean nothing)",
              file=sys.stderr)
        return 2
    import triton

    import gemmtune
    from gemmtune.device import DeviceInfo

    t_end = time.monotonic() + args.max_minutes * 60
    dev = DeviceInfo.from_torch()
    result = {"device": dev.name, "capability": dev.capability_str, "torch": torch.__version__,
              "triton": triton.__version__, "gemmtune": gemmtune.__version__,
              "args": vars(args), "sections": {}}
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    def write():
        (out_dir / "bench_dispatch.json").write_text(json.dumps(result, indent=1, default=str))

    sections = args.sections.split(",")
    t0 = time.monotonic()
    if "table" in sections:
        result["sections"]["table"] = section_table(args, make_dispatchers(args))
        write()
    if "sweep" in sections:
        result["sections"]["sweep"] = section_sweep(args, t_end)
        write()
    if "overhead" in sections:
        result["sections"]["overhead"] = section_overhead(args)
    result["wall_s"] = time.monotonic() - t0
    write()
    if Path(args.store).exists():
        shutil.copy(args.store, out_dir / Path(args.store).name)
    for name, sec in result["sections"].items():
        print(f"== {name}")
        if name == "table":
            for row, cells in sec["rows"].items():
                print(f"{row:60s}", "  ".join(f"{cells[m]['device_us']:.1f}" if cells[m].get("device_us")
                                              else "-" for m in TABLE_MS))
        elif name == "sweep":
            print(json.dumps(sec["summary"], indent=1), f"{sec['done']}/{len(sec['points'])} points")
        else:
            for r in sec["rows"]:
                print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
