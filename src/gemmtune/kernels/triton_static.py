"""triton_static: the tiled Triton matmul with every size and stride compiled in as a constant.

The kernel is triton_mm's (kernels.tiled), launched through ``_tiled_mm_static``, whose M, N,
K and strides are constexprs, as Inductor's mm template bakes them in. It compiles once per
problem instead of once per alignment class, so it serves only where that pays: problems
with an operand that is not 16-byte aligned (an odd leading dimension), which is where
Inductor's template beat triton_mm with the same config. Measured on an H200 (2026-11-24,
benchmarks/results/2026-11-24-h200-parity-static; our time / Inductor's, same config):

    300x20001x512 fp16   triton_mm 1.34x   triton_static 1.09x
    333x4097x1025 bf16   1.25x             1.12x
    777x1531x2049 fp16   1.26x             1.08x
    96x50257x768 bf16    1.21x             3.81x   (slower: the tuner measures, never assumes)
    aligned 512x4096x4096, 1024^3: within +-3% of triton_mm

Its config (configs.StaticConfig) also names the K loop's form: carried, indexed, or indexed
with an odd N wrapped (configs.STATIC_FORMS says what each measured); the tuner times the other
forms beside its first tile pick (tuning.plan.static_forms).

No ``pad+`` variants (a padded problem is aligned: its space is empty there), no bmm, no
split-K. On a dispatcher's unseen shape it would compile again, so a hint of this family
serves only the exact problem it was tuned on (``PER_SHAPE``).
"""

from __future__ import annotations

import torch

from ..configs import StaticConfig, TileConfig
from ..epilogue import EpilogueArgs
from ..problem import Problem
from . import triton_mm
from .tiled import launch_tiled, prepare_direct, tile_kwargs
# The family's pure part (configs, space, constraint, launch plan, model row): kept in triton_static_spec so that
# planning imports no Triton (kernels.spec); the family's names as before.
from .triton_static_spec import (  # noqa: F401
    ALIGNED_REASON, BMM_REASON, CONFIG, NAME, PER_SHAPE, applies, constraint, features_row, forms, plan,
    space, validate)


def form_kwargs(cfg: StaticConfig) -> dict:
    """The launch keywords of ``cfg``'s form (configs.STATIC_FORMS): the K loop (``indexed_k``)
    and what becomes of an odd N along a row-major B (``edge``). A plain TileConfig is the
    carried form (as Choice reads it)."""
    form = getattr(cfg, "form", "carried")
    return {"indexed_k": form != "carried", "edge": "auto_wrap_odd" if form == "indexed_wrap" else "auto"}


def run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: StaticConfig | TileConfig, *,
        allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None):
    if a.dim() != 2:
        raise ValueError(BMM_REASON)
    return launch_tiled(a, b, out, k_per_split=a.shape[1], epilogue=epilogue, static=True,
                        **tile_kwargs(cfg, allow_tf32), **form_kwargs(cfg))


def prepare(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: StaticConfig | TileConfig, *,
            allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None):
    """As triton_mm.prepare; the launch also checks the shapes (they are compiled in)."""
    if a.dim() != 2:
        return None
    d = prepare_direct(a, b, out, k_per_split=a.shape[1], epilogue=epilogue, static=True,
                       **tile_kwargs(cfg, allow_tf32), **form_kwargs(cfg))
    return None if d is None else (d.matches, d)


def inductor_export(choice, problem: Problem, sm_count: int | None = None) -> dict:
    """Inductor's mm template compiles every problem with its sizes baked in: a triton_static
    config is its triton::mm entry, exactly as triton_mm's."""
    return triton_mm.inductor_export(choice, problem, sm_count)
