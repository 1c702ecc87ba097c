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


# ------------------------------------------------------------------ K = 1: decomposed, never looked up
def test_products_inductor_decomposes_are_skipped_with_the_reason():
    """Inductor's decompositions (torch/_inductor/decomposition.py) turn a bmm with K = 1 (on every
    device), and on the GPU an mm / addmm with K = 1 and M, N > 1, into a broadcast multiply before
    any lookup: their entries were exported (and counted) all the same, and never used. (On the CPU
    a compiled torch.bmm of K = 1 asks for no key at all.)"""
    mm = Problem.from_sizes(8, 16, 1, "bf16")
    addmm = Problem.from_sizes(8, 16, 1, "bf16", layout_b="col", op="addmm")
    bmm = Problem.from_sizes(8, 16, 1, "bf16", op="bmm", batch=3)
    row = Problem.from_sizes(1, 16, 1, "bf16")  # M = 1: not decomposed, looked up
    r = ie.convert(_table({mm: ["aten"], addmm: ["triton_mm:BM32-BN32-BK16-S2-W4-G4"],
                           bmm: ["aten"], row: ["aten"]}))
    reasons = {s.key: s.reason for s in r.skipped if s.choice is None}
    for p in (mm, addmm, bmm):
        assert "decomposes" in reasons.get(p.key, ""), (p.key, reasons)
    assert list(r.table) == ie.inductor_keys(row)


# ------------------------------------------------------------------ addmm's persistent TMA note
def test_an_addmm_persistent_tma_entry_notes_the_flag_it_needs(monkeypatch):
    """tuned_addmm offers mm_persistent_tma only with config.triton.enable_persistent_tma_matmul, as
    tuned_mm does; the export noted the flag for mm and said nothing for addmm (its notes returned
    early for addmm), so the entry was ignored without a word."""
    from torch._inductor import config as icfg

    monkeypatch.setattr(icfg.triton, "enable_persistent_tma_matmul", False)
    p = Problem.from_sizes(4096, 4096, 4096, "bf16", layout_b="col", op="addmm")
    r = ie.convert(_table({p: ["persistent_tma:BM128-BN256-BK64-S3-W8-G8"]}))
    assert r.table and any("enable_persistent_tma_matmul" in n for n in r.notes), r.notes


# ------------------------------------------------------------------ install / installed state
@NEEDS_INDUCTOR_LUT
def test_installed_gives_back_the_table_and_handler_it_found():
    """``with installed(t):`` ended in ``uninstall()``: no table and Inductor's default handler,
    whatever was there before. A table set by hand (config.lookup_table.table) or an outer
    ``installed`` block lost its table when an inner block ended."""
    from torch._inductor import config as icfg
    from torch._inductor.virtualized import V

    outer = {"((torch.bfloat16, [8, 64], [64, 1]), (torch.bfloat16, [64, 16], [16, 1]))+mm": [{"template_id": "aten::mm"}]}
    inner = {"((torch.bfloat16, [8, 32], [32, 1]), (torch.bfloat16, [32, 16], [16, 1]))+mm": [{"template_id": "aten::mm"}]}
    try:
        with ie.installed(outer):
            handler = V.choices
            with ie.installed(inner):
                assert icfg.lookup_table.table == inner
            assert icfg.lookup_table.table == outer and V.choices is handler
        assert icfg.lookup_table.table is None
        icfg.lookup_table.table = outer  # by hand
        with ie.installed(inner):
            pass
        assert icfg.lookup_table.table == outer
    finally:
        ie.uninstall()


@NEEDS_INDUCTOR_LUT
def test_install_refuses_a_device_key_it_cannot_apply():
    """``install(inductor_table, device_key=...)``: the key prefix applies to a gemmtune table being
    converted; given an exported Inductor table it was dropped without a word, and the keys stayed
    device-agnostic (or kept another device's prefix)."""
    itable = {"((torch.bfloat16, [8, 64], [64, 1]), (torch.bfloat16, [64, 16], [16, 1]))+mm": [{"template_id": "aten::mm"}]}
    try:
        with pytest.raises(ValueError, match="device_key 'gfx942'"):
            ie.install(itable, device_key="gfx942")
    finally:
        ie.uninstall()


