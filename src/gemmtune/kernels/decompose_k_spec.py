"""decompose_k's pure part: its splits, space, constraint, launch plan and model row, no Triton.
The family is kernels.decompose_k, which re-exports these (see kernels.spec).
"""

from __future__ import annotations

import math

from ..configs import DecomposeKConfig, SplitKConfig, block_k_reason, cdiv, next_pow2, tile_constraint
from ..device import DeviceInfo
from ..problem import Problem
from .base import bmm_reason, tile_row, workspace_reason
from .splitk_spec import MAX_WORKSPACE_BYTES


NAME = "decompose_k"


CONFIG = DecomposeKConfig


MIN_PART = 128  # each k-part at least 128 long


DEFAULT_MAX_CANDIDATES = 6


# The largest split considered: a bmm of more batches than this is no GEMM anyone runs, and the
# divisor search walked every s up to K/128 (`gemmtune predict --shape 1x1x2**40` hung there).
MAX_SPLIT = 1 << 16


def candidate_splits(k: int) -> list[int]:
    """Divisors s >= 2 of K with K/s >= 128 and s <= MAX_SPLIT: powers of two first (ascending),
    then the rest.

    >>> candidate_splits(1024), len(candidate_splits(2**40)), candidate_splits(1000003)
    ([2, 4, 8], 16, [])
    """
    divs = [s for s in range(2, min(k // MIN_PART, MAX_SPLIT) + 1) if k % s == 0]
    pow2 = [s for s in divs if s & (s - 1) == 0]
    return pow2 + [s for s in divs if s & (s - 1)]


def default_splits(m: int, n: int, k: int, sms: int) -> list[int]:
    """The default space's splits: the DEFAULT_MAX_CANDIDATES of ``candidate_splits(k)`` nearest,
    in log2, to the split that gives the bmm one program per SM (output tiles x split = ``sms``;
    at least 2), ascending.

    The first six powers of two (2 to 64), the rule until session 24, leave out the split that
    fills the GPU wherever the output has few tiles. Over the H100 store with DecomposeK's
    small-M x N rows measured again (414 problems with DecomposeK rows), the old six reached 92.4%
    of the family's best measured split (geomean) and these 99.3%, never 3% slower on a problem;
    on the 34 problems where DecomposeK is the best of all choices, 80.9% and 93.5%. Over the H200
    store (797 problems, timed before DecomposeK's sum was spread): 96.6% and 98.8%, 9 problems
    more than 3% slower (benchmarks/results/2026-11-27-h100-s24/README.md, section 5).

    >>> default_splits(32, 32, 28672, 132), default_splits(4096, 4096, 8192, 132)
    ([32, 56, 64, 112, 128, 224], [2, 4, 8, 16, 32, 64])
    """
    splits = candidate_splits(k)
    if not splits:
        return []
    target = max(2.0, wave_split(m, n, k, sms))
    return sorted(sorted(splits, key=lambda s: (abs(math.log2(s / target)), s))[:DEFAULT_MAX_CANDIDATES])


def wave_split(m: int, n: int, k: int, sms: int) -> float:
    """The split that gives the bmm one program per SM: ``sms`` / its output tiles; 0 where K has
    no split (``candidate_splits``).

    >>> wave_split(32, 32, 28672, 132), wave_split(8, 8, 100, 132)
    (132.0, 0.0)
    """
    splits = candidate_splits(k)
    if not splits:
        return 0.0
    tile = tile_for(m, n, k, splits[0])  # its blocks depend on M and N only
    return sms / (cdiv(m, tile.block_m) * cdiv(n, tile.block_n))


def tile_for(m: int, n: int, k: int, split: int) -> SplitKConfig:
    """The bmm tile for one k-part: blocks near the output size, BLOCK_K within the part."""
    part = k // split
    bm = max(16, min(128, next_pow2(m)))
    bn = max(16, min(128, next_pow2(n)))
    bk = max(16, min(128 if bm * bn <= 64 * 64 else 64, next_pow2(part)))
    warps = 8 if bm * bn >= 128 * 128 else 4
    return SplitKConfig(bm, bn, bk, 3, warps, 8, split, True)


BMM_WHY = "its program axis 1 and partials buffer are the K-splits' (a bmm of bmms is not built)"


def constraint(cfg: DecomposeKConfig, problem: Problem, device: DeviceInfo) -> str | None:
    reason = bmm_reason(NAME, problem, BMM_WHY)
    if reason:
        return reason
    if cfg.split < 2:
        return f"split={cfg.split} must be >= 2"
    if problem.k % cfg.split:
        return f"split={cfg.split} does not divide K={problem.k}"
    if problem.k // cfg.split < MIN_PART:
        return f"K/split = {problem.k // cfg.split} is shorter than {MIN_PART}"
    ws = 4 * problem.m * problem.n * cfg.split
    if ws > MAX_WORKSPACE_BYTES:
        return f"fp32 partials of {ws} B exceed {MAX_WORKSPACE_BYTES} B"
    return tile_constraint(tile_for(problem.m, problem.n, problem.k, cfg.split), problem, device)


def space(problem: Problem, device: DeviceInfo, kind: str = "default"):
    if kind == "default":
        splits = default_splits(problem.m, problem.n, problem.k, device.sm_count)
    else:
        splits = candidate_splits(problem.k)
    kept, rejected = [], []
    for s in splits:
        cfg = DecomposeKConfig(s)
        reason = constraint(cfg, problem, device)
        (kept.append(cfg) if reason is None else rejected.append((cfg, reason)))
    if not splits:
        # No split to try at all (K prime, or shorter than two parts): say so through the smallest
        # split, whose own constraint names the cause, rather than list nothing (`gemmtune space`
        # showed an empty family with no reason).
        # A bmm is refused for what it is, whatever its K, in the words every family that serves
        # no bmm uses (bmm_reason): "K=127 has no divisor split (... does not serve bmm ...)" led
        # with the K while a K with splits gave the bmm reason alone.
        cfg = DecomposeKConfig(2)
        reason = constraint(cfg, problem, device) or ""
        rejected.append((cfg, bmm_reason(NAME, problem, BMM_WHY)
                         or f"K={problem.k} has no divisor split s >= 2 with K/s >= {MIN_PART}"
                         + (f" ({reason})" if reason else "")))
    return kept, rejected


def validate(problem: Problem, cfg: DecomposeKConfig) -> None:
    reason = bmm_reason(NAME, problem, BMM_WHY)
    if reason:
        raise ValueError(reason)
    if cfg.split < 1:
        raise ValueError(f"decompose_k split={cfg.split} must be >= 1")
    if problem.k % cfg.split:
        raise ValueError(f"decompose_k split={cfg.split} does not divide K={problem.k}")
    reason = workspace_reason(NAME, cfg.split * problem.m * problem.n, f"partials [{cfg.split}, M, N]")
    if reason:
        raise ValueError(reason)
    # fp8: the parts' tile (tile_for) follows the rule the space prunes by, BLOCK_K >= 32.
    reason = block_k_reason(tile_for(problem.m, problem.n, problem.k, cfg.split).block_k, problem)
    if reason:
        raise ValueError(f"decompose_k split={cfg.split} leaves K/split = {problem.k // cfg.split} per part, "
                         f"its tile's {reason}")


def plan(m: int, n: int, k: int, cfg: DecomposeKConfig, sms: int | None = None) -> dict:
    """The bmm launch: one program per (output tile, k-part), fp32 partials [split, M, N]
    (then one sum kernel). ``tile``: the bmm's tile (``tile_for``)."""
    tile = tile_for(m, n, k, cfg.split)
    tiles = -(-m // tile.block_m) * -(-n // tile.block_n)
    return {"grid": (tiles, cfg.split), "tiles": tiles, "splits": cfg.split, "k_per_split": k // cfg.split,
            "workspace_bytes": 4 * cfg.split * m * n, "tile": tile}


def features_row(facts: tuple, choice) -> tuple:
    p = plan(*facts[:3], choice.config)
    # k_len at least 1: a split larger than K (never kept by the space) still gives a row.
    return tile_row(facts, choice, p["tile"], splits=choice.config.split, det=1, k_len=max(1, p["k_per_split"]))
