"""persistent_tma's pure part: its configs, space, constraint (TMA's rules), launch plan and
model row, no Triton imported. The family is kernels.persistent, which re-exports these (see
kernels.spec).
"""

from __future__ import annotations

import functools
import importlib.util
import os

from ..configs import PersistentConfig, cdiv, check_block_k, check_block_sizes, fp8_tile, prune, scale_tile, tile_constraint
from ..device import DeviceInfo
from ..problem import Problem, element_size
from .base import bmm_reason, tile_row


@functools.cache
def tensor_descriptors() -> str | None:
    """None when the installed triton has host tensor descriptors (triton >= 3.3's
    ``triton.tools.tensor_descriptor``), else why not. Read from the installed files when triton is
    not imported yet, so that planning does not import it (0.3 s on the 2-core CPU machine)."""
    import sys

    if "triton" in sys.modules:
        try:
            from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: F401
            return None
        except ImportError:
            pass
    else:
        spec = importlib.util.find_spec("triton")
        if spec is not None and any(os.path.isfile(os.path.join(d, "tools", "tensor_descriptor.py"))
                                    for d in spec.submodule_search_locations or ()):
            return None
    from importlib.metadata import version
    return f"triton {version('triton')} has no host tensor descriptors (triton.tools.tensor_descriptor)"


NAME = "persistent_tma"


CONFIG = PersistentConfig


TMA_ALIGN = 16        # bytes: base address and every leading stride (cuTensorMapEncodeTiled)


MAX_BOX = 256         # elements per box dimension (cuTensorMapEncodeTiled)


# Inductor's persistent TMA template configs for Hopper (torch/_inductor/template_heuristics,
# persistent_mm_configs): (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps), except 256x128x64 with 3
# stages instead of 4: 4 stages of 16-bit operand boxes (192 KiB) plus the TMA store's 64 KiB
# output box exceed the 227 KiB a Hopper block may use.
DEFAULT_TILES = (
    (128, 256, 64, 3, 8), (128, 128, 64, 3, 8), (128, 128, 128, 3, 8), (128, 128, 128, 3, 4),
    (128, 128, 64, 4, 8), (128, 128, 64, 5, 8), (256, 128, 64, 3, 8), (128, 128, 64, 5, 4),
)


def _layout_ok(problem_layout: str, aligned: bool, lead: int, es: int) -> bool:
    return problem_layout in ("row", "col") and aligned and (lead * es) % TMA_ALIGN == 0


def problem_reason(problem: Problem, device: DeviceInfo | None) -> str | None:
    """Why this family cannot serve ``problem`` on ``device`` at all (None when it can)."""
    reason = bmm_reason(NAME, problem, "its 2-D TMA descriptors and tile walk have no batch axis")
    if reason:
        return reason
    why = tensor_descriptors()
    if why:
        return why
    if device is not None and device.capability[0] < 9 and device.name not in ("cpu", "interpreter"):
        return (f"TMA needs compute capability 9.0 or newer; {device.name} is "
                f"{device.capability[0]}.{device.capability[1]}")
    es = element_size(problem.dtype)
    # Leading dims: a row-major [M, K] A strides K, a transposed one M; B: N or K.
    lead_a = problem.k if problem.layout_a == "row" else problem.m
    lead_b = problem.n if problem.layout_b == "row" else problem.k
    if problem.op == "scaled_mm" and (problem.layout_a, problem.layout_b) != ("row", "col"):
        # Hopper's wgmma reads 8-bit operands from shared memory K-major only, and a TMA box
        # lands in shared memory in the global layout: fp8 needs A row-major and B column-major
        # (B = W.t() of a row-major weight). The pad+ variant copies to that layout.
        return (f"fp8 on TMA needs K-major operands (A row-major, B column-major) for wgmma; A is "
                f"{problem.layout_a}, B {problem.layout_b}: the pad+ variant copies to that layout")
    for name, lay, al, lead in (("A", problem.layout_a, problem.aligned_a, lead_a),
                                ("B", problem.layout_b, problem.aligned_b, lead_b)):
        if not _layout_ok(lay, al, lead, es):
            return (f"TMA needs {name} row- or column-major with a 16-byte aligned base and leading "
                    f"stride ({name} is {lay}, leading dim {lead} x {es} B"
                    f"{'' if al else ', unaligned'}); the pad+ variant runs on aligned copies")
    return None