@NEEDS_INDUCTOR_LUT
def test_install_of_a_gemmtune_table_warns_about_the_entries_it_leaves_out():
    """``install("table.json")`` converts the table and dropped what Inductor cannot express without
    a word (``lut export-inductor`` lists it): a table of split-K tiles installed an empty table, and
    torch.compile tuned as without one."""
    p = Problem.from_sizes(32, 32, 8192, "bf16")
    q = Problem.from_sizes(64, 64, 64, "bf16")
    t = _table({p: ["splitk:BM32-BN32-BK128-S4-W4-G8-SK64-atomic"], q: ["aten"]})
    try:
        with pytest.warns(TableWarning, match=r"1 of 2 entries.*" + p.key.replace("+", r"\+")):
            got = ie.install(t)
        assert list(got) == ie.inductor_keys(q)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ie.install(_table({q: ["aten"]}))  # nothing left out: no warning
    finally:
        ie.uninstall()


# ------------------------------------------------------------------ a table built in Python, not validated
def test_a_choice_the_problem_cannot_take_is_skipped_not_exported():
    """``load`` validates every choice against its problem; a LookupTable built in Python (and
    ``install(table)`` / ``convert(table)`` of it) was exported as given: ``decompose_k:s3`` for
    K = 4096 became ``k_split: 3``, which Inductor's decomposeK reshapes (M, 3, 4096 // 3), failing
    deep inside torch.compile."""
    p = Problem.from_sizes(64, 64, 4096, "bf16")
    r = ie.convert(_table({p: ["decompose_k:s3", "aten"]}))
    assert r.table[ie.inductor_key(p)] == [{"template_id": ie.ATEN_MM}]
    (s,) = [s for s in r.skipped if s.choice == "decompose_k:s3"]
    assert "not valid for this problem" in s.reason and "4096" in s.reason, s.reason


# ------------------------------------------------------------------ scaled_mm: aten with a bias and an fp32 output
def test_aten_scaled_mm_with_a_bias_and_an_fp32_output_is_not_exported():
    """Inductor's aten::_scaled_mm calls ``torch._scaled_mm(a, b, scale_a, scale_b, bias, out=buf)``,
    and CUDA's refuses a bias with a float32 output ("Bias is not supported when out_dtype is set to
    Float32", aten/src/ATen/native/cuda/Blas.cpp); gemmtune's aten adds the bias after the call
    instead. The export wrote aten::_scaled_mm for such problems: an entry of it alone is compiled
    without autotuning, and the model failed at its first call."""
    def p(out):
        return Problem.from_sizes(64, 96, 128, "e4m3", out, layout_b="col", op="scaled_mm", scale="tensor", bias=True)

    tile = "triton_mm:BM64-BN64-BK64-S3-W4-G8"
    r = ie.convert(_table({p("fp32"): ["aten", tile], p("bf16"): ["aten"]}))
    (s,) = [s for s in r.skipped if s.choice == "aten"]
    assert s.key == p("fp32").key and "float32" in s.reason.lower(), s.reason
    for key in ie.inductor_keys(p("fp32")):
        assert [c["template_id"] for c in r.table[key]] == [ie.TRITON_MM]
    for key in ie.inductor_keys(p("bf16")):
        assert r.table[key] == [{"template_id": ie.ATEN_SCALED_MM}]


@NEEDS_INDUCTOR_LUT
@pytest.mark.parametrize("source", [None, 3, ["t.json"]])
def test_install_names_what_it_takes_when_given_something_else(source):
    """``install(load_or_none("bad.json"))`` (None) raised pathlib's "expected str, bytes or
    os.PathLike object, not NoneType": neither install nor what it takes was named."""
    with pytest.raises(TypeError, match=rf"install: source must be .*not {type(source).__name__}"):
        ie.install(source)


def test_reading_a_gemmtune_table_as_an_inductor_one_says_which_it_is(tmp_path):
    """``read_inductor_table("table.json")`` of a gemmtune table said "schema_version: must be a list
    of configs, each with a string template_id": its first field, and neither kind of table named."""
    from gemmtune.table import TableError

    path = _table({Problem.from_sizes(64, 64, 64, "bf16"): ["aten"]}).save(tmp_path / "t.json")
    with pytest.raises(TableError, match="a gemmtune lookup table, not an Inductor one"):
        ie.read_inductor_table(path)
