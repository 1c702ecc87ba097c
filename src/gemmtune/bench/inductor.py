"""torch.compile max-autotune as a peer: compile one mm, read the kernel Inductor chose from its
generated code and its autotuning from select_algorithm's feedback hook, check its output."""

from __future__ import annotations

import math
import re
import time
from collections import deque
from typing import Callable, Sequence

import torch

from ..problem import Problem
from .records import failure_record

INDUCTOR_MODE = "max-autotune-no-cudagraphs"
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


def held_launch(fn: Callable, inputs: Sequence[tuple]) -> Callable[[int], None]:
    """``launch(i)``: ``fn(*inputs[i])``, its output kept alive until ``len(inputs)`` more calls
    have run, so that a function which allocates its output writes a distinct buffer per input set,
    as cuBLAS and gemmtune's kernels do (each writes ``outs[i]``).

    Why: a compiled function allocates its output on every call. Dropped at once, the caching
    allocator hands the same block back on the next call, also inside the timer's CUDA-graph
    capture, so every launch wrote one output that stayed in L2 while the other methods wrote
    rotating outputs that go back to DRAM. On an H100 that was 10 of the 15.5 points between
    Inductor's template and ours at 1024^3 (benchmarks/results/2026-11-25-parity-ir), and it
    flattered Inductor most where the output is the traffic (a 2048x4096 output with K = 16).

    >>> import weakref
    >>> launch = held_launch(lambda a: a + 1, [(torch.zeros(2),), (torch.ones(2),)])
    >>> launch(0); first = weakref.ref(launch.held[0]); launch(1); first() is not None
    True
    >>> launch(0); first() is None, len(launch.held)
    (True, 2)
    """
    held: deque = deque(maxlen=max(len(inputs), 1))

    def launch(i: int) -> None:
        held.append(fn(*inputs[i]))

    launch.held = held
    return launch


def compile_inductor(problem: Problem, state, log: AutotuneLog) -> tuple[dict, Callable[[int], object] | None]:
    """torch.compile max-autotune of one mm on the state's inputs: its tuning (the first call's
    wall time), the kernel it chose and the check of its output against the fp64 reference.

    Returns (record, launch): ``launch(i)`` runs the compiled function on input set ``i``
    when the output checked out, for the caller to time; None otherwise (the record says
    why). The caller calls torch._dynamo.reset() once it is done with ``launch``.
    """
    from torch._inductor.utils import run_and_get_code

    from ..verify import compare, tolerance

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
        return {"status": "ok", **rec}, held_launch(f, state.inputs)
    except Exception as e:  # a failed compile is a result too
        return failure_record(e), None
