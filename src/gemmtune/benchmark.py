"""The side-by-side benchmark: gemmtune against cuBLAS, torch.compile max-autotune and
nvMatmulHeuristics on one GPU, with every number in one JSON and a report beside it.

    gemmtune bench                                   # the public suite -> benchmarks/results/
    gemmtune bench --groups splitk,odd --limit 3 --skip-inductor --out out/

One run, in one process (gemmtune's tuner adds its own worker processes):

1. Ceilings, measured at the start: device-to-device copy bandwidth (bytes read plus
   bytes written) and cuBLAS mm throughput on 8192^3 in bf16, fp16 and fp32 (tf32 off).
   A shape's roofline floor is max(flops / peak of its dtype, min_bytes / bandwidth).
2. gemmtune's modes (TUNE_MODES: the default space; --fast and the model's top-5 where
   tune() takes their keywords), each over all selected shapes with a fresh results store
   and a fresh Triton cache, so each shape's tuning wall time includes its compilation.
3. Per shape, on the same rotating inputs (together bigger than L2): cuBLAS; the kernel
   each mode chose; torch.compile(mode="max-autotune-no-cudagraphs") with Inductor's
   caches disabled (its first call's wall time is its tuning time; the kernel it runs is
   read from its generated code, its autotuning from select_algorithm's feedback hook);
   nvMatmulHeuristics' top-1 and top-5 configs run through gemmtune's Triton kernels.
   Every output is checked against the fp64 reference (gemmtune.verify) before its time
   is kept.

Times are gemmtune.bench.timing.CudaGraphTimer's: the median of ``repeats`` CUDA-graph
replays, L2-cold, with the relative IQR as spread. The JSON
(``<date>-<gpu>-torch<v>-triton<v>[-groups]-bench.json``) is rewritten after every shape,
so a killed run keeps what it finished; partial runs (``groups``, ``limit``) merge with
``gemmtune report --merge``. The format is described in gemmtune.report.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import math
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

import torch

from . import report
from .configs import Choice, SplitKConfig, TileConfig
from .problem import DTYPES, Problem
from .shapes import Shape

INDUCTOR_MODE = "max-autotune-no-cudagraphs"
CEILING_N = 8192          # cuBLAS peak: one 8192^3 mm per dtype
COPY_BYTES = 1 << 30      # bandwidth: a 1 GiB device-to-device copy, far beyond the L2
CUDA_ERROR = "bench needs a CUDA GPU; use `gemmtune report` to render recorded results"

# gemmtune's modes: report method name -> tune() keyword arguments (space='default' unless
# given). --fast is tune(fast=True): the exhaustive space, the model's top 1 benchmarked (plus
# cuBLAS); the model's top-5 is the same search with its 5 best benchmarked. A mode runs only
# when tune() takes every one of its keywords (inspect.signature); otherwise the run records
# a note and the mode's records say "skipped".
TUNE_MODES: dict[str, dict] = {
    "gemmtune": {},
    "gemmtune_fast": {"fast": True},
    "gemmtune_top5": {"space": "exhaustive", "benchmark_space": 5},
}
NVMMH_TOPK = {"nvmmh_top1": 1, "nvmmh_top5": 5}
_NVMMH_TYPE = {"bfloat16": "T", "float16": "H", "float32": "S"}


def _t(ms: float | None, spread: float | None = None, repeats: int | None = None) -> dict:
    return {"ms": ms, "spread": spread, "repeats": repeats}


def _fail(e: BaseException) -> dict:
    from .bench.runner import classify_exception

    return {"status": classify_exception(e), "reason": f"{type(e).__name__}: {e}"[:2000]}


# ------------------------------------------------------------------ gemmtune modes
def supported_modes(tune_fn: Callable) -> tuple[dict[str, dict], dict[str, str]]:
    """The modes ``tune_fn`` can run (name -> keywords), and why each other mode cannot.

    >>> def tune(problems, *, space="default", fast=False): ...
    >>> modes, skipped = supported_modes(tune)
    >>> sorted(modes), skipped
    (['gemmtune', 'gemmtune_fast'], {'gemmtune_top5': "gemmtune.tune() has no 'benchmark_space' parameter in this version"})
    """
    params = inspect.signature(tune_fn).parameters
    modes, skipped = {}, {}
    for name, kwargs in TUNE_MODES.items():
        missing = [k for k in kwargs if k not in params]
        if missing:
            skipped[name] = (f"gemmtune.tune() has no {', '.join(repr(m) for m in missing)} "
                             "parameter in this version")
        else:
            modes[name] = kwargs
    return modes, skipped


# ------------------------------------------------------------------ Inductor
_TEMPLATE_RE = re.compile(r"@triton_heuristics\.template\((.*?)\)\s*@triton\.jit\s*def (\w+)\(", re.S)
_DEFINE_RE = re.compile(r"^\s*([A-Z_]+)\s*:\s*tl\.constexpr\s*=\s*(\S+)", re.M)


def inductor_choice(codes: Sequence[str]) -> str | None:
    """What Inductor's generated code runs for the mm, in gemmtune's id style.

    ``aten`` for a cuBLAS call (``extern_kernels.mm``), ``aten_bmm`` for a batched one
    (decompose-K), ``triton_mm:BM..-BN..-BK..-S..-W..-G..`` for an mm template kernel
    (``triton_mm_tma:`` when it uses TMA descriptors), joined with `` + `` when there are
    several, plus a count of the other (fused elementwise / reduction) Triton kernels.
    None when nothing is recognised.
    """
    picks, others = [], 0
    for code in codes:
        for block in re.findall(r"'''(.*?)'''", code, re.S):
            m = _TEMPLATE_RE.search(block)
            if m is None:
                others += "@triton.jit" in block
                continue
            args, name = m.groups()
            consts = dict(_DEFINE_RE.findall(block[m.end():]))
            parts = [f"{tag}{consts[c]}" for tag, c in (("BM", "BLOCK_M"), ("BN", "BLOCK_N"), ("BK", "BLOCK_K"))
                     if c in consts]
            for tag, arg in (("S", "num_stages"), ("W", "num_warps")):
                v = re.search(rf"\b{arg}\s*=\s*(\d+)", args)
                if v:
                    parts.append(f"{tag}{v.group(1)}")
            if "GROUP_M" in consts:
                parts.append(f"G{consts['GROUP_M']}")
            family = "triton_bmm" if "bmm" in name else "triton_mm"
            if "tensor_descriptor" in block or "TMA" in consts or "tma" in name:
                family += "_tma"
            picks.append(f"{family}:{'-'.join(parts)}")
        picks += ["aten"] * code.count("extern_kernels.mm(") + ["aten_bmm"] * code.count("extern_kernels.bmm(")
    if not picks:
        return None
    return " + ".join(picks) + (f" + {others} other kernel{'s' * (others > 1)}" if others else "")


class AutotuneLog(list):
    """Inductor's autotuning outcomes, one entry per tuned op, through
    torch._inductor.select_algorithm's feedback hook: how many choices it benchmarked,
    which won and in what time (Inductor's own measurement)."""

    def __call__(self, timings, name, *rest) -> None:
        try:
            ok = {c: t for c, t in timings.items() if isinstance(t, float) and math.isfinite(t)}
            pick = min(ok, key=ok.get) if ok else None
            self.append({"op": str(name), "choices": len(timings),
                         "best_ms": ok[pick] if pick is not None else None,
                         "pick": (f"{getattr(pick, 'name', '?')} {getattr(pick, 'description', '')}".strip()[:300]
                                  if pick is not None else None)})
        except Exception:  # a hook must never break the compile it watches
            pass


def _install_autotune_log(log: AutotuneLog) -> bool:
    """Register ``log`` with Inductor's algorithm selector once; False where this torch has no hook."""
    try:
        from torch._inductor import select_algorithm as sa

        cache = getattr(sa, "_ALGORITHM_SELECTOR_CACHE", None)  # created lazily, so looked up each time
        if not any(f is log for f in getattr(cache, "feedback_saver_fns", ())):
            sa.add_feedback_saver(log)
        return True
    except Exception:
        return False


def _mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.mm(a, b)


def measure_inductor(problem: Problem, state, timer, log: AutotuneLog) -> dict:
    """torch.compile max-autotune of one mm on the state's inputs: tune time, choice, check, time."""
    from torch._inductor.utils import run_and_get_code

    from .verify import compare, tolerance

    a, b = state.inputs[0]
    f = torch.compile(_mm, mode=INDUCTOR_MODE, dynamic=False)
    log.clear()
    _install_autotune_log(log)
    try:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out, codes = run_and_get_code(f, a, b)  # resets dynamo: a fresh compile, tuned in full
        torch.cuda.synchronize()
        rec = {"tune_s": time.perf_counter() - t0, "choice": inductor_choice(codes), "autotune": list(log)}
        chk = compare(out, state.ref, tolerance(problem))
        rec["rel_err"] = chk.rel_err
        if not chk.ok:
            return {"status": "wrong", "reason": chk.reason, **rec}
        t = timer.measure(lambda i: f(*state.inputs[i]), len(state.inputs))
        return {"status": "ok", "kernel": _t(t.device_ms, t.spread, t.repeats),
                "eager": _t(t.eager_ms, None, getattr(timer, "eager_calls", None)), **rec}
    except Exception as e:  # a failed compile is a result too
        return _fail(e)
    finally:
        torch._dynamo.reset()


# ------------------------------------------------------------------ nvMatmulHeuristics
def nvmmh_to_choice(kernel) -> Choice:
    """gemmtune's Triton choice for one nvMatmulHeuristics kernel configuration.

    CTA tile -> BLOCK_M/N/K; load stages -> num_stages; CTA tile / warp tile -> num_warps;
    the CTA swizzle (tiles grouped for L2 reuse) -> GROUP_M; split-K > 1 -> the fused
    split-K family (deterministic reduction).
    """
    bm, bn, bk = int(kernel.cta_tile_m), int(kernel.cta_tile_n), int(kernel.cta_tile_k)
    warps = ((bm // max(1, int(kernel.warp_tile_m))) * (bn // max(1, int(kernel.warp_tile_n)))
             * max(1, bk // max(1, int(kernel.warp_tile_k))))
    stages = max(1, int(kernel.stages or 1))
    group = max(1, int(kernel.swizzle_factor or 1))
    split = int(kernel.split_k or 1)
    if split > 1:
        return Choice("splitk", SplitKConfig(bm, bn, bk, stages, warps, group, split, True))
    return Choice("triton_mm", TileConfig(bm, bn, bk, stages, warps, group))


def _nvmmh_gpu(nv, device_name: str):
    """The library's GPU enum member for a torch device name ('NVIDIA H200' -> H200_SXM)."""
    name = device_name.upper().replace("-", " ")
    best, score = None, 0
    for g in nv.NvMatmulHeuristicsNvidiaGpu:
        if g.name == "END":
            continue
        model, *form = g.name.split("_")
        if re.search(rf"\b{re.escape(model)}\b", name):
            s = 1 + sum(f in name for f in form)
            if s > score:  # ties keep the first listed (the SXM part)
                best, score = g, s
    if best is None:
        raise ValueError(f"nvMatmulHeuristics knows no GPU like {device_name!r}")
    return best


def nvmmh_choices(problem: Problem, device_name: str, count: int) -> list[Choice]:
    """nvMatmulHeuristics' top ``count`` Triton configurations for ``problem`` on ``device_name``.

    Raises ImportError without nvidia-matmul-heuristics, RuntimeError for a version whose
    Python API differs from 0.1.0.27's (the one this was written against), ValueError for
    an unknown GPU.
    """
    import nvMatmulHeuristics as nv

    if "load_discovery_implicitly" not in inspect.signature(nv.NvMatmulHeuristicsInterfaceEx.__init__).parameters:
        raise RuntimeError("this nvidia-matmul-heuristics has a Python API other than 0.1.0.27's")
    lh = nv.NvMatmulHeuristicsInterfaceEx(
        backend=nv.NvMatmulHeuristicsTarget.TRITON, flags=nv.NvMatmulHeuristicsFlags.PERF_MODEL_BASED_AUTO_TUNING,
        load_discovery_implicitly=True, gpu=_nvmmh_gpu(nv, device_name))
    # A column-major operand is a transposed row-major one in BLAS terms.
    layout = nv.boolsToNvMatmulHeuristicsLayout(problem.layout_a == "col", problem.layout_b == "col")
    precision = _NVMMH_TYPE[problem.dtype] + "S" + _NVMMH_TYPE[problem.out_dtype]  # fp32 accumulation
    configs = lh.get(lh.makeNvMatmulHeuristicsProblem(problem.m, problem.n, problem.k, layout), count,
                     precision=precision)
    # Configs that differ only in what Triton has no knob for (warp tile shape, CTA order) map
    # to one choice: keep its first, best-ranked place.
    unique: dict[str, Choice] = {}
    for cfg in configs:
        c = nvmmh_to_choice(cfg["kernel"])
        unique.setdefault(c.id, c)
    return list(unique.values())


# ------------------------------------------------------------------ measuring
def _record(res: dict, timer, **extra) -> dict:
    """A method record from a bench task result (gemmtune.bench.runner.handle)."""
    if res.get("status") != "ok":
        return {"status": res.get("status", "error"), "reason": res.get("reason", ""), **extra}
    return {"status": "ok", "kernel": _t(res["device_ms"], res.get("spread"), res.get("repeats")),
            "eager": _t(res.get("eager_ms"), None, getattr(timer, "eager_calls", None)),
            "rel_err": res.get("rel_err"), **extra}


def _copy_ceiling(timer) -> dict:
    src = torch.empty(COPY_BYTES // 4, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    t = timer.measure(lambda i: dst.copy_(src), 1)
    moved = 2 * COPY_BYTES  # read once, written once
    return {"bytes": moved, "gbps": moved / (t.device_ms * 1e6), **_t(t.device_ms, t.spread, t.repeats)}


def _mm_ceiling(timer, dtype: torch.dtype) -> dict:
    a = torch.randn(CEILING_N, CEILING_N, device="cuda", dtype=dtype)
    b = torch.randn(CEILING_N, CEILING_N, device="cuda", dtype=dtype)
    out = torch.empty_like(a)
    t = timer.measure(lambda i: torch.mm(a, b, out=out), 1)
    return {"tflops": 2 * CEILING_N ** 3 / (t.device_ms * 1e9), "n": CEILING_N, **_t(t.device_ms, t.spread, t.repeats)}


def measure_ceilings(timer) -> dict:
    """Copy bandwidth and cuBLAS mm peak per dtype, measured now on the current GPU."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 peak is true fp32, as the suite's fp32 rows
    try:
        copy = _copy_ceiling(timer)
        mm = {name: _mm_ceiling(timer, DTYPES[name]) for name in ("bfloat16", "float16", "float32")}
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    torch.cuda.empty_cache()
    return {"how": f"measured in this run: a {COPY_BYTES >> 30} GiB device copy (bytes read + written) and "
                   f"cuBLAS mm on {CEILING_N}^3 (fp32 with tf32 off)", "copy": copy, "mm": mm}


def tune_phase(shapes: Sequence[Shape], *, tune_fn: Callable, scratch: Path, seed: int, provenance: dict,
               say: Callable[[str], None] = lambda msg: None) -> dict:
    """Tune ``shapes`` once per mode: gemmtune's modes with their keywords, and nvMMH's top-1 /
    top-5 as lookup tables that make the tuner compile (in parallel), check and time exactly
    those configs. Every mode gets a fresh store and Triton cache: nothing is reused.

    Returns {"tuned": mode -> key -> ShapeResult, "skipped": mode -> why, "extra_s": mode ->
    key -> nvMMH query seconds, "errors": mode -> key -> why, "notes": [...], "modes": mode ->
    what ran (for the header)}.
    """
    from .table import LookupTable, TableChoice

    modes, skipped = supported_modes(tune_fn)
    notes = [f"{report.LABELS[m]}: skipped: {why}" for m, why in skipped.items()]
    jobs = [(mode, {"space": "default", **kw}, dict(kw), list(shapes)) for mode, kw in modes.items()]
    extra_s: dict[str, dict] = {}
    errors: dict[str, dict] = {}
    if _version("nvidia-matmul-heuristics") is None:
        for m in NVMMH_TOPK:
            skipped[m] = "nvidia-matmul-heuristics is not installed"
        notes.append("nvMMH: skipped: nvidia-matmul-heuristics is not installed (pip install nvidia-matmul-heuristics)")
    else:
        picks, query_s, failed = {}, {}, {}
        for sh in shapes:
            t0 = time.perf_counter()
            try:
                picks[sh.problem.key] = nvmmh_choices(sh.problem, provenance["device_name"], max(NVMMH_TOPK.values()))
            except Exception as e:  # a config the library cannot give is a result too
                failed[sh.problem.key] = f"nvMatmulHeuristics: {type(e).__name__}: {e}"[:500]
                continue
            query_s[sh.problem.key] = time.perf_counter() - t0
            if not picks[sh.problem.key]:
                failed[sh.problem.key] = "nvMatmulHeuristics returned no configuration"
        for mode, k in NVMMH_TOPK.items():
            table = LookupTable(dict(provenance), {key: [TableChoice(c) for c in ch[:k]] for key, ch in picks.items() if ch})
            jobs.append((mode, {"table": table}, {"table": f"nvMatmulHeuristics top-{k}, Triton target"},
                         [sh for sh in shapes if sh.problem.key in table.entries]))
            extra_s[mode] = query_s
            errors[mode] = failed
    tuned, ran = {}, {}
    for mode, kwargs, described, subset in jobs:
        if not subset:
            continue
        say(f"{report.LABELS[mode]}: tuning {len(subset)} shapes")
        try:
            r = tune_fn(subset, store=str(scratch / f"{mode}.sqlite"), out=None, progress=False, seed=seed,
                        env={"TRITON_CACHE_DIR": str(scratch / f"triton-{mode}")}, **kwargs)
        except Exception as e:  # one mode failing must not cost the others
            notes.append(f"{report.LABELS[mode]}: the tuner failed: {type(e).__name__}: {e}"[:500])
            continue
        tuned[mode] = {sh.problem.key: sh for sh in r.shapes}
        ran[mode] = {"kwargs": described, "wall_s": r.wall_s, "measured": r.measured}
        say(f"  {r.measured} candidates in {r.wall_s:.1f} s")
    return {"tuned": tuned, "skipped": skipped, "extra_s": extra_s, "errors": errors, "notes": notes,
            "modes": ran}


def measure_shape(shape: Shape, state, ceilings: dict, tuned: dict, skipped: dict, *, seed: int,
                  inductor_log: AutotuneLog | None, extra_s: dict | None = None,
                  errors: dict | None = None) -> dict:
    """Every method on one shape; the record that goes into the bench JSON.

    ``tuned``: mode -> problem key -> the tuner's ShapeResult (gemmtune's modes and
    nvMMH's top-k); ``skipped``: mode -> why it did not run; ``extra_s``: mode -> key ->
    seconds to add to the tuning time (nvMMH's query); ``errors``: mode -> key -> why
    the mode has no result for this shape.
    """
    from .bench.runner import handle

    p = shape.problem
    peak = (ceilings["mm"].get(p.dtype) or {}).get("tflops")
    gbps = ceilings["copy"].get("gbps")
    floor = report.roofline_ms(p.flops, p.min_bytes, peak, gbps)
    compute = p.flops / (peak * 1e9) if peak else 0.0
    rec = {"group": shape.group, "name": shape.name, "key": p.key, "m": p.m, "n": p.n, "k": p.k,
           "dtype": p.dtype, "flops": p.flops, "min_bytes": p.min_bytes, "floor_ms": floor,
           "bound": "compute" if floor and compute >= floor else "memory", "methods": {}}
    task = {"problem": p.key, "choice": "aten", "seed": seed}
    rec["cublas"] = _record(handle("bench", task, state), state.timer, choice="aten")
    methods = rec["methods"]
    for mode in (*TUNE_MODES, *NVMMH_TOPK):
        r = tuned.get(mode, {}).get(p.key)
        why = (errors or {}).get(mode, {}).get(p.key)
        if mode in skipped:
            methods[mode] = {"status": "skipped", "reason": skipped[mode]}
        elif why or r is None:
            methods[mode] = {"status": "error", "reason": why or "the tuner gave no result for this shape (see notes)"}
        elif r.best is None:
            methods[mode] = {"status": "error", "reason": f"no candidate passed: {r.statuses}", "tune_s": r.tune_s}
        else:
            res = handle("bench", {**task, "choice": r.best}, state)
            methods[mode] = _record(res, state.timer, choice=r.best, candidates=r.tried, tuner_ms=r.best_ms,
                                    tune_s=r.tune_s + (extra_s or {}).get(mode, {}).get(p.key, 0.0))
    if inductor_log is None:
        methods["inductor"] = {"status": "skipped", "reason": "--skip-inductor"}
    elif state.key != p.key:  # the inputs could not be made (e.g. out of memory)
        methods["inductor"] = {"status": "error", "reason": rec["cublas"].get("reason") or "no inputs"}
    else:
        methods["inductor"] = measure_inductor(p, state, state.timer, inductor_log)
    return rec


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def run(shapes: Sequence[Shape], *, out_dir: str | os.PathLike = "benchmarks/results", suite: str = "public",
        groups: Sequence[str] | None = None, limit: int | None = None, repeats: int = 20,
        skip_inductor: bool = False, seed: int = 0, render: bool = True,
        tune_fn: Callable | None = None, log=None) -> Path:
    """Benchmark ``shapes`` on the current GPU; write the bench JSON (and its report) under
    ``out_dir`` and return the JSON's path. Raises ValueError without a CUDA GPU."""
    if not torch.cuda.is_available():
        raise ValueError(CUDA_ERROR)
    import triton

    from . import __version__
    from .bench.runner import WorkerState
    from .bench.timing import CudaGraphTimer
    from .device import DeviceInfo
    from .table import provenance
    from .tune import tune as gemmtune_tune

    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    tune_fn = tune_fn or gemmtune_tune
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 rows are true fp32 for every method
    scratch = Path(tempfile.mkdtemp(prefix="gemmtune-bench-"))
    # Fresh compile caches: every tuning time below includes its compilation.
    os.environ["TRITON_CACHE_DIR"] = str(scratch / "triton-bench")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(scratch / "inductor")
    dev = DeviceInfo.from_torch()
    timer = CudaGraphTimer(replays=repeats)
    header = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "device_name": dev.name,
              "capability": dev.capability_str, "torch": torch.__version__, "triton": triton.__version__,
              "gemmtune": __version__, "nvmmh": _version("nvidia-matmul-heuristics"),
              "python": platform.python_version(), "suite": suite, "groups": list(groups) if groups else None,
              "limit": limit, "repeats": repeats, "seed": seed, "inductor_mode": INDUCTOR_MODE,
              "timer": f"median of {repeats} CUDA-graph replays, L2-cold (rotating inputs > 2x L2); "
                       f"eager = wall time per call over {timer.eager_calls} back-to-back calls",
              "modes": {}}
    suffix = "-".join(groups or []) + (f"-first{limit}" if limit else "")
    path = out / report.bench_filename(header, suffix)
    doc = {"schema": report.SCHEMA, "source": "", "header": header, "ceilings": None, "notes": [],
           "shapes": []}

    say(f"gemmtune bench: {len(shapes)} shapes on {dev.name} -> {path}")
    doc["ceilings"] = c = measure_ceilings(timer)
    say("ceilings: copy {:.0f} GB/s; ".format(c["copy"]["gbps"])
        + ", ".join(f"{k} {v['tflops']:.0f} TFLOP/s" for k, v in c["mm"].items()))
    report.save_bench(doc, path)

    phase = tune_phase(shapes, tune_fn=tune_fn, scratch=scratch, seed=seed, provenance=provenance(
        dev.name, dev.capability_str, torch.__version__, triton.__version__, __version__, "nvmmh"), say=say)
    doc["notes"] += phase["notes"]
    header["modes"] = phase["modes"]
    report.save_bench(doc, path)

    inductor_log = None
    if skip_inductor:
        doc["notes"].append("Inductor: skipped (--skip-inductor)")
    else:
        import torch._inductor.config as icfg
        icfg.force_disable_caches = True  # its tuning is paid in full, every shape
        inductor_log = AutotuneLog()
        if not _install_autotune_log(inductor_log):
            doc["notes"].append("Inductor's autotuning feedback hook is not available in this torch: "
                                "its choices are read from the generated code only")
    state = WorkerState(timer=timer)
    for s in shapes:
        t0 = time.perf_counter()
        rec = measure_shape(s, state, c, phase["tuned"], phase["skipped"], seed=seed, inductor_log=inductor_log,
                            extra_s=phase["extra_s"], errors=phase["errors"])
        doc["shapes"].append(rec)
        report.save_bench(doc, path)
        cells = []
        for m, label in (("cublas", "cuBLAS"), *report.METHODS):
            r = rec["cublas"] if m == "cublas" else rec["methods"].get(m)
            k = report.kernel(r)
            cells.append(f"{label} {k['ms'] * 1e3:.2f}" if k else f"{label} {(r or {}).get('status', '-')}")
        say(f"{s.group:8} {s.name:24} ({time.perf_counter() - t0:5.1f} s) " + "  ".join(cells))
    if render:
        written = report.render(doc, out, path.stem)
        say("report: " + ", ".join(str(p) for p in written.values()))
    return path
