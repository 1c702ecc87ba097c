"""The side-by-side benchmark: gemmtune against cuBLAS, torch.compile max-autotune and
nvMatmulHeuristics on one GPU, with every number in one JSON and a report beside it.

    gemmtune bench                                   # the public suite -> benchmarks/results/
    gemmtune bench --groups splitk,odd --limit 3 --skip-inductor --out out/

One run, in one process (gemmtune's tuner adds its own worker processes):

1. Ceilings, measured at the start (``measure_ceilings``): memory bandwidth two ways -- a
   1 GiB device-to-device copy (bytes read plus bytes written) and read-dominated kernels
   (the best of a 1 GiB fp32 sum and a bf16 GEMV over a 1 GiB matrix, bytes read plus the
   few written) -- and cuBLAS mm throughput on 8192^3 in bf16, fp16 and fp32 (tf32 off).
   A shape's roofline floor is max(flops / peak of its dtype, min_bytes / memory
   bandwidth), the memory bandwidth being the higher of the two (``report.memory_gbps``).
2. gemmtune's modes (TUNE_MODES: the default space; --fast and the model's top-5 where
   tune() takes their keywords), each over all selected shapes with a fresh results store
   and a fresh Triton cache, so each shape's tuning wall time includes its compilation.
3. Per shape, on the same rotating inputs (together bigger than L2): cuBLAS; the kernel
   each mode chose; torch.compile(mode="max-autotune-no-cudagraphs") with Inductor's
   caches disabled (its first call's wall time is its tuning time; the kernel it runs is
   read from its generated code, its autotuning from select_algorithm's feedback hook);
   nvMatmulHeuristics' top-1 and top-5 configs run through gemmtune's Triton kernels.
   Every output is checked against the fp64 reference (gemmtune.verify) before its time
   is kept, once per method. Then all of them are timed together in interleaved rounds
   (``round_robin``): no method is favoured or penalised by when it ran.

Times: ``round_robin`` and ``aggregate``. Each method's launch is captured once in a CUDA
graph as gemmtune.bench.timing.CudaGraphTimer does it (L2-cold: the graph cycles through
the rotating input sets). Then ``ROUNDS`` rounds (R) replay every method's graph
ceil(repeats / R) times each, in an order that rotates per round; the kept time is the
median over rounds of the round medians, the spread the larger of the median
within-round relative IQR and the across-round range / median. Eager per-call wall time
is measured once per method after the rounds. The JSON
(``<date>-<gpu>-torch<v>-triton<v>[-groups]-bench.json``) is rewritten after every shape,
so a killed run keeps what it finished; partial runs (``groups``, ``limit``) merge with
``gemmtune report --merge``. The format is described in gemmtune.report.

Two environment variables serve scripts/bench_gpu.sh (several runs in one device call):
``GEMMTUNE_BENCH_CEILINGS=FILE`` reads the ceilings from FILE when it holds ones measured
on this GPU (by an earlier run of the same call), else measures them and writes FILE;
``GEMMTUNE_BENCH_DEADLINE=<unix time>`` stops before a shape that would likely end past
that time (the longest shape so far is the guess), notes the shapes left out and still
writes the JSON and its report.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.metadata
import inspect
import json
import math
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

import torch

from . import report
from .bench.timing import CudaGraphTimer, Timing, summarize
from .configs import Choice, SplitKConfig, TileConfig
from .problem import DTYPES, Problem
from .shapes import Shape

INDUCTOR_MODE = "max-autotune-no-cudagraphs"
CEILING_N = 8192          # cuBLAS peak: one 8192^3 mm per dtype
COPY_BYTES = 1 << 30      # bandwidth: a 1 GiB device-to-device copy, far beyond the L2
READ_BYTES = 1 << 30      # read bandwidth: kernels that read 1 GiB and write next to nothing
GEMV_K = 16384            # the read ceiling's GEMV: a (READ_BYTES / 2 / GEMV_K) x GEMV_K bf16 matrix
ROUNDS = 4                # interleaved timing rounds per shape (each replays ceil(repeats / ROUNDS) times)
ENV_CEILINGS = "GEMMTUNE_BENCH_CEILINGS"
ENV_DEADLINE = "GEMMTUNE_BENCH_DEADLINE"
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
# Opt-in modes (`gemmtune bench --extra-modes top20,exhaustive`): the model's top-20, and the
# whole exhaustive space benchmarked, the reference the model's top-k is judged against. The
# exhaustive space holds 870-9,045 candidates per public-suite shape on an H200, so that mode
# is for a few chosen shapes (--suite / --groups / --limit), not the whole suite in one call.
# ``auto``: the model's adaptive top-k (benchmark_space='AUTO', model.topk.choose_k: k grows
# where the model is unsure), the mode meant to reach 97% of the best at the lowest cost.
OPTIONAL_MODES: dict[str, dict] = {
    "gemmtune_auto": {"space": "exhaustive", "benchmark_space": "AUTO"},
    "gemmtune_top20": {"space": "exhaustive", "benchmark_space": 20},
    "gemmtune_exhaustive": {"space": "exhaustive", "benchmark_space": "SAME"},
}
EXTRA_MODE_NAMES = {"auto": "gemmtune_auto", "top20": "gemmtune_top20", "exhaustive": "gemmtune_exhaustive"}
NVMMH_TOPK = {"nvmmh_top1": 1, "nvmmh_top5": 5}


def extra_modes(names: str | Sequence[str] | None) -> list[str]:
    """Method keys of the opt-in modes named (``"top20,exhaustive"``); ValueError on others."""
    if not names:
        return []
    items = names.split(",") if isinstance(names, str) else list(names)
    out = []
    for n in (x.strip() for x in items if x.strip()):
        key = EXTRA_MODE_NAMES.get(n, n if n in OPTIONAL_MODES else None)
        if key is None:
            raise ValueError(f"unknown extra mode {n!r}: choose from {', '.join(EXTRA_MODE_NAMES)}")
        if key not in out:
            out.append(key)
    return out
_NVMMH_TYPE = {"bfloat16": "T", "float16": "H", "float32": "S"}


def _t(ms: float | None, spread: float | None = None, repeats: int | None = None) -> dict:
    return {"ms": ms, "spread": spread, "repeats": repeats}


def _fail(e: BaseException) -> dict:
    from .bench.measure import classify_exception

    return {"status": classify_exception(e).value, "reason": f"{type(e).__name__}: {e}"[:2000]}


# ------------------------------------------------------------------ gemmtune modes
def supported_modes(tune_fn: Callable, extra: Sequence[str] = ()) -> tuple[dict[str, dict], dict[str, str]]:
    """The modes ``tune_fn`` can run (name -> keywords), and why each other mode cannot: the
    standard ones (TUNE_MODES) plus the opt-in ones named in ``extra`` (OPTIONAL_MODES keys).

    >>> def tune(problems, *, space="default", fast=False): ...
    >>> modes, skipped = supported_modes(tune)
    >>> sorted(modes), skipped
    (['gemmtune', 'gemmtune_fast'], {'gemmtune_top5': "gemmtune.tune() has no 'benchmark_space' parameter in this version"})
    """
    params = inspect.signature(tune_fn).parameters
    modes, skipped = {}, {}
    for name, kwargs in [*TUNE_MODES.items(), *((m, OPTIONAL_MODES[m]) for m in extra)]:
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


def _remove_autotune_log(log: AutotuneLog) -> None:
    """Unregister ``log`` from Inductor's algorithm selector, where this torch lets us."""
    try:
        from torch._inductor import select_algorithm as sa

        fns = getattr(getattr(sa, "_ALGORITHM_SELECTOR_CACHE", None), "feedback_saver_fns", None)
        while isinstance(fns, list) and any(f is log for f in fns):
            fns.remove(next(f for f in fns if f is log))
    except Exception:  # an older torch: nothing we can undo
        pass


