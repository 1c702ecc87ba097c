"""splitk's pure part: its configs, space, constraint, launch plan and model row, no Triton.
The family is kernels.splitk, which re-exports these (see kernels.spec).
"""

from __future__ import annotations

import itertools

from ..configs import SplitKConfig, cdiv, check_block_k, check_block_sizes, prune, scale_tile, scaled_configs, tile_constraint
from ..device import DeviceInfo
from ..problem import Problem
from .base import bmm_reason, tile_row, workspace_reason


NAME = "splitk"


CONFIG = SplitKConfig


DEFAULT_TILES = ((32, 32, 128, 4, 4), (32, 64, 128, 4, 4), (64, 64, 64, 4, 4),
                 (64, 128, 64, 3, 4), (128, 128, 64, 3, 8))


SPLITS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


# Past this many slices a split is kept only where this many put at most one program on an SM
# (one output tile or two) and would still leave each one a long walk (K / 128 >= LONG_SLICE).
# There, 128 programs each walk a long K-slice one dependent block after another, latency-bound.
# H100, 2026-11-27 (benchmarks/results/2026-11-27-h100-s18, section 3), best split > 128 against
# best split <= 128 in one process: 2 x 2 x 1,000,003 bf16 1.43x (42.3 -> 29.7 us; K/128 = 7813),
# 16 x 16 x 1,048,576 1.06x, 8 x 8 x 524,288 fp16 1.00x (K/128 = 4096); shorter walks lost:
# 64 x 64 x 262,144 0.94x (K/128 = 2048), 32 x 48 x 200,000 0.95x, 64 x 64 x 65,536 0.81x, 128 x 128 x
# 32,768 0.54x.
MANY_SPLITS = 128
LONG_SLICE = 4096


MIN_SLICE = 128  # shorter K-slices pay more in partial traffic than they gain in parallelism


MAX_WORKSPACE_BYTES = 256 * 2**20


def k_per_split(k: int, cfg: SplitKConfig) -> int:
    """K extent of one slice: ceil(K / split) rounded up to a whole number of BLOCK_K (one BLOCK_K
    for K = 0, whose plan is one empty slice: a slice of 0 raised ZeroDivisionError)."""
    per = cdiv(max(k, 1), cfg.split_k)
    return cdiv(per, cfg.block_k) * cfg.block_k


BMM_WHY = "its per-tile workspace and arrival counters have no batch axis"


def constraint(cfg: SplitKConfig, problem: Problem, device: DeviceInfo) -> str | None:
    reason = bmm_reason(NAME, problem, BMM_WHY)
    if reason:
        return reason
    if cfg.split_k < 2:
        return "split_k must be >= 2 (split_k=1 is triton_mm)"
    if problem.k < 2 * MIN_SLICE or cdiv(problem.k, cfg.split_k) < MIN_SLICE:
        return f"K={problem.k} split {cfg.split_k} ways leaves slices shorter than {MIN_SLICE}"
    p = plan(problem.m, problem.n, problem.k, cfg)
    ws = 4 * p["workspace_numel"]
    if ws > MAX_WORKSPACE_BYTES:
        return f"fp32 workspace of {ws} B exceeds {MAX_WORKSPACE_BYTES} B: M*N is too large for split-K"
    tiles = p["tiles"]
    if cfg.split_k > MANY_SPLITS and tiles * MANY_SPLITS > device.sm_count:
        return (f"more than {MANY_SPLITS} K-slices only where {MANY_SPLITS} put at most one program on each of "
                f"the {device.sm_count} SMs ({tiles} tiles)")
    if cfg.split_k > MANY_SPLITS and cdiv(problem.k, MANY_SPLITS) < LONG_SLICE:
        return (f"more than {MANY_SPLITS} K-slices only where {MANY_SPLITS} leave slices of at least {LONG_SLICE} "
                f"(K = {problem.k})")
    if tiles * p["splits"] > 16 * device.sm_count:
        return (f"{tiles} tiles x {cfg.split_k} splits is over 16 waves of {device.sm_count} SMs: "
                "the output alone fills the GPU")
    return tile_constraint(cfg, problem, device)