def constraint(cfg: PersistentConfig, problem: Problem, device: DeviceInfo) -> str | None:
    reason = problem_reason(problem, device)
    if reason:
        return reason
    if max(cfg.block_m, cfg.block_n, cfg.block_k) > MAX_BOX:
        return f"a TMA box holds at most {MAX_BOX} elements per dimension"
    if cfg.warp_spec and cfg.flatten:
        return "warp specialisation and a flattened loop are exclusive in Triton's pipeliner"
    if cfg.warp_spec and cfg.num_warps < 8:
        # Hopper's warp specialisation splits the program into a TMA producer and consumer warp
        # groups; with 4 warps triton 3.6 failed to compile it (NVGPUWarpSpecialization pass,
        # H200, 2026-11-24: every 4-warp config, 8-warp ones compiled and verified).
        return "warp specialisation needs 8 or more warps (consumer warp groups beside the producer)"
    reason = split_reason(cfg)
    if reason:
        return reason
    # The TMA store stages the output tile (or one column slice of it, epi_split) in shared
    # memory beside the operand ring.
    reason = tile_constraint(cfg.tile, problem, device)
    if reason:
        return reason
    out_smem = cfg.block_m * cfg.block_n * element_size(problem.out_dtype) // cfg.epi_split
    need = cfg.num_stages * (cfg.block_m + cfg.block_n) * cfg.block_k * element_size(problem.dtype) + out_smem
    if need > device.smem_per_block:
        return (f"shared memory {need} B ({cfg.num_stages} stages of operand boxes + the {out_smem} B "
                f"output box of the TMA store) exceeds {device.smem_per_block} B per block")
    return None


EPI_SPLITS = (1, 2, 4)


def split_reason(cfg: PersistentConfig) -> str | None:
    """Why ``cfg.epi_split`` cannot slice its tile (None when it can)."""
    if cfg.epi_split not in EPI_SPLITS:
        return f"epi_split={cfg.epi_split} must be one of {EPI_SPLITS}"
    if cfg.block_n // cfg.epi_split < 16:
        # A TMA box row must be at least 16 bytes, and tl.dot's tiles are at least 16 wide.
        return f"epi_split={cfg.epi_split} leaves column slices of {cfg.block_n // cfg.epi_split} < 16"
    return None


def default_configs(elem_bytes: int = 2) -> list[PersistentConfig]:
    """DEFAULT_TILES, each plain and with the tile and K loops flattened (on the H200 the
    flattened loop was the faster of the two on 9 of 11 16-bit shapes, by up to 1.19x, and the
    best config of every large one: benchmarks/results/2026-11-24-h200-persistent). 4-byte
    inputs halve BLOCK_K so that the operand ring and the output box still fit in shared memory."""
    tiles = [(bm, bn, bk if elem_bytes <= 2 else max(16, bk // 2), s, w) for bm, bn, bk, s, w in DEFAULT_TILES]
    return [PersistentConfig(*t, flatten=f) for t in tiles for f in (False, True)]


def exhaustive_configs() -> list[PersistentConfig]:
    """Tiles 64..256 x 64..256 x 32..128, 2..5 stages, 4/8 warps, each plain, warp-specialised
    and flattened."""
    out = []
    for bm in (64, 128, 256):
        for bn in (64, 128, 256):
            for bk in (32, 64, 128):
                for s in (2, 3, 4, 5):
                    for w in (4, 8):
                        for ws, fl in ((False, False), (True, False), (False, True)):
                            out.append(PersistentConfig(bm, bn, bk, s, w, 8, ws, fl))
    return out


def space(problem: Problem, device: DeviceInfo, kind: str = "default"):
    """(kept, rejected) configs: Inductor's persistent TMA tiles (default) or the exhaustive
    product, shrunk to small problems and pruned by ``device`` and TMA's rules."""
    base = default_configs(element_size(problem.dtype)) if kind == "default" else exhaustive_configs()
    if kind == "default":
        base = [fp8_tile(c, problem, MAX_BOX) for c in base]  # fp8: BLOCK_K doubled (configs.fp8_tile)
    return prune([scale_tile(c, problem) for c in base], problem, device, constraint)


def validate(problem: Problem, cfg: PersistentConfig) -> None:
    reason = bmm_reason(NAME, problem, "its 2-D TMA descriptors and tile walk have no batch axis")
    if reason:
        raise ValueError(reason)
    check_block_sizes(cfg)
    check_block_k(cfg, problem)  # fp8: BLOCK_K >= 32, the rule the space prunes by
    reason = split_reason(cfg)
    if reason:
        raise ValueError(reason)
    if max(cfg.block_m, cfg.block_n, cfg.block_k) > MAX_BOX:
        raise ValueError(f"block sizes must be <= {MAX_BOX} (a TMA box dimension)")


def plan(m: int, n: int, k: int, cfg: PersistentConfig, sms: int | None = None) -> dict:
    """Tiles and programs of one launch: the single source for the launcher and the model.
    ``sms``: programs at most (one per SM); None, one per tile."""
    tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
    programs = max(1, tiles if sms is None else min(sms, tiles))
    return {"grid": (programs,), "tiles": tiles, "splits": 1, "k_per_split": k, "workspace_bytes": 0,
            "programs": programs, "k_tiles": cdiv(k, cfg.block_k)}


def features_row(facts: tuple, choice) -> tuple:
    return tile_row(facts, choice, choice.config)
