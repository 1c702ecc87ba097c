"""Deterministic features of (problem, choice) pairs, as numpy arrays.

Two layers:

* ``ChoiceBatch``: the raw parameters of every choice (family, blocks, stages,
  warps, GROUP_M, K split, reduction mode, pad) and the problem each one really
  runs (``pad+`` choices run the padded problem), as parallel int arrays. The
  analytic model and the features both read it; nothing here touches CUDA.
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
from dataclasses import dataclass, fields

import numpy as np

from ..configs import Choice
from ..device import DeviceInfo
from ..kernels.decompose_k import tile_for
from ..problem import Problem, element_size

FEATURE_VERSION = 1
FAMILIES = ("triton_mm", "splitk", "decompose_k", "aten")
FAMILY_CODES = {f: i for i, f in enumerate(FAMILIES)}
ATEN = FAMILY_CODES["aten"]
SPLITK = FAMILY_CODES["splitk"]
DECOMPOSE_K = FAMILY_CODES["decompose_k"]
# The skinny (decode) family came after FEATURE_VERSION 1: its code is outside the v1
# one-hot (all four family columns read 0 for it), and a learned model trained without its
# rows leaves them to the analytic estimate (LearnedModel.predict_ms) instead of guessing.
SKINNY = len(FAMILIES)
# The persistent TMA family came later still: a code of its own, outside the v1 one-hot too.
PERSISTENT = SKINNY + 1
# Codes of the families a version-1 model was never trained on (LearnedModel leaves them to
# the analytic estimate).
POST_V1 = (SKINNY, PERSISTENT)

FEATURE_NAMES: tuple[str, ...] = (
    # problem
    "log2_m", "log2_n", "log2_k", "elem_bytes", "out_elem_bytes", "fp32_ieee", "tf32",
    "a_row", "a_col", "b_row", "b_col", "aligned_a", "aligned_b",
    "log2_m_div", "log2_n_div", "log2_k_div", "log2_flops", "log2_problem_intensity",
    # choice
    "fam_triton_mm", "fam_splitk", "fam_decompose_k", "fam_aten", "pad",
    "log2_block_m", "log2_block_n", "log2_block_k", "num_stages", "num_warps", "log2_group_m",
    "log2_split", "deterministic",
    # derived
    "log2_tiles", "log2_programs", "waves", "wave_efficiency", "occupancy", "log2_k_iters",
    "tile_intensity", "smem_kb", "acc_regs", "edge_efficiency", "wgmma",
    # the analytic model's estimate and its parts (log2 of microseconds)
    "log2_analytic_us", "log2_analytic_sm_us", "log2_analytic_dram_us", "log2_analytic_extra_us",
)


@dataclass(frozen=True)
class ChoiceBatch:
    """Per-choice parameters as parallel int64 arrays (aten rows hold zeros for tiles).

    ``m, n, k`` and ``aligned_a/_b`` describe the problem the choice actually runs
    (the padded one for ``pad+``); ``split`` is the effective number of K-slices
    (1 for triton_mm and aten) and ``k_len`` the K extent one program reduces.
    """

    fam: np.ndarray
    pad: np.ndarray
    block_m: np.ndarray
    block_n: np.ndarray
    block_k: np.ndarray
    stages: np.ndarray
    warps: np.ndarray
    group_m: np.ndarray
    split: np.ndarray
    det: np.ndarray
    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    k_len: np.ndarray
    aligned_a: np.ndarray
    aligned_b: np.ndarray

    def __len__(self) -> int:
        return len(self.fam)


_FIELDS = tuple(f.name for f in fields(ChoiceBatch))


def _cdiv(a, b):
    return -(-a // b)


def _facts(p: Problem) -> tuple:
    return (p.m, p.n, p.k, p.aligned_a and p.layout_a != "strided", p.aligned_b and p.layout_b != "strided")


def _raw(facts: tuple, choice: Choice) -> tuple:
    """One row of ChoiceBatch for ``choice`` on the problem whose ``_facts`` are given."""
    m, n, k, al_a, al_b = facts
    cfg = choice.config
    fam = choice.family
    if fam == "aten":
        return (ATEN, choice.pad, 0, 0, 0, 0, 0, 0, 1, 0, m, n, k, k, al_a, al_b)
    if fam == "decompose_k":
        t = tile_for(m, n, k, cfg.split)
        return (DECOMPOSE_K, choice.pad, t.block_m, t.block_n, t.block_k, t.num_stages, t.num_warps,
                t.group_m, cfg.split, 1, m, n, k, max(1, k // cfg.split), al_a, al_b)
    if fam == "skinny":
        from ..kernels.skinny import plan
        p = plan(m, n, k, cfg)  # the launcher's own arithmetic
        return (SKINNY, choice.pad, cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_stages, cfg.num_warps, 1,
                p["splits"], int(cfg.deterministic), m, n, k, p["k_per_split"] if p["splits"] > 1 else k,
                al_a, al_b)
    if fam == "persistent_tma":
        return (PERSISTENT, choice.pad, cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_stages,
                cfg.num_warps, cfg.group_m, 1, 0, m, n, k, k, al_a, al_b)
    if fam == "splitk":
        # Same arithmetic as kernels.splitk.k_per_split / effective_splits.
        per = _cdiv(_cdiv(k, cfg.split_k), cfg.block_k) * cfg.block_k
        splits = max(1, _cdiv(k, per))
        return (SPLITK, choice.pad, cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_stages, cfg.num_warps,
                cfg.group_m, splits, int(cfg.deterministic), m, n, k, per if splits > 1 else k, al_a, al_b)
    return (FAMILY_CODES[fam], choice.pad, cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_stages,
            cfg.num_warps, cfg.group_m, 1, 0, m, n, k, k, al_a, al_b)


def batch(problem: Problem, choices) -> ChoiceBatch:
    """The ChoiceBatch of ``choices`` (Choice objects or choice id strings) on ``problem``."""
    plain, padded = _facts(problem), _facts(problem.padded())
    rows = []
    for c in choices:
        if not isinstance(c, Choice):
            c = Choice.parse(c)
        rows.append(_raw(padded if c.pad else plain, c))
    if not rows:
        return ChoiceBatch(*(np.zeros(0, dtype=np.int64) for _ in _FIELDS))
    cols = np.array(rows, dtype=np.int64).T
    return ChoiceBatch(*cols)


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
    from .analytic import AnalyticModel

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
        fam_onehot[:, 0], fam_onehot[:, 1], fam_onehot[:, 2], fam_onehot[:, 3], b.pad,
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
