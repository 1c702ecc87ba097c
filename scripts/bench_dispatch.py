"""The dynamic-shape dispatcher on a GPU: hint kernels vs dispatcher modes, an M sweep
against the per-shape oracle and cuBLAS, and per-call eager overhead. GPU only.

    python scripts/bench_dispatch.py [--sections table,sweep,overhead] [--oracle]
        [--points 30] [--max-minutes 8] [--store bench_dispatch.sqlite] [--out $OUT]

Sections (N = K = 4096, bf16 unless said):

* ``table``: rows = one kernel tuned at hint M = 64, 256, 4096 used for every M, the
  dispatcher in each mode (similarity, benchmark, table) and cuBLAS; columns =
  runtime M = 64, 256, 4096; cells = device time in us (CudaGraphTimer: L2-cold,
  CUDA graphs, median), all timed in this process by the tuner's own runner
  (``gemmtune.bench.measure.measure``: verify against fp64, then time).
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

* ``saveload``: a dispatcher saved in one process (tuning reused from ``--store``,
  binaries bundled) and loaded in fresh processes with an empty Triton cache: with
  the saved binaries and without them. Records the tuning done (none expected), the
  kernels compiled in the new process, first-call latency per shape and correctness.
* ``compile``: an MLP whose nn.Linear layers ``gemmtune.patch`` swapped, under
  ``torch.compile(dynamic=True, fullgraph=True)`` (Inductor), run at three batch
  shapes (M = batch*seq, symbolic): graph count, recompiles, graph breaks, and the
  outputs against the unpatched eager model.

Writes ``bench_dispatch.json`` (and a copy of the store) under ``--out`` (default $OUT).

``--smoke`` runs every section on the CPU interpreter at toy sizes (N = K = 64,
4 sweep points, Inductor replaced by aot_eager, candidates measured in process): a check
that the script works, no timing in it means anything.
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
TINY = ((1, 256, 256), (16, 512, 512), (64, 1024, 1024), (32, 32, 28672))
TRITON_CHOICE = "triton_mm:BM16-BN64-BK64-S3-W4-G8"  # runs every TINY shape; for launch costs
SAVELOAD_MS = (64, 256, 4096, 1, 100, 1000)  # the hints, then shapes decided before saving
DEVICE = "cuda"
COMPILE_BACKEND = "inductor"
TUNE_KW: dict = {}  # extra gemmtune.tune arguments of every tuning call


def _smoke() -> None:
    """Toy sizes on the CPU interpreter (set before triton is imported)."""
    global N, K, DTYPE, HINTS, TABLE_MS, TINY, SAVELOAD_MS, DEVICE, COMPILE_BACKEND, TRITON_CHOICE, TUNE_KW
    os.environ["TRITON_INTERPRET"] = "1"
    N = K = 64
    DTYPE = "float16"
    HINTS = TABLE_MS = (4, 16, 64)
    TINY = ((1, 16, 16), (8, 32, 32))
    TRITON_CHOICE = "triton_mm:BM16-BN16-BK16-S1-W2-G8"
    SAVELOAD_MS = (4, 16, 64, 7)
    DEVICE = "cpu"
    COMPILE_BACKEND = "aot_eager"
    # Candidates measured in this process: a tuning call then starts no worker (a new process
    # importing torch, ~2.5 s of a CI core, paid even by a call the store answers in full; the
    # smoke makes ~18 such calls). Tuning through workers is the tuner's tests' subject.
    TUNE_KW = {"in_process": True}


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
    from gemmtune.bench.measure import measure

    res = measure(problem, choice_id, state.timer, state=state)
    return {"status": res.status.value, "device_us": (res.device_ms * 1e3 if res.device_ms else None),
            "eager_us": (res.eager_ms * 1e3 if res.eager_ms else None), "reason": res.reason[:300]}


def best_measured(result, exclude_aten: bool) -> dict[str, tuple[str, float] | None]:
    """Problem key -> (choice id, device ms) of the fastest verified candidate in the store,
    leaving cuBLAS ('aten', 'pad+aten') out when asked: with it, cuBLAS wins every hint at
    N = K = 4096 bf16 on an H200, and the seed experiment (how much a Triton kernel tuned
    at one size loses at another) needs Triton kernels."""
    from gemmtune.store import ResultStore

    out = {}
    with ResultStore(result.store_path) as st:
        for sh in result.shapes:
            rows = [r for r in st.done(result.context, sh.problem.key).values()
                    if r.status == "ok" and r.device_ms and not (exclude_aten and r.family == "aten")]
            best = min(rows, key=lambda r: (r.device_ms, r.choice_id)) if rows else None
            out[sh.problem.key] = (best.choice_id, best.device_ms) if best else None
    return out


def tune_fn_for(args):
    """The tuner compile_mm uses: gemmtune.tune, or with --exclude-aten its best non-cuBLAS pick."""
    if not args.exclude_aten:
        return None

    def tune_without_aten(problems, **kw):
        import gemmtune

        best = best_measured(gemmtune.tune(problems, **kw), True)
        return {k: (v[0] if v else "aten") for k, v in best.items()}
    return tune_without_aten


def make_dispatchers(args, table_extra=None) -> dict:
    from gemmtune.dispatch import compile_mm
    from gemmtune.table import LookupTable

    hints = {"m": list(HINTS)}
    kw = dict(n=N, k=K, dtype=DTYPE, hints=hints, store=args.store, progress=False,
              families=args.families.split(",") if args.families else None, tune_fn=tune_fn_for(args),
              tune_kwargs=TUNE_KW)
    out = {mode: compile_mm(mode=mode, **kw) for mode in ("similarity", "benchmark")}
    table = None
    if table_extra:
        table = LookupTable(dict(next(iter(table_extra.values()))[1]))
        for key, (entry, _prov) in table_extra.items():
            table.entries[key] = entry
    out["table"] = compile_mm(mode="table", table=table, **kw)
    return out


def section_table(args, ds) -> dict:
    from gemmtune.bench.measure import WorkerState
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
    from gemmtune.bench.measure import WorkerState
    from gemmtune.configs import Choice
    from gemmtune.problem import Problem
    from gemmtune.table import TableChoice

    points = sweep_points(args.points, hi=args.sweep_max)
    oracle: dict[int, dict] = {}
    # Oracle tuning may use the time left but the last minute, which the rows need.
    t_oracle = t_end - 60
    table_extra = {}
    if args.oracle:
        fams = args.oracle_families.split(",") if args.oracle_families else None
        for m in points:
            if time.monotonic() > t_oracle:
                break
            p = Problem.from_sizes(m, N, K, DTYPE)
            r = gemmtune.tune([p], families=fams, store=args.store, progress=False, **TUNE_KW)
            s = r.shapes[0]
            best = best_measured(r, args.exclude_aten)[p.key]
            oracle[m] = {"best": best[0] if best else None, "best_us_tuner": best[1] * 1e3 if best else None,
                         "tune_s": s.tune_s}
            if best and r.table is not None:
                table_extra[p.key] = ([TableChoice(Choice.parse(best[0]), best[1])], r.table.provenance)
    ds = make_dispatchers(args, table_extra)
    out = []
    for m in points:
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

    from gemmtune.report import geomean

    def geomean_ratio(mode, base):
        return geomean(r[mode]["device_us"] / r[base]["device_us"] for r in out
                       if r.get(mode, {}).get("device_us") and r.get(base, {}).get("device_us"))

    summary = {f"{mode}_vs_{base}_geomean": geomean_ratio(mode, base)
               for mode in ("similarity", "benchmark", "table") for base in ("cublas", "oracle")}
    return {"points": points, "done": len(out), "oracle_done": len(oracle), "rows": out,
            "summary": summary, "dispatchers": {m: d.to_json() for m, d in ds.items()}}


# ----------------------------------------------------------------------------- save / load
def _child(args, role: str, workdir: Path, cache: Path, path: Path) -> dict:
    """Run this script as ``--child ROLE`` in a fresh process whose Triton cache is ``cache``."""
    import subprocess

    env = dict(os.environ, TRITON_CACHE_DIR=str(cache))
    cmd = [sys.executable, __file__, "--child", role, "--child-path", str(path), "--store", args.store,
           "--families", args.saveload_families] + (["--smoke"] if args.smoke else []) + (
        ["--exclude-aten"] if args.exclude_aten else []) + (["--hints", args.hints] if args.hints else [])
    t0 = time.monotonic()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=workdir)
    out = {"role": role, "rc": r.returncode, "process_wall_s": time.monotonic() - t0}
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode == 0 and lines:
        out.update(json.loads(lines[-1]))
    else:
        out["stderr_tail"] = r.stderr[-3000:]
    return out


def _cache_dirs(cache: Path) -> set[str]:
    return {p.name for p in cache.iterdir() if p.is_dir()} if cache.is_dir() else set()


def child_save(args, path: Path) -> dict:
    """Build the dispatcher (tuning comes from the store: nothing should be measured), decide
    a few shapes, save it with its binaries."""
    from gemmtune.dispatch import compile_mm

    t0 = time.monotonic()
    d = compile_mm(n=N, k=K, dtype=DTYPE, hints={"m": list(HINTS)}, store=args.store, progress=False,
                   families=args.families.split(",") if args.families else None, tune_fn=tune_fn_for(args),
                   tune_kwargs=TUNE_KW)
    t_compile = time.monotonic() - t0
    d.warmup(m=[m for m in SAVELOAD_MS if m not in HINTS])
    t1 = time.monotonic()
    d.save(path)
    doc = json.loads(path.read_text())
    return {"compile_mm_s": t_compile, "save_s": time.monotonic() - t1,
            "kernels_saved": len((doc.get("binaries") or {}).get("kernels", [])),
            "decided": len(doc["decisions"]), "choices": {str(x["sizes"]["m"]): x["choice"] for x in doc["decisions"]}}


def child_load(args, path: Path) -> dict:
    """Load in a process with an empty Triton cache: first-call latency, compiles, correctness."""
    import gemmtune
    from gemmtune.problem import Problem
    from gemmtune.verify import check

    cache = Path(os.environ["TRITON_CACHE_DIR"])
    t0 = time.monotonic()
    d = gemmtune.load(path)
    load_s = time.monotonic() - t0
    restored = _cache_dirs(cache)
    first_ms, ok = {}, {}
    for m in SAVELOAD_MS:
        a = torch.randn(m, K, device=DEVICE, dtype=d.torch_dtype)
        b = torch.randn(K, N, device=DEVICE, dtype=d.torch_dtype)
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        c = d(a, b)
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        first_ms[m] = (time.perf_counter() - t) * 1e3
        ok[m] = check(c, a, b, Problem.from_tensors(a, b)).ok
    new = _cache_dirs(cache) - restored
    return {"load_s": load_s, "binaries_note": d.binaries_note, "restored_dirs": len(restored),
            "compiled_in_this_process": len(new), "new_decisions": d.n_decisions,
            "first_call_ms": first_ms, "correct": ok}


def section_saveload(args, out_dir: Path) -> dict:
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="gemmtune-saveload-"))
    path = work / "mm.json"
    res = {"save": _child(args, "save", work, work / "cache-save", path)}
    res["load_with_binaries"] = _child(args, "load", work, work / "cache-load", path)
    if path.exists():
        doc = json.loads(path.read_text())
        doc.pop("binaries", None)
        bare = work / "mm-nobin.json"
        bare.write_text(json.dumps(doc))
        res["load_without_binaries"] = _child(args, "load", work, work / "cache-nobin", bare)
    return res


# ----------------------------------------------------------------------------- torch.compile
def section_compile(args) -> dict:
    """gemmtune.patch'ed MLP under torch.compile(dynamic=True): no graph break, no recompile."""
    import copy

    import gemmtune
    from gemmtune.problem import DTYPES

    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    dt = DTYPES[DTYPE]
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(K, N), torch.nn.GELU(), torch.nn.Linear(N, K // 4)).to(DEVICE, dt)
    model = copy.deepcopy(ref)
    t0 = time.monotonic()
    gemmtune.patch(model, hints={"m": [HINTS[0], HINTS[-1]]}, families=["triton_mm"], store=args.store,
                   tune_kwargs=TUNE_KW)
    tune_s = time.monotonic() - t0
    cm = torch.compile(model, dynamic=True, fullgraph=True, backend=COMPILE_BACKEND)
    runs = []
    for bsz, seq in ((2, 3), (3, 17), (8, 64)):
        x = torch.randn(bsz, seq, K, device=DEVICE, dtype=dt)
        t = time.monotonic()
        with torch.no_grad():
            y = cm(x)
            want = ref(x).float()
        err = ((y.float() - want).abs().max() / want.abs().max().clamp_min(1e-6)).item()
        runs.append({"batch": bsz, "seq": seq, "M": bsz * seq, "first_call_s": time.monotonic() - t,
                     "max_rel_err_vs_eager_nn_linear": err})
    frames = dict(counters["stats"])
    return {"backend": COMPILE_BACKEND, "patch_tune_s": tune_s, "runs": runs,
            "graph_breaks": sum(counters["graph_break"].values()),
            "unique_graphs": frames.get("unique_graphs"), "frames_ok": frames.get("frames_ok"),
            "ops_in_graph": "gemmtune::mm (custom op)"}


def _sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _per_call_us(fn, a, b, calls: int) -> float:
    for _ in range(min(20, calls)):  # 20 warm-up calls; --smoke's single call warms up once
        fn(a, b)
    _sync()
    best = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(a, b)
        _sync()
        best = min(best, (time.perf_counter() - t0) * 1e6 / calls)
    return best


def section_overhead(args) -> dict:
    """Per-call eager cost. The pure dispatch overhead is measured twice: forced to cuBLAS
    (against torch.mm) and forced to one Triton config (against that kernel launched
    through its prepared launcher into a preallocated output, the cheapest way to
    launch it; Triton's ordinary launch is shown too)."""
    from gemmtune import kernels
    from gemmtune.configs import Choice
    from gemmtune.dispatch import compile_mm
    from gemmtune.problem import DTYPES

    tri = Choice.parse(TRITON_CHOICE)
    rows = []
    for m, n, k in TINY:
        a = torch.randn(m, k, device=DEVICE, dtype=DTYPES[DTYPE])
        b = torch.randn(k, n, device=DEVICE, dtype=DTYPES[DTYPE])
        out = torch.empty(m, n, device=DEVICE, dtype=DTYPES[DTYPE])
        tuned = compile_mm(n=n, k=k, dtype=DTYPE, hints={"m": [m]}, store=args.store, progress=False,
                           tune_kwargs=TUNE_KW)
        forced = compile_mm(n=n, k=k, dtype=DTYPE, hints={"m": [m]},
                            tune_fn=lambda ps, **kw: {p.key: "aten" for p in ps})
        forced_tri = compile_mm(n=n, k=k, dtype=DTYPE, hints={"m": [m]},
                                tune_fn=lambda ps, **kw: {p.key: tri for p in ps})
        compiled = torch.compile(lambda x, y: x @ y, backend=COMPILE_BACKEND)
        compiled_dyn = torch.compile(lambda x, y: x @ y, dynamic=True, backend=COMPILE_BACKEND)
        fns = {"torch.mm": torch.mm, "torch.compile(a @ b)": compiled,
               "torch.compile(a @ b, dynamic=True)": compiled_dyn,
               "dispatcher (tuned)": tuned, "dispatcher (forced aten)": forced,
               "dispatcher (forced triton)": forced_tri,
               "triton ordinary launch, preallocated out":
                   lambda x, y: kernels.run_choice(tri, x, y, out)}
        prep = kernels.get(tri.family).prepare(a, b, out, tri.config) if DEVICE == "cuda" else None
        if prep is not None:
            fns["triton prepared launch, preallocated out"] = lambda x, y: prep[1](x, y, out)
        row = {"M": m, "N": n, "K": k, "triton_choice": tri.id}
        for name, fn in fns.items():
            row[name + " us/call"] = _per_call_us(fn, a, b, args.calls)
        row["tuned_choice"] = tuned.decision(m=m).choice.id
        row["dispatch overhead over torch.mm us"] = (row["dispatcher (forced aten) us/call"]
                                                     - row["torch.mm us/call"])
        if prep is not None:
            row["dispatch overhead over the prepared triton launch us"] = (
                row["dispatcher (forced triton) us/call"] - row["triton prepared launch, preallocated out us/call"])
        rows.append(row)
    return {"rows": rows, "calls": args.calls}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="table,sweep,saveload,compile,overhead")
    ap.add_argument("--oracle", action="store_true", help="tune every sweep point (slow; resumable)")
    ap.add_argument("--oracle-families", default="",
                    help="families the per-shape oracle searches (default '': all, as the hint kernels)")
    ap.add_argument("--families", default="", help="families for the hint kernels (default: all)")
    ap.add_argument("--saveload-families", default="triton_mm,splitk",
                    help="families of the saved dispatcher (default: Triton ones, so binaries are saved)")
    ap.add_argument("--exclude-aten", action="store_true",
                    help="hint kernels, oracle and the saved dispatcher pick the best non-cuBLAS candidate "
                         "(the seed experiment, and kernels whose binaries save/load can carry)")
    ap.add_argument("--hints", help="comma-separated size hints for M (default 64,256,4096, the issue's); "
                                    "e.g. 1,16,64,256,4096 to cover decode sizes with their own kernels")
    ap.add_argument("--points", type=int, default=30)
    ap.add_argument("--sweep-max", type=int, default=16384, help="largest M of the sweep")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--max-minutes", type=float, default=8.0)
    ap.add_argument("--store", default="bench_dispatch.sqlite")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--smoke", action="store_true", help="toy sizes on the CPU interpreter (checks the script)")
    ap.add_argument("--child", choices=("save", "load"), help=argparse.SUPPRESS)
    ap.add_argument("--child-path", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.smoke:
        _smoke()
        # One call per timed round: an interpreted Triton launch takes ~0.1-0.2 s, and the
        # smoke only checks that every row's callable runs (20 calls cost ~40 s of CI).
        args.points, args.sweep_max, args.calls = min(args.points, 4), 64, 1
    if args.hints:
        global HINTS
        try:
            HINTS = tuple(sorted({int(x) for x in args.hints.split(",")}))
        except ValueError:
            ap.error(f"--hints takes comma-separated integers, not {args.hints!r}")
        if not HINTS or min(HINTS) < 1:
            ap.error(f"--hints must be positive integers, not {args.hints!r}")
    args.store = str(Path(args.store).resolve())
    if args.child:
        res = child_save(args, args.child_path) if args.child == "save" else child_load(args, args.child_path)
        print(json.dumps(res, default=str))
        return 0
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("bench_dispatch.py needs a CUDA GPU (timings in the CPU interpreter mean nothing; "
              "--smoke checks the script on the CPU)", file=sys.stderr)
        return 2
    import triton

    import gemmtune
    from gemmtune.device import DeviceInfo

    t_end = time.monotonic() + args.max_minutes * 60
    dev = DeviceInfo.from_torch() if DEVICE == "cuda" else None
    result = {"device": dev.name if dev else "cpu (Triton interpreter, --smoke)",
              "capability": dev.capability_str if dev else "interp", "torch": torch.__version__,
              "triton": triton.__version__, "gemmtune": gemmtune.__version__,
              "date": time.strftime("%Y-%m-%d"), "args": vars(args), "sections": {}}
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    def write():
        (out_dir / "bench_dispatch.json").write_text(json.dumps(result, indent=1, default=str))

    sections = args.sections.split(",")
    unknown = set(sections) - {"table", "sweep", "saveload", "compile", "overhead"}
    if unknown:
        ap.error(f"unknown sections {sorted(unknown)}")
    t0 = time.monotonic()
    # Each section is its own try: one failing must not lose the others' numbers.
    for name in sections:
        ts = time.monotonic()
        try:
            if name == "table":
                sec = section_table(args, make_dispatchers(args))
            elif name == "sweep":
                sec = section_sweep(args, t_end)
            elif name == "saveload":
                sec = section_saveload(args, out_dir)
            elif name == "compile":
                sec = section_compile(args)
            else:
                sec = section_overhead(args)
        except Exception as e:  # noqa: BLE001 - recorded, and the run goes on
            import traceback

            sec = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
        sec["section_s"] = time.monotonic() - ts
        result["sections"][name] = sec
        write()
    result["wall_s"] = time.monotonic() - t0
    write()
    dst = out_dir / Path(args.store).name
    if Path(args.store).exists() and not (dst.exists() and dst.samefile(args.store)):
        shutil.copy(args.store, dst)
    for name, sec in result["sections"].items():
        print(f"== {name} ({sec['section_s']:.0f} s)")
        if "error" in sec:
            print("ERROR", sec["error"], sec["traceback"][-1500:])
        elif name == "table":
            for row, cells in sec["rows"].items():
                print(f"{row:60s}", "  ".join(f"{cells[m]['device_us']:.1f}" if cells[m].get("device_us")
                                              else "-" for m in TABLE_MS))
        elif name == "sweep":
            print(json.dumps(sec["summary"], indent=1), f"{sec['done']}/{len(sec['points'])} points, "
                  f"oracle {sec['oracle_done']}")
        elif name == "overhead":
            for r in sec["rows"]:
                print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()})
        else:
            print(json.dumps(sec, indent=1, default=str)[:3000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
