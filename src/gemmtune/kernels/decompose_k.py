"""decompose_k: mm as a bmm over k-splits with an fp32 output, then a sum.

a[M, K] @ b[K, N] = sum_s a[:, s*L:(s+1)*L] @ b[s*L:(s+1)*L, :] with L = K / split.
The batched product runs as one launch of the tiled kernel with the split on its
second program axis, writing fp32 partials [split, M, N]; a second kernel sums
them in fixed order and casts. The split is the family's only parameter: the
tile is derived from the shape (``tile_for``), so the choice id is stable
(``decompose_k:s16``) and means the same thing on every GPU.
"""

from __future__ import annotations

import torch

from ..problem import Problem
from ..configs import DecomposeKConfig
from ..epilogue import EpilogueArgs
from .base import Unsupported
from .launch_args import epilogue_key, epilogue_pointers, layout_key
from .tiled import launch_sum_splits, launch_tiled, prepare_direct, prepare_sum_splits
# The family's pure part (configs, space, constraint, launch plan, model row): kept in decompose_k_spec so that
# planning imports no Triton (kernels.spec); the family's names as before.
from .decompose_k_spec import (  # noqa: F401
    BMM_WHY, CONFIG, DEFAULT_MAX_CANDIDATES, MIN_PART, NAME, candidate_splits, constraint,
    default_splits, features_row, plan, space, tile_for, validate)

INDUCTOR_TEMPLATE = "decompose_k"  # Inductor's decompose_k: the same bmm + sum, k_split ways


def _bmm_kwargs(M: int, N: int, K: int, cfg: DecomposeKConfig, allow_tf32: bool) -> dict:
    """The tiled kernel's keywords for the bmm into partials [split, M, N] (contiguous)."""
    tile = plan(M, N, K, cfg)["tile"]
    return dict(block_m=tile.block_m, block_n=tile.block_n, block_k=tile.block_k, group_m=tile.group_m,
                num_stages=tile.num_stages, num_warps=tile.num_warps, k_per_split=K // cfg.split,
                split_mode=0, stride_cz=M * N, allow_tf32=allow_tf32)


def run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: DecomposeKConfig, *,
        allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None) -> None:
    """The bmm into fp32 partials, then their sum; the ``epilogue`` runs in the sum kernel
    (a partial plus a bias, activated, would be wrong: act(p0 + p1 + b) != sum of act(p_s + b))."""
    M, K = a.shape
    N = b.shape[1]
    partials = torch.empty((cfg.split, M, N), dtype=torch.float32, device=a.device)
    launch_tiled(a, b, partials, **_bmm_kwargs(M, N, K, cfg, allow_tf32))
    launch_sum_splits(partials, out, epilogue=epilogue)


def prepare(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: DecomposeKConfig, *,
            allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None):
    """Run once into ``out`` and return ``(matches(a, b), launch(a, b, out))``, both taking the
    ``epilogue`` as a keyword, for repeated calls at this problem: both kernels relaunched
    compiled (``tiled.prepare_direct``, ``tiled.prepare_sum_splits``), a fresh partials buffer
    per call as ``run`` has; or None in the interpreter. An eager call through the generic path
    cost 108 us against cuBLAS's 52 on 1x4096x14336 bf16 (H100, session 23), two ordinary Triton
    launches' binding; ``out`` must keep the strides and alignment of this one (the
    dispatcher's outputs are fresh and contiguous)."""
    if a.dim() != 2:
        return None
    M, K = a.shape
    N = b.shape[1]
    shape, dev = (cfg.split, M, N), a.device
    partials = torch.empty(shape, dtype=torch.float32, device=dev)
    bmm = prepare_direct(a, b, partials, **_bmm_kwargs(M, N, K, cfg, allow_tf32))
    total = None if bmm is None else prepare_sum_splits(partials, out, epilogue)
    if total is None:
        return None
    key, out_key = epilogue_key(epilogue), layout_key(out)
    empty, f32 = torch.empty, torch.float32

    def matches(a, b, epilogue=None):
        return bmm.matches(a, b) and epilogue_key(epilogue) == key

    def launch(a, b, c, epilogue=None):
        if layout_key(c) != out_key:  # an output of another layout: the ordinary way
            run(a, b, c, cfg, allow_tf32=allow_tf32, epilogue=epilogue)
            return
        p = empty(shape, dtype=f32, device=dev)
        bmm(a, b, p)
        total(p, c, *epilogue_pointers(epilogue, c))
    return matches, launch


def inductor_export(choice, problem: Problem, sm_count: int | None = None) -> dict:
    if problem.op == "addmm":
        raise Unsupported("decompose_k for addmm: Inductor's tuned_addmm offers no decompose_k template")
    if problem.op == "scaled_mm":
        raise Unsupported("decompose_k for scaled_mm: Inductor's tuned_scaled_mm offers no decompose_k template")
    return {"template_id": INDUCTOR_TEMPLATE, "k_split": choice.config.split}
