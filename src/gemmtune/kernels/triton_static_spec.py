"""triton_static's pure part: where it applies, its space, constraint, launch plan and model row,
no Triton. The family is kernels.triton_static, which re-exports these (see kernels.spec).
"""

from __future__ import annotations

from ..configs import StaticConfig, TileConfig, check_block_sizes, tile_of
from ..device import DeviceInfo
from ..problem import Problem
from . import triton_mm_spec as triton_mm
from .base import tile_row
from .launch_args import edge_masks


NAME = "triton_static"


CONFIG = StaticConfig


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
    """triton_mm's configs for ``problem``, in the carried form (the other forms are timed
    beside a pick: tuning.plan.static_forms), where an operand is unaligned; else none (every
    config rejected with the reason)."""
    kept, rejected = triton_mm.space(problem, device, kind)
    kept = [_carried(c) for c in kept]
    rejected = [(_carried(c), why) for c, why in rejected]
    why = applies(problem)
    if why is not None:
        return [], rejected + [(c, why) for c in kept]
    return kept, rejected


def _carried(cfg: TileConfig, form: str = "carried") -> StaticConfig:
    return StaticConfig(cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_stages, cfg.num_warps, cfg.group_m, form)


def forms(problem: Problem, cfg) -> list[StaticConfig]:
    """The forms of ``cfg``'s tile (configs.STATIC_FORMS) that compile to different loops on
    ``problem``: indexed always (the K loop); indexed_wrap only where the carried form masks an
    odd N of at least one block along a row-major B (launch_args.edge_masks), elsewhere the
    same kernel as indexed.

    >>> p = Problem.from_sizes(333, 4097, 1025, "bf16")
    >>> [c.form for c in forms(p, TileConfig(64, 128, 64, 4, 4))]
    ['carried', 'indexed', 'indexed_wrap']
    >>> [c.form for c in forms(Problem.from_sizes(333, 4096, 1025, "bf16"), TileConfig(64, 128, 64, 4, 4))]
    ['carried', 'indexed']
    """
    t = tile_of(cfg)
    # The launch's own rule (N's mask under each edge), not a copy of it: a row-major B is the
    # N-contiguous one, and the M side is the same under both edges.
    masks = [edge_masks(problem.m, problem.n, t.block_m, t.block_n, edge, n_contiguous=problem.layout_b == "row")
             for edge in ("auto", "auto_wrap_odd")]
    wrap = masks[0] != masks[1]
    return [_carried(t, f) for f in ("carried", "indexed") + (("indexed_wrap",) if wrap else ())]


def validate(problem: Problem, cfg: StaticConfig) -> None:
    check_block_sizes(tile_of(cfg))
    if problem.op in ("bmm", "scaled_mm"):
        raise ValueError(applies(problem))


def plan(m: int, n: int, k: int, cfg: StaticConfig, sms: int | None = None) -> dict:
    return triton_mm.plan(m, n, k, tile_of(cfg), sms)


def constraint(cfg: StaticConfig, problem: Problem, device: DeviceInfo) -> str | None:
    return applies(problem) or triton_mm.constraint(tile_of(cfg), problem, device)


def features_row(facts: tuple, choice) -> tuple:
    return tile_row(facts, choice, choice.config)
