"""triton_mm's pure part: its configs, space, constraint, launch plan and model row, no Triton.

The family is kernels.triton_mm, which re-exports these; they live here so that planning a tune
(spaces, the ranking model's rows) imports no Triton and no kernel: kernels.spec.
"""

from __future__ import annotations

from ..configs import (TileConfig, check_block_k, check_block_sizes, default_tiles, exhaustive_tiles, fit_stages, prune,
                       scale_tile, scaled_configs, tile_constraint)
from ..device import DeviceInfo
from ..problem import Problem
from .base import tile_row


NAME = "triton_mm"


CONFIG = TileConfig


def raw_configs(kind: str = "default") -> list[TileConfig]:
    """The space's configs before they are scaled to a problem: the one list ``space`` and data
    collection (gemmtune.collect's samplers) draw from."""
    return default_tiles() if kind == "default" else exhaustive_tiles()


def scaled(cfg: TileConfig, problem: Problem) -> TileConfig:
    """``cfg`` scaled to ``problem`` (configs.scale_tile)."""
    return scale_tile(cfg, problem)


def space(problem: Problem, device: DeviceInfo, kind: str = "default"):
    """(kept, rejected) configs for ``problem``: scaled to its sizes, pruned by ``device``. fp8
    (scaled_mm): the default tiles with BLOCK_K doubled (configs.fp8_tile). A default tile that
    overflows the device's shared memory at the problem's element size (fp32) runs with fewer
    stages rather than not at all (configs.fit_stages); the exhaustive space lists every stage
    count already."""
    configs = scaled_configs(raw_configs, kind, problem)
    if kind == "default":
        configs = [fit_stages(c, problem, device.smem_per_block) for c in configs]
    return prune(configs, problem, device)


def validate(problem: Problem, cfg: TileConfig) -> None:
    check_block_sizes(cfg)
    check_block_k(cfg, problem)  # fp8: BLOCK_K >= 32, the rule the space prunes by


def plan(m: int, n: int, k: int, cfg: TileConfig, sms: int | None = None) -> dict:
    """One program per output tile, the whole K in each (kernels.tiled._tiled_args' grid)."""
    tiles = -(-m // cfg.block_m) * -(-n // cfg.block_n)
    return {"grid": (tiles, 1), "tiles": tiles, "splits": 1, "k_per_split": k, "workspace_bytes": 0}


def constraint(cfg: TileConfig, problem: Problem, device: DeviceInfo) -> str | None:
    return tile_constraint(cfg, problem, device)


def features_row(facts: tuple, choice) -> tuple:
    return tile_row(facts, choice, choice.config)