class ProcessSettings(contextlib.ExitStack):
    """Process-wide settings changed for a while: each ``setenv`` / ``setattr`` remembers the
    value it replaced, and leaving the block puts them all back (in reverse order), also when
    the block raises; ``callback`` adds any other undo step.

        >>> import os
        >>> with ProcessSettings() as s:
        ...     s.setenv("GEMMTUNE_DOCTEST", "1")
        >>> "GEMMTUNE_DOCTEST" in os.environ
        False
    """

    def setenv(self, name: str, value: str) -> None:
        old = os.environ.get(name)
        self.callback(_restore_env, name, old)
        os.environ[name] = value

    def setattr(self, obj, name: str, value) -> None:
        old = getattr(obj, name)
        self.callback(setattr, obj, name, old)
        setattr(obj, name, value)


def _restore_env(name: str, old: str | None) -> None:
    if old is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = old


def _mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The peers' product: torch.mm, or torch.bmm for a bmm problem's 3-D operands."""
    return torch.bmm(a, b) if a.dim() == 3 else torch.mm(a, b)


def _scaled_mm_fn(problem: Problem, epi):
    """torch._scaled_mm with the state's scales (and bias) for a scaled_mm problem: what Inductor
    compiles (tuned_scaled_mm). An fp32 output gets its bias added after (as the aten family)."""
    sa, sb = epi.scale_a, epi.scale_b
    if problem.scale == "row":
        sa, sb = sa.view(-1, 1), sb.view(1, -1)
    fused = epi.bias if problem.out_dtype == "bfloat16" else None

    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = torch._scaled_mm(a, b, sa, sb, bias=fused, out_dtype=problem.torch_out_dtype)
        return out if epi.bias is None or fused is not None else out + epi.bias
    return f


def compile_inductor(problem: Problem, state, log: AutotuneLog) -> tuple[dict, Callable[[int], object] | None]:
    """torch.compile max-autotune of one mm on the state's inputs: its tuning (the first call's
    wall time), the kernel it chose and the check of its output against the fp64 reference.

    Returns (record, launch): ``launch(i)`` runs the compiled function on input set ``i``
    when the output checked out, for the caller to time; None otherwise (the record says
    why). The caller calls torch._dynamo.reset() once it is done with ``launch``.
    """
    from torch._inductor.utils import run_and_get_code

    from .verify import compare, tolerance

    a, b = state.inputs[0]
    f = torch.compile(_mm if problem.op != "scaled_mm" else _scaled_mm_fn(problem, state.epilogue),
                      mode=INDUCTOR_MODE, dynamic=False)
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
            return {"status": "wrong", "reason": chk.reason, **rec}, None
        return {"status": "ok", **rec}, lambda i: f(*state.inputs[i])
    except Exception as e:  # a failed compile is a result too
        return _fail(e), None


# ------------------------------------------------------------------ PyTorch TunableOp
class TunableOp:
    """PyTorch's TunableOp (``torch.cuda.tunable``) as a peer: it times cuBLAS / cuBLASLt
    algorithms (hipBLASLt on ROCm) for each GEMM the first time it sees it and keeps the
    fastest. Process-wide state, so it is switched on only around its own calls and its
    results file lives in a scratch folder; ``close()`` puts every setting back."""

    def __init__(self, scratch: Path, tun=None):
        tun = tun if tun is not None else torch.cuda.tunable
        self.tun = tun
        self.saved = (tun.is_enabled(), tun.tuning_is_enabled(), tun.get_filename())
        tun.set_filename(str(Path(scratch) / "tunableop_results%d.csv"))

    def __enter__(self):
        self.tun.enable(True)
        return self

    def __exit__(self, *exc):
        self.tun.enable(False)

    def launch(self, problem: Problem, state) -> tuple[dict, Callable[[int], object] | None]:
        """Tune on the state's inputs (the first call's wall time), check against fp64, and
        return (record, launch(i)): ``launch`` runs torch.mm with TunableOp's pick, tuning off."""
        from .verify import compare, tolerance

        a, b = state.inputs[0]
        try:
            with self:
                self.tun.tuning_enable(True)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                out = _mm(a, b)
                torch.cuda.synchronize()
                rec = {"tune_s": time.perf_counter() - t0, "choice": "tunableop"}
                self.tun.tuning_enable(False)
            chk = compare(out, state.ref, tolerance(problem))
            rec["rel_err"] = chk.rel_err
            if not chk.ok:
                return {"status": "wrong", "reason": chk.reason, **rec}, None
        except Exception as e:  # a failed tuning is a result too
            return _fail(e), None

        def launch(i):
            with self:
                return _mm(*state.inputs[i])
        return {"status": "ok", **rec}, launch

    def close(self) -> None:
        enabled, tuning, filename = self.saved
        self.tun.enable(enabled)
        self.tun.tuning_enable(tuning)
        self.tun.set_filename(filename)


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
    # (a bmm: one matrix's problem; its tiles are per matrix too)
    layout = nv.boolsToNvMatmulHeuristicsLayout(problem.slice_layout_a == "col", problem.slice_layout_b == "col")
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


