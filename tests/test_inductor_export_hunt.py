"""Inductor-export hunt: keys Inductor never asks for, entries it never looks up, notes the export
left out, and ``install`` / ``installed`` state. Each test failed before its fix.

CPU only: Inductor's own lookup code (torch 2.13) made to run on the CPU (conftest.cpu_lookup_choices)."""

from __future__ import annotations

import warnings

import pytest
import torch
from conftest import cpu_lookup_choices

import gemmtune.inductor_export as ie
from gemmtune.configs import Choice
from gemmtune.problem import Problem
from gemmtune.table import LookupTable, TableChoice, TableWarning, provenance

NEEDS_INDUCTOR_LUT = pytest.mark.skipif(ie.unavailable_reason() is not None,
                                        reason=f"this torch cannot take a lookup table: {ie.unavailable_reason()}")
H100 = "NVIDIA H100 80GB HBM3"


def _table(entries: dict, device: str = H100) -> LookupTable:
    """``entries``: Problem -> list of choice ids."""
    return LookupTable(provenance(device, "9.0", "2.13.0", "3.6.0", "0.1.0", "by-hand"),
                       {p.key: [TableChoice(Choice.parse(c)) for c in ids] for p, ids in entries.items()})


# ------------------------------------------------------------------ addmm with N = 1: the bias's key
@NEEDS_INDUCTOR_LUT
def test_inductor_finds_the_addmm_export_of_a_linear_with_one_output(tmp_path):
    """F.linear(x, W, b) with W (1, K) (a value / reward head with a bias): tuned_addmm expands the
    bias (1,) to (M, 1) and realizes it, a contiguous buffer of strides [1, 1], where a wider bias
    is a view of strides [0, 1]. The export keyed every addmm bias [0, 1]: Inductor never found it."""
    from torch._inductor import config as icfg

    m, n, k = 8, 1, 64
    p = Problem.from_sizes(m, n, k, "bf16", layout_b="col", op="addmm")
    t = _table({p: ["triton_mm:BM32-BN32-BK64-S2-W4-G4"]}, "interpreter")
    exported = ie.export(t.save(tmp_path / "t.json"), tmp_path / "i.json")
    seen = {"keys": [], "lookups": []}
    x, w, b = (torch.randn(m, k, dtype=torch.bfloat16), torch.randn(n, k, dtype=torch.bfloat16),
               torch.randn(n, dtype=torch.bfloat16))
    old = icfg.force_disable_caches, icfg.max_autotune
    try:
        ie.install(tmp_path / "i.json", choices=cpu_lookup_choices(seen, [ie.TRITON_MM]))
        icfg.force_disable_caches, icfg.max_autotune = True, True
        torch._dynamo.reset()
        y = torch.compile(torch.nn.functional.linear)(x, w, b)
    finally:
        ie.uninstall()
        icfg.force_disable_caches, icfg.max_autotune = old
        torch._dynamo.reset()
    asked = {k for k in seen["keys"] if k and k.endswith("+addmm") and not k.startswith("cpu-test+")}
    assert asked & set(exported.table), (sorted(asked), sorted(exported.table))
    assert any(ie.TRITON_MM in found for found in seen["lookups"])
    torch.testing.assert_close(y, torch.nn.functional.linear(x, w, b))
