"""CUDA-graph modes of bench-model: a phase's call captured once and timed by replaying it.

Why: every decode step of these models is bound by host (Python) time when run call by call
(Llama-3.2-1B's decode step took 11-18 ms on the H200, its GPU work well under 1 ms), so the
plain modes measure Python overhead and never what faster GEMM kernels give. Production decode
loops replay CUDA graphs; a replayed step's time is the GPU's time. Each ``<mode>_graph`` mode
is the model object of ``<mode>`` (the same patched or compiled model: Inductor's autotuning
runs once for both), with each phase's call captured into a ``torch.cuda.CUDAGraph``.

Capture rules, and why:
- Warm-up calls come first, on a side stream: torch.compile compiles there, and gemmtune's
  dispatchers decide and verify each shape (which synchronises) and the patched layers choose
  their eager path on the first eager calls; none of that may happen inside a capture.
- A decode step reads the KV cache that the prompt filled, and crops its own token off after
  the step (phases.causal_phase), so the cache the capture reads is replaced by views of the
  captured step's output; the tensors the capture read are kept alive with the graph
  (``tensors_of``), so that no later allocation reuses their memory under a replay.
- The replayed output is checked against the output of the same call run without a graph
  (``replay_rel_err``): the same kernels on the same inputs, so they agree up to the order of
  atomic split-K reductions.
"""

from __future__ import annotations

import time
from typing import Callable

import torch

from .phases import rel_err

GRAPH_SUFFIX = "_graph"
# Relative Frobenius error allowed between a replay and the same call un-graphed, by output dtype.
# The kernels are the same, but a reduction whose order changes from call to call (an atomic
# split-K, some library kernels) can flip an output's last rounding, and a model carries that
# through its layers: one bf16 rounding step is 3.9e-3 relative (MiniLM's plain eager graph
# differed from its un-graphed call by exactly that on the H200), so a few steps are allowed.
REPLAY_TOL = {torch.bfloat16: 2e-2, torch.float16: 4e-3, torch.float32: 1e-4}


def is_graph(mode: str) -> bool:
    return mode.endswith(GRAPH_SUFFIX)


def base_mode(mode: str) -> str:
    """The mode whose model object a graph mode replays (itself for a plain mode)."""
    return mode[: -len(GRAPH_SUFFIX)] if is_graph(mode) else mode


def tensors_of(obj, depth: int = 6) -> list[torch.Tensor]:
    """Every tensor reachable from ``obj`` through attributes, lists, tuples and dicts (a KV
    cache object's layers, whatever the transformers version names them), ``depth`` levels
    down."""
    out: list[torch.Tensor] = []
    seen: set[int] = set()

    def walk(x, d):
        if isinstance(x, torch.Tensor):
            out.append(x)
            return
        if d <= 0 or id(x) in seen or isinstance(x, (str, bytes, int, float, bool, type(None))):
            return
        seen.add(id(x))
        if isinstance(x, dict):
            for v in x.values():
                walk(v, d - 1)
        elif isinstance(x, (list, tuple, set)):
            for v in x:
                walk(v, d - 1)
        elif hasattr(x, "__dict__") and not isinstance(x, torch.nn.Module):
            for v in vars(x).values():
                walk(v, d - 1)
    walk(obj, depth)
    return out


def capture(fn: Callable[[], torch.Tensor], *, keep=None, warmup: int = 3) -> tuple[Callable[[], torch.Tensor], dict]:
    """(``replay``, info): ``fn()`` captured into a CUDA graph after ``warmup`` calls on a side
    stream; ``replay()`` replays it and returns the captured output tensor. ``keep``: what the
    call reads besides its closure (a decode step's cache), or a callable returning it after the
    warm-up, kept alive with the graph. info: warm-up seconds (a compiled model's first call
    compiles there), capture seconds, ``replay_rel_err`` against the un-graphed output,
    ``replay_ok``."""
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA graphs need a CUDA device")
    t_warm = time.perf_counter()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(max(1, warmup)):
            ref = fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    warmup_s = time.perf_counter() - t_warm  # torch.compile's compile and autotuning happen here
    ref = ref.detach().clone()
    if callable(keep):  # read after the warm-up: a decode step's cache exists from its first call
        keep = keep()
    alive = tensors_of(keep) if keep is not None else []
    graph = torch.cuda.CUDAGraph()
    t0 = time.perf_counter()
    with torch.cuda.graph(graph):
        out = fn()
    torch.cuda.synchronize()
    capture_s = time.perf_counter() - t0
    graph.replay()
    torch.cuda.synchronize()
    err = rel_err(out.float(), ref.float())

    def replay() -> torch.Tensor:
        graph.replay()
        return out
    replay.keep_alive = (graph, alive, out)  # type: ignore[attr-defined]
    tol = REPLAY_TOL.get(out.dtype, 1e-4)
    return replay, {"warmup_s": warmup_s, "capture_s": capture_s, "replay_rel_err": err,
                    "replay_tol": tol, "replay_ok": err <= tol}


__all__ = ["GRAPH_SUFFIX", "REPLAY_TOL", "is_graph", "base_mode", "tensors_of", "capture"]