# ------------------------------------------------------------------ ceilings
def _record(res: dict, **extra) -> dict:
    """A failed method record from a verification's result (verified_launch)."""
    return {"status": res.get("status", "error"), "reason": res.get("reason", ""), **extra}


def _bandwidth(name: str, moved: int, t: Timing) -> dict:
    return {"kernel": name, "bytes": moved, "gbps": moved / (t.device_ms * 1e6), **_t(t.device_ms, t.spread, t.repeats)}


def _copy_ceiling(timer) -> dict:
    src = torch.empty(COPY_BYTES // 4, dtype=torch.float32, device="cuda").normal_()
    dst = torch.empty_like(src)
    t = timer.measure(lambda i: dst.copy_(src), 1)
    return _bandwidth("copy_fp32", 2 * COPY_BYTES, t)  # read once, written once


def _read_ceiling(timer, nbytes: int = READ_BYTES, device: str = "cuda") -> dict:
    """Read bandwidth: the best of two kernels that read ``nbytes`` and write next to nothing.

    A copy moves as many bytes into memory as out of it, but a GEMV-like GEMM (decode:
    M of 1 to 16) reads its weight matrix and writes a few KB, and HBM reaches a higher
    rate reading alone than reading and writing at once: against the copy's rate such
    kernels beat their 'floor' (cuBLAS 1x6144x4096 bf16 ran at 118% of it on an H200).
    So read-dominated kernels are timed too: ``sum_fp32``, torch.sum of an fp32 tensor of
    ``nbytes`` (bytes read plus the 4 written), and ``gemv_bf16``, torch.mv of a bf16
    matrix of ``nbytes`` (GEMV_K columns) with a vector (matrix + vector read, result
    written). Each rate achieved is a lower bound of what the memory can deliver, so the
    best one is the read ceiling; it is the same kind of lower bound as the copy's and
    the mm peaks. Both are far beyond the L2: every byte comes from HBM.
    """
    kernels = {name: _bandwidth(name, *_read_kernel(name, timer, nbytes, device)) for name in ("sum_fp32", "gemv_bf16")}
    best = max(kernels.values(), key=lambda k: k["gbps"])
    return {**best, "kernels": kernels}


def _read_kernel(name: str, timer, nbytes: int, device: str) -> tuple[int, Timing]:
    """(bytes moved, timing) of one read-ceiling kernel; its buffers are freed on return."""
    if name == "sum_fp32":
        x = torch.empty(nbytes // 4, dtype=torch.float32, device=device).normal_()
        acc = torch.empty((), dtype=torch.float32, device=device)
        return x.numel() * 4 + 4, timer.measure(lambda i: torch.sum(x, dim=0, out=acc), 1)  # one full reduction
    rows = max(1, nbytes // 2 // GEMV_K)
    mat = torch.randn(rows, GEMV_K, dtype=torch.bfloat16, device=device)
    vec = torch.randn(GEMV_K, dtype=torch.bfloat16, device=device)
    res = torch.empty(rows, dtype=torch.bfloat16, device=device)
    return (mat.numel() + vec.numel() + res.numel()) * 2, timer.measure(lambda i: torch.mv(mat, vec, out=res), 1)


def _mm_ceiling(timer, dtype: torch.dtype) -> dict:
    a = torch.randn(CEILING_N, CEILING_N, device="cuda", dtype=dtype)
    b = torch.randn(CEILING_N, CEILING_N, device="cuda", dtype=dtype)
    out = torch.empty_like(a)
    t = timer.measure(lambda i: torch.mm(a, b, out=out), 1)
    return {"tflops": 2 * CEILING_N ** 3 / (t.device_ms * 1e9), "n": CEILING_N, **_t(t.device_ms, t.spread, t.repeats)}


def measure_ceilings(timer) -> dict:
    """Copy and read bandwidth and cuBLAS mm peak per dtype, measured now on the current GPU.

    ``memory_gbps`` is the higher of the two bandwidths: the one a shape's floor uses."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 peak is true fp32, as the suite's fp32 rows
    try:
        copy_ = _copy_ceiling(timer)
        torch.cuda.empty_cache()
        try:
            read = _read_ceiling(timer)
        except Exception as e:  # the copy alone still gives a floor
            read = {"gbps": None, **_fail(e)}
        torch.cuda.empty_cache()
        mm = {name: _mm_ceiling(timer, DTYPES[name]) for name in ("bfloat16", "float16", "float32")}
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    torch.cuda.empty_cache()
    c = {"how": f"measured in this run: a {COPY_BYTES >> 30} GiB device copy (bytes read + written); the best of "
                f"a {READ_BYTES >> 30} GiB fp32 sum and a bf16 GEMV over a {READ_BYTES >> 30} GiB matrix (bytes "
                f"read + written: a read bandwidth); cuBLAS mm on {CEILING_N}^3 (fp32 with tf32 off)",
         "copy": copy_, "read": read, "mm": mm}
    c["memory_gbps"] = report.memory_gbps(c)
    return c


def load_ceilings(path: str | os.PathLike, device_name: str) -> dict | None:
    """Ceilings an earlier run wrote to ``path`` (``save_ceilings``) on a GPU of this name, else None."""
    try:
        saved = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("device_name") != device_name or not saved.get("ceilings"):
        return None
    c = dict(saved["ceilings"])
    c["how"] = f"{c.get('how', '')}; read from {Path(path).name}, measured at {saved.get('date', '?')} " \
               "by an earlier run of the same device call"
    return c


def save_ceilings(path: str | os.PathLike, device_name: str, ceilings: dict) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"device_name": device_name, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "ceilings": ceilings}, indent=1, allow_nan=False))
    os.replace(tmp, path)


# ------------------------------------------------------------------ interleaved timing
def timer_count(timer) -> int:
    """How many samples one measurement of ``timer`` takes (CudaGraphTimer: replays; WallTimer: repeats)."""
    for attr in ("replays", "repeats"):
        if isinstance(getattr(timer, attr, None), int):
            return getattr(timer, attr)
    raise TypeError(f"{type(timer).__name__} has neither 'replays' nor 'repeats'")


def rotation(names: Sequence[str], rounds: int) -> list[list[str]]:
    """The order of each round: round r starts at entry floor(r * n / rounds) and wraps around,
    so over the rounds every entry runs early and late.

    >>> rotation(["a", "b", "c", "d"], 2)
    [['a', 'b', 'c', 'd'], ['c', 'd', 'a', 'b']]
    """
    n = len(names)
    return [[names[(r * n // rounds + i) % n] for i in range(n)] for r in range(rounds)] if n else []


def round_robin(entries: dict[str, Callable[[int], Timing]], repeats: int,
                rounds: int = ROUNDS) -> dict[str, list[Timing] | BaseException]:
    """Time every entry in ``rounds`` interleaved rounds (fewer when ``repeats`` is smaller),
    ``ceil(repeats / rounds)`` samples per entry per round, in ``rotation`` order.

    ``entries``: name -> thunk, ``thunk(samples)`` -> the Timing of one round of that many
    samples. Returns name -> the Timing of each round, or the exception that ended that
    entry (it then leaves the later rounds; the others go on).
    """
    repeats = max(1, repeats)
    rounds = max(1, min(rounds, repeats))
    per = -(-repeats // rounds)
    out: dict[str, list[Timing] | BaseException] = {name: [] for name in entries}
    for order in rotation(list(entries), rounds):
        for name in order:
            if isinstance(out[name], BaseException):
                continue
            try:
                out[name].append(entries[name](per))
            except Exception as e:  # one failing kernel must not cost the others their times
                out[name] = e
    return out


def aggregate(timings: Sequence[Timing]) -> dict:
    """One kernel-time entry from the rounds of one method.

    ``ms``: the median of the round medians. ``spread``: the larger of the median
    within-round spread (relative IQR) and the across-round range (max - min of the round
    medians) / ``ms``: a difference smaller than either is noise, whether from the samples
    of one round or from drift between rounds. ``repeats``: samples in all; ``rounds``,
    ``round_ms``, ``round_spread``: per round, in time order.

    >>> from gemmtune.bench.timing import Timing
    >>> k = aggregate([Timing(1.0, 0, 5, 0.01), Timing(1.2, 0, 5, 0.03), Timing(1.1, 0, 5, 0.02)])
    >>> k["ms"], k["repeats"], round(k["spread"], 12)
    (1.1, 15, 0.181818181818)
    """
    meds = [t.device_ms for t in timings]
    ms = statistics.median(meds)
    within = statistics.median(t.spread for t in timings)
    across = (max(meds) - min(meds)) / ms if ms > 0 else 0.0
    return {"ms": ms, "spread": max(within, across), "repeats": sum(t.repeats for t in timings),
            "rounds": len(timings), "round_ms": meds, "round_spread": [t.spread for t in timings],
            "within_spread": within, "across_spread": across}


_SIDE_STREAM: list = []


class _GraphEntry:
    """One launch captured once in a CUDA graph, replayed in rounds: CudaGraphTimer.measure
    split in two (same settings: warm-up, a graph of ~target ms that cycles through the input
    sets, samples = replay time / launches), so capturing happens once per method, not once
    per round. A round is one untimed replay (the kernel runs right before it is timed,
    whatever ran before) and ``samples`` timed ones."""

    def __init__(self, timer: CudaGraphTimer, launch: Callable[[int], object], n_sets: int):
        self.timer, self.launch = timer, launch
        if not _SIDE_STREAM:
            _SIDE_STREAM.append(torch.cuda.Stream())
        self.graph, self.launches = timer.capture(launch, n_sets, stream=_SIDE_STREAM[0])

    def __call__(self, samples: int) -> Timing:
        self.graph.replay()
        med, spread = summarize(self.timer.replay_ms(self.graph, self.launches, samples))
        return Timing(med, math.nan, samples, spread, True)

    def eager_ms(self) -> float:
        return self.timer.eager_ms(self.launch)

    def close(self) -> None:
        self.graph = None


class _TimerEntry:
    """Any other timer (WallTimer on a CPU, a test's fake): each round is one measurement of a
    copy of the timer set to ``samples``; eager time is the first round's."""

    def __init__(self, timer, launch: Callable[[int], object], n_sets: int):
        self.timer, self.launch, self.n_sets = timer, launch, n_sets
        self.first: Timing | None = None

    def __call__(self, samples: int) -> Timing:
        t = copy.copy(self.timer)
        setattr(t, "replays" if isinstance(getattr(t, "replays", None), int) else "repeats", samples)
        timing = t.measure(self.launch, self.n_sets)
        self.first = self.first or timing
        return timing

    def eager_ms(self) -> float | None:
        return self.first.eager_ms if self.first else None

    def close(self) -> None:
        pass


def make_entry(timer, launch: Callable[[int], object], n_sets: int):
    """The round thunk of one launch for ``timer`` (see round_robin); ``.eager_ms()`` and ``.close()``."""
    if isinstance(timer, CudaGraphTimer):
        return _GraphEntry(timer, launch, n_sets)
    return _TimerEntry(timer, launch, n_sets)


def verified_launch(problem: Problem, choice: str, state, seed: int) -> tuple[dict, Callable[[int], object] | None]:
    """Check ``choice`` on ``problem`` against the fp64 reference (bench.measure.verify, as the
    tuner does) and return (its result dict, launch(i) on input set i), launch None when it failed."""
    from .bench.measure import verify

    m, launch = verify(problem, choice, state, seed)
    return m.to_dict(), launch


def tune_phase(shapes: Sequence[Shape], *, tune_fn: Callable, scratch: Path, seed: int, provenance: dict,
               say: Callable[[str], None] = lambda msg: None, extra: Sequence[str] = ()) -> dict:
    """Tune ``shapes`` once per mode: gemmtune's modes with their keywords, and nvMMH's top-1 /
    top-5 as lookup tables that make the tuner compile (in parallel), check and time exactly
    those configs. Every mode gets a fresh store and Triton cache: nothing is reused.

    Returns {"tuned": mode -> key -> ShapeResult, "skipped": mode -> why, "extra_s": mode ->
    key -> nvMMH query seconds, "errors": mode -> key -> why, "notes": [...], "modes": mode ->
    what ran (for the header)}.
    """
    from .table import LookupTable, TableChoice

    modes, skipped = supported_modes(tune_fn, extra)
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
            if mode in OPTIONAL_MODES:  # asked for: its rows say so instead of vanishing
                skipped[mode] = f"the tuner failed: {type(e).__name__}: {e}"[:300]
            continue
        tuned[mode] = {sh.problem.key: sh for sh in r.shapes}
        ran[mode] = {"kwargs": described, "wall_s": r.wall_s, "measured": r.measured,
                     "startup_s": r.startup_s, "compile_workers": r.compile_workers}
        say(f"  {r.measured} candidates in {r.wall_s:.1f} s ({r.startup_s:.1f} s worker start-up, "
            f"{r.compile_workers} compile workers)")
    return {"tuned": tuned, "skipped": skipped, "extra_s": extra_s, "errors": errors, "notes": notes,
            "modes": ran}


def _failed(r: dict, e: BaseException) -> None:
    """Turn a verified method's record into the record of its failed timing, in place."""
    keep = {k: r[k] for k in ("choice", "candidates", "tuner_ms", "tune_s", "rel_err", "autotune") if k in r}
    r.clear()
    r.update(_fail(e), **keep)


def measure_shape(shape: Shape, state, ceilings: dict, tuned: dict, skipped: dict, *, seed: int,
                  inductor_log: AutotuneLog | None, extra_s: dict | None = None,
                  errors: dict | None = None, rounds: int = ROUNDS, tunableop: TunableOp | None = None) -> dict:
    """Every method on one shape; the record that goes into the bench JSON.

    ``tuned``: mode -> problem key -> the tuner's ShapeResult (gemmtune's modes and
    nvMMH's top-k); ``skipped``: mode -> why it did not run; ``extra_s``: mode -> key ->
    seconds to add to the tuning time (nvMMH's query); ``errors``: mode -> key -> why
    the mode has no result for this shape.

    First every method's kernel is checked against the fp64 reference (Inductor's after
    its compile, which is its tuning); then cuBLAS and every kernel that passed are timed
    together, ``round_robin`` over ``rounds`` rounds with the state's timer's repeats in
    all (``aggregate``); then the eager time of each, once.
    """
    p = shape.problem
    timer = state.timer
    peak = (ceilings["mm"].get(p.dtype) or {}).get("tflops")
    if peak is None and p.op == "scaled_mm":
        # fp8: no fp8 ceiling is measured; Hopper's fp8 tensor cores run at twice the bf16 rate.
        bf16 = (ceilings["mm"].get("bfloat16") or {}).get("tflops")
        peak = 2 * bf16 if bf16 else None
    floor = report.roofline_ms(p.flops, p.min_bytes, peak, report.memory_gbps(ceilings))
    compute = p.flops / (peak * 1e9) if peak else 0.0
    rec = {"group": shape.group, "name": shape.name, "key": p.key, "m": p.m, "n": p.n, "k": p.k, "batch": p.batch,
           "dtype": p.dtype, "flops": p.flops, "min_bytes": p.min_bytes, "floor_ms": floor,
           "bound": "compute" if floor and compute >= floor else "memory", "methods": {}}
    methods = rec["methods"]
    # name -> (record so far, launch): the methods whose output checked out, in timing order
    passed: dict[str, tuple[dict, Callable[[int], object]]] = {}

    def check(name: str, choice: str, **extra) -> dict:
        res, launch = verified_launch(p, choice, state, seed)
        if launch is None:
            return _record(res, choice=choice, **extra)
        r = {"status": "ok", "choice": choice, "rel_err": res.get("rel_err"), **extra}
        passed[name] = (r, launch)
        return r

    rec["cublas"] = check("cublas", "aten")
    asked = [m for m in OPTIONAL_MODES if m in tuned or m in skipped]
    for mode in (*TUNE_MODES, *asked, *NVMMH_TOPK):
        r = tuned.get(mode, {}).get(p.key)
        why = (errors or {}).get(mode, {}).get(p.key)
        if mode in skipped:
            methods[mode] = {"status": "skipped", "reason": skipped[mode]}
        elif why or r is None:
            methods[mode] = {"status": "error", "reason": why or "the tuner gave no result for this shape (see notes)"}
        elif r.best is None:
            methods[mode] = {"status": "error", "reason": f"no candidate passed: {r.statuses}", "tune_s": r.tune_s}
        else:
            methods[mode] = check(mode, r.best, candidates=r.tried, tuner_ms=r.best_ms,
                                  tune_s=r.tune_s + (extra_s or {}).get(mode, {}).get(p.key, 0.0))
    compiled = False
    entries: dict = {}
    try:
        if inductor_log is None:
            methods["inductor"] = {"status": "skipped", "reason": "--skip-inductor"}
        elif state.key != p.key:  # the inputs could not be made (e.g. out of memory)
            methods["inductor"] = {"status": "error", "reason": rec["cublas"].get("reason") or "no inputs"}
        else:
            compiled = True
            methods["inductor"], launch = compile_inductor(p, state, inductor_log)
            if launch is not None:
                passed["inductor"] = (methods["inductor"], launch)
        if tunableop is not None and state.key == p.key:
            methods["tunableop"], launch = tunableop.launch(p, state)
            if launch is not None:
                passed["tunableop"] = (methods["tunableop"], launch)
        # Capture (warm-up, graph) every verified launch, then time them all together.
        for name, (r, launch) in passed.items():
            try:
                entries[name] = make_entry(timer, launch, len(state.inputs))
            except Exception as e:
                _failed(r, e)
        times = round_robin(entries, timer_count(timer), rounds)
        for name, entry in entries.items():
            r = passed[name][0]
            t = times[name]
            if isinstance(t, BaseException):
                _failed(r, t)
                continue
            try:
                eager = entry.eager_ms()
            except Exception:  # the kernel time stands without it
                eager = None
            r["kernel"] = aggregate(t)
            r["eager"] = _t(eager, None, getattr(timer, "eager_calls", None))
    finally:
        for entry in entries.values():
            entry.close()
        if compiled:
            torch._dynamo.reset()
    # Records in the bench JSON's usual key order: status, kernel, eager first.
    for name in passed:
        r = rec["cublas"] if name == "cublas" else methods[name]
        ordered = {k: r[k] for k in ("status", "kernel", "eager") if k in r}
        ordered.update((k, v) for k, v in r.items() if k not in ordered)
        if name == "cublas":
            rec["cublas"] = ordered
        else:
            methods[name] = ordered
    return rec


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def timer_text(repeats: int, rounds: int, eager_calls: int | None) -> str:
    """The header's description of how kernel times were taken."""
    repeats = max(1, repeats)
    rounds = max(1, min(rounds, repeats))
    per = -(-repeats // rounds)
    return (f"cuBLAS and every method's kernel timed together in {rounds} interleaved rounds (the order rotates "
            f"per round); per round and kernel: one untimed, then {per} timed CUDA-graph replays, L2-cold "
            f"(rotating inputs > 2x L2); time = median of the {rounds} round medians; spread = the larger of the "
            "median within-round IQR / median and the across-round range / time"
            + (f"; eager = wall time per call over {eager_calls} back-to-back calls, once per method"
               if eager_calls else ""))


def run(shapes: Sequence[Shape], *, out_dir: str | os.PathLike = "benchmarks/results", suite: str = "public",
        groups: Sequence[str] | None = None, limit: int | None = None, repeats: int = 20,
        skip_inductor: bool = False, seed: int = 0, render: bool = True,
        tune_fn: Callable | None = None, log=None, rounds: int = ROUNDS,
        deadline: float | None = None, ceilings_file: str | os.PathLike | None = None,
        extra: Sequence[str] = (), skip_tunableop: bool = False) -> Path:
    """Benchmark ``shapes`` on the current GPU; write the bench JSON (and its report) under
    ``out_dir`` and return the JSON's path. Raises ValueError without a CUDA GPU.

    ``extra``: opt-in gemmtune modes to run as well (OPTIONAL_MODES keys, see ``extra_modes``).
    ``skip_tunableop``: leave PyTorch's TunableOp (cuBLAS/cuBLASLt algorithm tuning) out.

    ``rounds``: interleaved timing rounds per shape (``repeats`` samples per kernel in
    all). ``deadline`` (unix time; default $GEMMTUNE_BENCH_DEADLINE): no shape starts
    when the longest shape so far would end past it; the JSON notes the shapes left out.
    ``ceilings_file`` (default $GEMMTUNE_BENCH_CEILINGS): ceilings read from it when it
    holds ones measured on a GPU of this name, else measured and written to it.
    """
    if not torch.cuda.is_available():
        raise ValueError(CUDA_ERROR)
    import triton

    from . import __version__, binaries
    from .bench.runner import WorkerState
    from .device import DeviceInfo
    from .table import provenance
    from .tune import tune as gemmtune_tune

    t_run = time.perf_counter()
    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    tune_fn = tune_fn or gemmtune_tune
    if deadline is None and os.environ.get(ENV_DEADLINE):
        deadline = float(os.environ[ENV_DEADLINE])
    ceilings_file = ceilings_file or os.environ.get(ENV_CEILINGS) or None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # Every process-wide setting below (environment, torch.backends, Inductor's config, the
    # autotuning hook, TunableOp) goes back to what it was when run returns or raises.
    with ProcessSettings() as settings:
        settings.setattr(torch.backends.cuda.matmul, "allow_tf32", False)  # fp32 rows are true fp32 for every method
        scratch = Path(tempfile.mkdtemp(prefix="gemmtune-bench-"))
        # Fresh compile caches: every tuning time below includes its compilation.
        settings.setenv("TRITON_CACHE_DIR", str(scratch / "triton-bench"))
        settings.setenv("TORCHINDUCTOR_CACHE_DIR", str(scratch / "inductor"))
        dev = DeviceInfo.from_torch()
        timer = CudaGraphTimer(replays=repeats)
        header = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "device_name": dev.name,
                  "capability": dev.capability_str, "torch": torch.__version__, "triton": triton.__version__,
                  "gemmtune": __version__, "nvmmh": _version("nvidia-matmul-heuristics"),
                  "python": platform.python_version(), "suite": suite, "groups": list(groups) if groups else None,
                  "limit": limit, "repeats": repeats, "rounds": max(1, min(rounds, repeats)), "seed": seed,
                  "inductor_mode": INDUCTOR_MODE, "timer": timer_text(repeats, rounds, timer.eager_calls),
                  "modes": {}, "phases_s": {}}
        suffix = "-".join(groups or []) + (f"-first{limit}" if limit else "")
        path = out / report.bench_filename(header, suffix)
        doc = {"schema": report.SCHEMA, "source": "", "header": header, "ceilings": None, "notes": [],
               "shapes": []}

        say(f"gemmtune bench: {len(shapes)} shapes on {dev.name} -> {path}")
        t0 = time.perf_counter()
        c = load_ceilings(ceilings_file, dev.name) if ceilings_file else None
        if c is None:
            c = measure_ceilings(timer)
            if ceilings_file:
                save_ceilings(ceilings_file, dev.name, c)
        doc["ceilings"] = c
        header["phases_s"]["ceilings"] = time.perf_counter() - t0
        say("ceilings: copy {:.0f} GB/s, read {} GB/s; ".format(
            c["copy"]["gbps"], f"{c['read']['gbps']:.0f}" if (c.get("read") or {}).get("gbps") else "-")
            + ", ".join(f"{k} {v['tflops']:.0f} TFLOP/s" for k, v in c["mm"].items()))
        report.save_bench(doc, path)

        t0 = time.perf_counter()
        phase = tune_phase(shapes, tune_fn=tune_fn, scratch=scratch, seed=seed, provenance=provenance(
            dev.name, dev.capability_str, torch.__version__, triton.__version__, __version__, "nvmmh"), say=say,
            extra=extra)
        header["phases_s"]["tune"] = time.perf_counter() - t0
        doc["notes"] += phase["notes"]
        header["modes"] = phase["modes"]
        # The timing phase loads the kernels the tuning phase compiled instead of compiling them
        # again (Triton's cache is keyed by source, constants and target: a binary is only ever
        # reused for the very same kernel). Tuning times are unaffected: each mode compiled in a
        # cache of its own, from nothing; Inductor's kernels have their own sources.
        restored = 0
        for mode in phase["modes"]:
            try:
                restored += binaries.restore(scratch / f"triton-{mode}")[0]
            except Exception as e:  # only costs compile time
                doc["notes"].append(f"kernel binaries of {mode} not reused for timing: {type(e).__name__}: {e}"[:300])
        header["reused_binaries"] = restored
        report.save_bench(doc, path)

        inductor_log = None
        if skip_inductor:
            doc["notes"].append("Inductor: skipped (--skip-inductor)")
        else:
            import torch._inductor.config as icfg
            settings.setattr(icfg, "force_disable_caches", True)  # its tuning is paid in full, every shape
            inductor_log = AutotuneLog()
            settings.callback(_remove_autotune_log, inductor_log)
            if not _install_autotune_log(inductor_log):
                doc["notes"].append("Inductor's autotuning feedback hook is not available in this torch: "
                                    "its choices are read from the generated code only")
        state = WorkerState(timer=timer)
        tunableop = None
        if skip_tunableop:
            doc["notes"].append("TunableOp: skipped (--skip-tunableop)")
        else:
            try:
                tunableop = TunableOp(scratch)
                settings.callback(tunableop.close)  # torch.cuda.tunable put back, also after an exception
            except Exception as e:  # an old torch without torch.cuda.tunable
                doc["notes"].append(f"TunableOp: not available ({type(e).__name__}: {e})"[:300])
        t_measure = time.perf_counter()
        longest = 0.0
        for i, s in enumerate(shapes):
            if deadline is not None and time.time() + longest > deadline:
                left = [x.name for x in shapes[i:]]
                doc["notes"].append(f"deadline: {len(left)} of {len(shapes)} shapes not measured (the longest shape so "
                                    f"far took {longest:.0f} s and too little time was left): {', '.join(left)}")
                header["unmeasured"] = left
                say(doc["notes"][-1])
                break
            t0 = time.perf_counter()
            rec = measure_shape(s, state, c, phase["tuned"], phase["skipped"], seed=seed, inductor_log=inductor_log,
                                extra_s=phase["extra_s"], errors=phase["errors"], rounds=rounds, tunableop=tunableop)
            rec["measure_s"] = time.perf_counter() - t0
            longest = max(longest, rec["measure_s"])
            doc["shapes"].append(rec)
            header["phases_s"]["measure"] = time.perf_counter() - t_measure
            header["phases_s"]["run"] = time.perf_counter() - t_run
            report.save_bench(doc, path)
            cells = []
            for m, label in (("cublas", "cuBLAS"), *report.METHODS):
                r = rec["cublas"] if m == "cublas" else rec["methods"].get(m)
                k = report.kernel(r)
                cells.append(f"{label} {k['ms'] * 1e3:.2f}" if k else f"{label} {(r or {}).get('status', '-')}")
            say(f"{s.group:8} {s.name:24} ({rec['measure_s']:5.1f} s) " + "  ".join(cells))
        if tunableop is not None:
            tunableop.close()
        report.save_bench(doc, path)
        if render:
            written = report.render(doc, out, path.stem)
            say("report: " + ", ".join(str(p) for p in written.values()))
        return path
