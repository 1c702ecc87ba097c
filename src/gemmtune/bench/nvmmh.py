"""nvMatmulHeuristics (nvidia-matmul-heuristics) as a peer: its top-k configs for a problem,
as gemmtune's Triton choices (run through gemmtune's kernels)."""

from __future__ import annotations

import inspect
import re

from ..configs import Choice, SplitKConfig, TileConfig
from ..problem import Problem

_NVMMH_TYPE = {"bfloat16": "T", "float16": "H", "float32": "S"}


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
