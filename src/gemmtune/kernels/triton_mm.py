"""triton_mm: the tiled Triton matmul (grouped tile order, ragged-edge masks, an
EVEN_K fast path, fp32 accumulation) and its config space."""

from __future__ import annotations

import torch

from ..device import DeviceInfo
from ..problem import Problem
from ..configs import (TileConfig, check_block_sizes, default_tiles, exhaustive_tiles, prune,
                     scale_tile, tile_constraint)
from ..epilogue import EpilogueArgs
from .tiled import launch_tiled, prepare_direct, tile_kwargs

NAME = "triton_mm"
CONFIG = TileConfig


def space(problem: Problem, device: DeviceInfo, kind: str = "default"):
    """(kept, rejected) configs for ``problem``: scaled to its sizes, pruned by ``device``."""
    base = default_tiles() if kind == "default" else exhaustive_tiles()
    return prune([scale_tile(c, problem) for c in base], problem, device)


def validate(problem: Problem, cfg: TileConfig) -> None:
    check_block_sizes(cfg)


def run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: TileConfig, *,
        allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None):
    """Launch into ``out``; returns what Triton's launch returns (the compiled kernel on a GPU)."""
    return launch_tiled(a, b, out, k_per_split=a.shape[1], epilogue=epilogue, **tile_kwargs(cfg, allow_tf32))


def prepare(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: TileConfig, *,
            allow_tf32: bool = False, workspace=None, epilogue: EpilogueArgs | None = None):
    """Launch once into ``out`` and return ``(matches(a, b), launch(a, b, out))`` for cheap
    repeated launches at this problem (kernels.tiled.prepare_direct), or None. With an
    ``epilogue`` both take it as a keyword: ``matches(a, b, epilogue=e)``, ``launch(a, b, out,
    epilogue=e)``."""
    d = prepare_direct(a, b, out, k_per_split=a.shape[1], epilogue=epilogue, **tile_kwargs(cfg, allow_tf32))
    return None if d is None else (d.matches, d)


def constraint(cfg: TileConfig, problem: Problem, device: DeviceInfo) -> str | None:
    return tile_constraint(cfg, problem, device)
