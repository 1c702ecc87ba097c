"""triton_static's pure part: where it applies, its space, constraint, launch plan and model row,
no Triton. The family is kernels.triton_static, which re-exports these (see kernels.spec).
"""

from __future__ import annotations

from ..configs import TileConfig, check_block_sizes
from ..device import DeviceInfo
from ..problem import Problem
from . import triton_mm_spec as triton_mm
from .base import tile_row


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


def constraint(cfg: TileConfig, problem: Problem, device: DeviceInfo) -> str | None:
    return applies(problem) or triton_mm.constraint(cfg, problem, device)


def features_row(facts: tuple, choice) -> tuple:
    return tile_row(facts, choice, choice.config)
