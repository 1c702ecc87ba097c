"""triton_mm: the tiled Triton matmul (grouped tile order, ragged-edge masks, an
EVEN_K fast path, fp32 accumulation) and its config space.

It serves bmm too: 3-D operands launch the same kernel with the batch on program axis 2
(kernels.tiled, BATCHED), each operand at its own batch stride (0: broadcast). A bmm's space
is mm's for one of its matrices (the grid has ``batch`` times the tiles; the tuner measures
whether smaller tiles pay there); ``plan`` is per matrix, ``grid`` gains the batch axis."""

from __future__ import annotations

import torch

from ..problem import Problem
from ..configs import (TileConfig)
from ..epilogue import EpilogueArgs
from . import tiled
from .tiled import launch_tiled, prepare_direct, tile_kwargs
# The family's pure part (configs, space, constraint, launch plan, model row): kept in triton_mm_spec so that
# planning imports no Triton (kernels.spec); the family's names as before.
from .triton_mm_spec import (  # noqa: F401
    NAME, CONFIG, constraint, features_row, plan, raw_configs, scaled, space, validate)

INDUCTOR_TEMPLATE = "triton::mm"  # Inductor's own mm template, which takes our tile


def run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: TileConfig, *,
        allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None):
    """Launch into ``out`` (3-D operands and ``out``: a bmm, in launches of at most
    tiled.MAX_GRID_Z matrices); returns what Triton's launch returns (the compiled kernel on a GPU)."""
    kw = tile_kwargs(cfg, allow_tf32)
    if a.dim() == 3 and out.shape[0] > tiled.MAX_GRID_Z:
        kernel = None
        for a_, b_, c_ in tiled.batch_chunks(a, b, out):
            kernel = launch_tiled(a_, b_, c_, k_per_split=a.shape[-1], epilogue=epilogue, **kw)
        return kernel
    return launch_tiled(a, b, out, k_per_split=a.shape[-1], epilogue=epilogue, **kw)


def prepare(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: TileConfig, *,
            allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None):
    """Launch once into ``out`` and return ``(matches(a, b), launch(a, b, out))`` for cheap
    repeated launches at this problem (kernels.tiled.prepare_direct), or None. With an
    ``epilogue`` both take it as a keyword: ``matches(a, b, epilogue=e)``, ``launch(a, b, out,
    epilogue=e)``."""
    d = prepare_direct(a, b, out, k_per_split=a.shape[-1], epilogue=epilogue, **tile_kwargs(cfg, allow_tf32))
    return None if d is None else (d.matches, d)


INDUCTOR_BMM_TEMPLATE = "triton::bmm"  # Inductor's bmm template (kernel/bmm.py), same tile options


# Inductor's scaled-mm heuristic for triton::mm (torch 2.13 template_heuristics/triton.py,
# CUDAScaledMMTemplateConfigHeuristic / ScaledMMConfigMixin) keeps BLOCK_K >= 32 only and
# yields no config at all for K <= 16, where a lookup hit then drops the template.
SCALED_MIN_BLOCK_K = 32
SCALED_MAX_SMALL_K = 16


def inductor_export(choice, problem: Problem, sm_count: int | None = None) -> dict:
    from .base import Unsupported

    cfg = choice.config
    if problem.op == "scaled_mm":
        # tuned_scaled_mm offers Inductor's own mm template (triton::mm) with a scaling epilogue
        # (scale_mm_epilogue, the bias added there too) for tensor- and row-wise scales: the
        # same template and kwargs as mm; the epilogue comes with Inductor's extra kwargs.
        if problem.k <= SCALED_MAX_SMALL_K:
            raise Unsupported(f"triton_mm for scaled_mm with K = {problem.k} <= {SCALED_MAX_SMALL_K}: "
                              "Inductor's scaled triton::mm heuristic gives no config there "
                              "(ScaledMMConfigMixin._valid), and a lookup hit then drops the template")
        if cfg.block_k < SCALED_MIN_BLOCK_K:
            raise Unsupported(f"triton_mm for scaled_mm with BLOCK_K = {cfg.block_k} < {SCALED_MIN_BLOCK_K}: "
                              "Inductor's scaled triton::mm configs all have BLOCK_K >= 32 (fp8 tl.dot)")
    template = INDUCTOR_BMM_TEMPLATE if problem.op == "bmm" else INDUCTOR_TEMPLATE
    return {"template_id": template, "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n,
            "BLOCK_K": cfg.block_k, "GROUP_M": cfg.group_m, "num_stages": cfg.num_stages,
            "num_warps": cfg.num_warps,
            # torch 2.13 merges this over the kwargs of its own first config, whose
            # EVEN_K belongs to that config's BLOCK_K: ours must be stated.
            "EVEN_K": problem.k % cfg.block_k == 0,
            # torch 2.11 renders the template with this config alone and failed on
            # the H200 with "'USE_FAST_ACCUM' is undefined": give the whole option
            # set Inductor's mm heuristics build (fp32 accumulation, no fast accum).
            "USE_FAST_ACCUM": False, "ACC_TYPE": "tl.float32",
            # Inductor's bmm template reads ALLOW_TF32 in its tl.dot; exported problems are never tf32.
            **({"ALLOW_TF32": False} if problem.op == "bmm" else {})}
