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

No ``pad+`` variants (a padded problem is aligned: its space is empty there), no bmm, no
split-K. On a dispatcher's unseen shape it would compile again, so a hint of this family
serves only the exact problem it was tuned on (``PER_SHAPE``).
"""

from __future__ import annotations

import torch

from ..configs import TileConfig, check_block_sizes
from ..device import DeviceInfo
from ..epilogue import EpilogueArgs
from ..problem import Problem
from . import triton_mm
from .base import tile_row
from .tiled import launch_tiled, prepare_direct, tile_kwargs

NAME = "triton_static"
CONFIG = TileConfig
PER_SHAPE = True  # sizes are compiled in: a choice serves one (M, N, K) only
ALIGNED_REASON = ("triton_static serves only problems with an operand that is not 16-byte aligned "
                  "(elsewhere it measured within 3% of triton_mm and compiles once per shape)")


BMM_REASON = "triton_static does not serve bmm: triton_mm's batched kernel does"


def applies(problem: Problem) -> str | None:
    """Why this family does not serve ``problem`` (None: it does)."""
    if problem.op == "bmm":
        return BMM_REASON
    if problem.op == "scaled_mm":
        return "triton_static does not serve scaled_mm: fp8 operands must be aligned and K-major"
    if problem.aligned_a and problem.aligned_b:
        return ALIGNED_REASON
    return None


def space(problem: Problem, device: DeviceInfo, kind: str = "default"):
    """triton_mm's configs for ``problem`` where an operand is unaligned, else none (every
    config rejected with the reason)."""
    kept, rejected = triton_mm.space(problem, device, kind)
    why = applies(problem)
    if why is not None:
        return [], rejected + [(c, why) for c in kept]
    return kept, rejected


def validate(problem: Problem, cfg: TileConfig) -> None:
    check_block_sizes(cfg)
    if problem.op in ("bmm", "scaled_mm"):
        raise ValueError(applies(problem))


def plan(m: int, n: int, k: int, cfg: TileConfig, sms: int | None = None) -> dict:
    return triton_mm.plan(m, n, k, cfg, sms)


def run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: TileConfig, *,
        allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None):
    if a.dim() != 2:
        raise ValueError(BMM_REASON)
    return launch_tiled(a, b, out, k_per_split=a.shape[1], epilogue=epilogue, static=True,
                        **tile_kwargs(cfg, allow_tf32))


def prepare(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: TileConfig, *,
            allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None):
    """As triton_mm.prepare; the launch also checks the shapes (they are compiled in)."""
    if a.dim() != 2:
        return None
    d = prepare_direct(a, b, out, k_per_split=a.shape[1], epilogue=epilogue, static=True,
                       **tile_kwargs(cfg, allow_tf32))
    return None if d is None else (d.matches, d)


def constraint(cfg: TileConfig, problem: Problem, device: DeviceInfo) -> str | None:
    return applies(problem) or triton_mm.constraint(cfg, problem, device)


def features_row(facts: tuple, choice) -> tuple:
    return tile_row(facts, choice, choice.config)


def inductor_export(choice, problem: Problem, sm_count: int | None = None) -> dict:
    """Inductor's mm template compiles every problem with its sizes baked in: a triton_static
    config is its triton::mm entry, exactly as triton_mm's."""
    return triton_mm.inductor_export(choice, problem, sm_count)
