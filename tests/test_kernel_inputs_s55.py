"""Kernel families on degenerate and unusual operands (session 55's bug hunt of the run paths).

The split-K, skinny and decompose_k kernels index their fp32 scratch in int32 whatever INDEX_64
says (kernels.base.workspace_reason): an explicit choice whose workspace passes 2**31 elements must
be refused by the family's ``validate`` before anything is launched. Checked on the planning logic
alone (meta tensors, nothing of that size allocated); the small cases run in the interpreter.
"""

from __future__ import annotations

import pytest
import torch

import gemmtune
from gemmtune import kernels
from gemmtune.configs import Choice, DecomposeKConfig, SkinnyConfig, SplitKConfig
from gemmtune.problem import Problem


@pytest.mark.parametrize("family,cfg,sizes", [
    # 128 x 128 tiles of 128x128, 16 deterministic slices: 2**32 partials
    ("splitk", SplitKConfig(128, 128, 64, 3, 8, 8, 16, True), (16384, 16384, 8192)),
    # the atomic mode's one plane of 2**32 (tiles x BM x BN)
    ("splitk", SplitKConfig(128, 128, 64, 3, 8, 8, 16, False), (65536, 65536, 8192)),
    # 64 rows x 2**22 columns in 64-wide strips, 16 deterministic slices
    ("skinny", SkinnyConfig(64, 64, 64, 16, 1, 4, True, True), (64, 2**22, 4096)),
    # partials [4, 32768, 32768]
    ("decompose_k", DecomposeKConfig(4), (32768, 32768, 4096)),
])
def test_a_workspace_past_int32_is_refused_before_launch(family, cfg, sizes):
    m, n, k = sizes
    problem = Problem.from_sizes(m, n, k, "float16")
    # before: validate passed, and the launch wrapped its workspace offsets (wrong results or an
    # illegal address on a GPU); a dispatcher's first sight (its _runnable) took the choice too
    with pytest.raises(ValueError, match="int32"):
        kernels.validate_choice(Choice(family, cfg), problem)
    # gemmtune.matmul says so on its own check (meta operands: nothing allocated; before, it got as
    # far as refusing the meta device)
    a = torch.empty(m, k, device="meta", dtype=torch.float16)
    b = torch.empty(k, n, device="meta", dtype=torch.float16)
    with pytest.raises(ValueError, match="int32"):
        gemmtune.matmul(a, b, choice=Choice(family, cfg))


def test_decompose_k_keeps_partials_of_exactly_2_to_the_31():
    problem = Problem.from_sizes(32768, 32768, 4096, "float16")
    # [2, 32768, 32768]: 2**31 elements, the last offset 2**31 - 1 fits in int32
    kernels.validate_choice(Choice("decompose_k", DecomposeKConfig(2)), problem)
    # [2, 32768, 32769]: one column more, past it (before: taken)
    with pytest.raises(ValueError, match="int32"):
        kernels.validate_choice(Choice("decompose_k", DecomposeKConfig(2)), Problem.from_sizes(32768, 32769, 4096, "float16"))
