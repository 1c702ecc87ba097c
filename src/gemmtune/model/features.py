"""Deterministic features of (problem, choice) pairs, as numpy arrays.

Two layers:

* ``ChoiceBatch`` (choices.py): the raw parameters of every choice (family, blocks,
  stages, warps, GROUP_M, K split, reduction mode, pad) and the problem each one really
  runs, as parallel int arrays. The analytic model and the features both read it.
* ``featurize``: one float64 row per choice, columns named by ``FEATURE_NAMES``,
  in that order. Row ``i`` depends only on the problem, the device and choice
  ``i``, so permuting the choices permutes the rows and nothing else.

Changing, adding or reordering a feature changes what a saved learned model
means: bump ``FEATURE_VERSION`` (tests pin the names of each version).

Example::

    >>> import gemmtune
    >>> from gemmtune.device import DeviceInfo
    >>> from gemmtune.model.features import featurize, FEATURE_NAMES
    >>> p = gemmtune.Problem.from_sizes(32, 32, 28672, "bf16")
    >>> X = featurize(p, gemmtune.space(p, "splitk", device="h100"), DeviceInfo.lookup("h100"))
    >>> X.shape[1] == len(FEATURE_NAMES)
    True
"""

from __future__ import annotations

import math

import numpy as np

from ..device import DeviceInfo
from ..problem import Problem, element_size
from .analytic import AnalyticModel
from .choices import (  # noqa: F401  (re-exported: they lived here before choices.py)
    ATEN,
    DECOMPOSE_K,
    FAMILIES,
    FAMILY_CODES,
    PERSISTENT,
    POST_V1,
    SKINNY,
    SPLITK,
    STATIC,
    TRITON_MM,
    ChoiceBatch,
    batch,
)

# Version 2 (2026-11-25): "log2_tiles" and "edge_efficiency" are each choice's own tiles (version 1
# fed cuBLAS's 128x128 tile count on every Triton row, a bug of AnalyticModel.breakdown), and
# skinny, persistent_tma and triton_static have one-hot columns of their own.
FEATURE_VERSION = 2

FEATURE_NAMES: tuple[str, ...] = (
    # problem
    "log2_m", "log2_n", "log2_k", "elem_bytes", "out_elem_bytes", "fp32_ieee", "tf32",
    "a_row", "a_col", "b_row", "b_col", "aligned_a", "aligned_b",
    "log2_m_div", "log2_n_div", "log2_k_div", "log2_flops", "log2_problem_intensity",
    # choice
    "fam_triton_mm", "fam_splitk", "fam_decompose_k", "fam_aten", "fam_skinny", "fam_persistent_tma",
    "fam_triton_static", "pad",
    "log2_block_m", "log2_block_n", "log2_block_k", "num_stages", "num_warps", "log2_group_m",
    "log2_split", "deterministic",
    # derived
    "log2_tiles", "log2_programs", "waves", "wave_efficiency", "occupancy", "log2_k_iters",
    "tile_intensity", "smem_kb", "acc_regs", "edge_efficiency", "wgmma",
    # the analytic model's estimate and its parts (log2 of microseconds)
    "log2_analytic_us", "log2_analytic_sm_us", "log2_analytic_dram_us", "log2_analytic_extra_us",
)


def _pow2_div(x: int, cap: int = 16) -> int:
    d = 1
    while d < cap and x % (d * 2) == 0:
        d *= 2
    return d


def _log2(x) -> np.ndarray:
    return np.log2(np.maximum(np.asarray(x, dtype=np.float64), 1.0))


def featurize(problem: Problem, choices, device: DeviceInfo, *, analytic=None,
              choice_batch: ChoiceBatch | None = None) -> np.ndarray:
    """Feature matrix (len(choices), len(FEATURE_NAMES)), float64, deterministic.

    ``analytic`` is the AnalyticModel whose estimate becomes a feature (default:
    ``AnalyticModel(device)``).
    """
    b = choice_batch if choice_batch is not None else batch(problem, choices)
    n = len(b)
    am = analytic if analytic is not None else AnalyticModel(device)
    parts = am.breakdown(problem, b)
    es = element_size(problem.dtype)
    oes = element_size(problem.out_dtype)
    fp32_ieee = float(problem.dtype == "float32" and not problem.allow_tf32)
    prob = [
        *problem.log2_shape(), es, oes, fp32_ieee, float(problem.allow_tf32),
        problem.layout_a == "row", problem.layout_a == "col",
        problem.layout_b == "row", problem.layout_b == "col",
        problem.aligned_a, problem.aligned_b,
        math.log2(_pow2_div(problem.m)), math.log2(_pow2_div(problem.n)), math.log2(_pow2_div(problem.k)),
        math.log2(max(problem.flops, 1)), math.log2(max(problem.flops, 1) / max(problem.min_bytes, 1)),
    ]
    X = np.empty((n, len(FEATURE_NAMES)), dtype=np.float64)
    X[:, :len(prob)] = np.asarray(prob, dtype=np.float64)[None, :]
    tri = b.fam != ATEN
    fam_onehot = (b.fam[:, None] == np.arange(len(FAMILIES))[None, :]).astype(np.float64)
    us = 1e6
    cols = [
        *fam_onehot.T, b.pad,
        _log2(b.block_m), _log2(b.block_n), _log2(b.block_k), b.stages, b.warps, _log2(b.group_m),
        _log2(b.split), b.det,
        _log2(parts["tiles"]), _log2(parts["programs"]), parts["waves"], parts["wave_efficiency"],
        parts["occupancy"], _log2(parts["k_iters"]), parts["tile_intensity"], parts["smem"] / 1024.0,
        parts["acc_regs"], parts["edge_efficiency"], parts["wgmma"] * tri,
        np.log2(parts["total"] * us), np.log2(np.maximum(parts["sm"] * us, 1e-3)),
        np.log2(np.maximum(parts["dram"] * us, 1e-3)), np.log2(np.maximum(parts["extra"] * us, 1e-3)),
    ]
    X[:, len(prob):] = np.stack([np.asarray(c, dtype=np.float64) for c in cols], axis=1)
    return X