def raw_configs(kind: str = "default") -> list[SplitKConfig]:
    """The space's configs before they are scaled to a problem: the one list ``space`` and data
    collection (gemmtune.collect's samplers) draw from."""
    if kind == "default":
        return [SplitKConfig(*t, group_m=8, split_k=s, deterministic=d)
                for t, s, d in itertools.product(DEFAULT_TILES, SPLITS, (True, False))]
    return [SplitKConfig(bm, bn, bk, st, w, 8, s, d) for bm, bn, bk, st, w, s, d in itertools.product(
        (16, 32, 64, 128), (16, 32, 64, 128), (32, 64, 128, 256), (2, 3, 4, 5), (2, 4, 8), SPLITS, (True, False))]


def scaled(cfg: SplitKConfig, problem: Problem) -> SplitKConfig:
    """``cfg`` scaled to ``problem`` (configs.scale_tile), its K extent being one split's."""
    return scale_tile(cfg, problem, k_len=cdiv(problem.k, cfg.split_k))


def space(problem: Problem, device: DeviceInfo, kind: str = "default"):
    # fp8: the default configs' BLOCK_K doubled (configs.fp8_tile); each scaled over its K-slice.
    return prune(scaled_configs(raw_configs, kind, problem), problem, device, constraint)


def validate(problem: Problem, cfg: SplitKConfig) -> None:
    reason = bmm_reason(NAME, problem, BMM_WHY)
    if reason:
        raise ValueError(reason)
    check_block_sizes(cfg)
    check_block_k(cfg, problem)  # fp8: BLOCK_K >= 32, the rule the space prunes by
    if cfg.split_k < 1:
        raise ValueError(f"split_k={cfg.split_k} must be >= 1")
    reason = workspace_reason(NAME, plan(problem.m, problem.n, problem.k, cfg)["workspace_numel"], "partials")
    if reason:
        raise ValueError(reason)


def plan(m: int, n: int, k: int, cfg: SplitKConfig, sms: int | None = None) -> dict:
    """The launch ``cfg`` makes at (M, N, K): the one source the launcher, the model's
    features and data collection read. One split runs as triton_mm (no workspace).

    >>> from gemmtune.configs import SplitKConfig
    >>> p = plan(32, 32, 28672, SplitKConfig(32, 32, 128, 4, 4, 8, 16, True))
    >>> p["grid"], p["splits"], p["k_per_split"], p["workspace_numel"]
    ((1, 16), 16, 1792, 16384)
    >>> plan(200, 200, 20000, SplitKConfig(64, 64, 64, 4, 4, 8, 16, False))["workspace_numel"]  # 16 tiles of 64x64
    65536
    """
    per = k_per_split(k, cfg)
    splits = max(1, cdiv(k, per))
    tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
    if splits == 1:
        return {"grid": (tiles, 1), "tiles": tiles, "splits": 1, "k_per_split": k, "workspace_bytes": 0,
                "workspace_numel": 0}
    # fp32 partials, tile-major (one whole block per tile: tile_epilogue.split_epilogue), per
    # slice in the deterministic mode; plus one int32 counter per tile.
    numel = tiles * cfg.block_m * cfg.block_n * (splits if cfg.deterministic else 1)
    return {"grid": (tiles, splits), "tiles": tiles, "splits": splits, "k_per_split": per,
            "workspace_bytes": 4 * numel + 4 * tiles, "workspace_numel": numel}


def features_row(facts: tuple, choice) -> tuple:
    p = plan(*facts[:3], choice.config)  # the launcher's own arithmetic
    return tile_row(facts, choice, choice.config, splits=p["splits"], det=int(choice.config.deterministic),
                    k_len=p["k_per_split"])
