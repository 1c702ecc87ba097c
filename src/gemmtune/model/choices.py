"""Choices as parallel arrays: what the analytic model and the features both read.

``batch(problem, choices) -> ChoiceBatch``: the raw parameters of every choice (family,
blocks, stages, warps, GROUP_M, K split, reduction mode, pad) and the problem each one
really runs (``pad+`` choices run the padded problem), as parallel int arrays. Nothing
here touches CUDA. It sits below both analytic.py (which estimates from it) and
features.py (which adds the analytic estimate to it), so neither imports the other back.

    >>> import gemmtune
    >>> b = batch(gemmtune.Problem.from_sizes(32, 32, 4096, "bf16"), ["aten", "decompose_k:s4"])
    >>> len(b), [FAMILIES[f] for f in b.fam], b.split.tolist()
    (2, ['aten', 'decompose_k'], [1, 4])
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from .. import kernels
from ..configs import Choice
from ..problem import Problem

# The family codes of ChoiceBatch.fam, in the order of features.py's family one-hot. The first
# four are FEATURE_VERSION 1's; the families that came later have codes after them (the same
# codes as before) and, from FEATURE_VERSION 2, one-hot columns of their own.
FAMILIES = ("triton_mm", "splitk", "decompose_k", "aten", "skinny", "persistent_tma", "triton_static")
FAMILY_CODES = {f: i for i, f in enumerate(FAMILIES)}
TRITON_MM = FAMILY_CODES["triton_mm"]
ATEN = FAMILY_CODES["aten"]
SPLITK = FAMILY_CODES["splitk"]
DECOMPOSE_K = FAMILY_CODES["decompose_k"]
# The skinny (decode) family came after FEATURE_VERSION 1 (all four v1 family columns read 0
# for it), the persistent TMA family later still.
SKINNY = FAMILY_CODES["skinny"]
PERSISTENT = FAMILY_CODES["persistent_tma"]
# triton_static runs triton_mm's kernel with its sizes compiled in: the same tile, so the same
# analytic estimate; a code of its own so that a learned model can tell the two apart (a model
# trained without triton_static rows scores it as triton_mm: LearnedModel).
STATIC = FAMILY_CODES["triton_static"]
# Codes of the families a model that records no per-family training rows (files older than
# domain["family_rows"]) was never trained on: LearnedModel leaves them to the analytic estimate.
POST_V1 = (SKINNY, PERSISTENT)


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


def _facts(p: Problem) -> tuple:
    # (per matrix for a bmm: the analytic model multiplies by problem.batch)
    return (p.m, p.n, p.k, p.aligned_a and p.slice_layout_a != "strided", p.aligned_b and p.slice_layout_b != "strided")


def _raw(facts: tuple, choice: Choice) -> tuple:
    """One row of ChoiceBatch for ``choice`` on the problem whose ``_facts`` are given: the
    family's code, then the family's own row (its ``features_row``, which reads its ``plan``)."""
    return (FAMILY_CODES[choice.family], *kernels.spec(choice.family).features_row(facts, choice))


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
