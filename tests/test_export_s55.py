"""The Inductor export, defects of session 55's hunt: the persistent templates' NUM_SMS taken for a GPU
the table was not tuned on (a fuzzy name match, a merged table of several GPUs), and the note on
triton::mm at long K naming a search-space value torch 2.13's tuned_mm does not compare."""

from __future__ import annotations

import inspect
import re

import pytest

import gemmtune.inductor_export as ie
from gemmtune.configs import Choice
from gemmtune.problem import Problem
from gemmtune.table import MIXED_SEP, LookupTable, TableChoice, provenance

PERSISTENT = "persistent_tma:BM128-BN256-BK64-S3-W8-G8"


def _export(device_name: str, problem: Problem, cid: str) -> ie.InductorExport:
    prov = provenance(device_name, "9.0", "2.13.0", "3.6.0", "x", "by-hand")
    return ie.convert(LookupTable(prov, {problem.key: [TableChoice(Choice.parse(cid))]}))


def _num_sms(r: ie.InductorExport) -> list:
    return [c.get("NUM_SMS") for cfgs in r.table.values() for c in cfgs]


def test_num_sms_is_the_tables_gpus_and_never_guessed():
    """The table's GPU decides NUM_SMS (the persistent template's grid): a built-in GPU by its full or
    short name, or a merged table whose GPUs share one SM count, gives it. A name that is no built-in
    GPU's, or a merged table's GPUs of different SM counts, leaves the entry out, saying why: before,
    DeviceInfo.lookup's fuzzy match exported another GPU's SM count."""
    p = Problem.from_sizes(4096, 4096, 4096, "bf16", layout_b="col")
    for name in ("NVIDIA H200", "h200", " nvidia h200 ", "NVIDIA H100 80GB HBM3",
                 f"NVIDIA H200{MIXED_SEP}NVIDIA H100 80GB HBM3"):
        assert _num_sms(_export(name, p, PERSISTENT)) == [132], name
    for name in ("NVIDIA H100 PCIe",  # 114 SMs, read as the 132-SM SXM part
                 "NVIDIA GH200 480GB",  # no built-in name either: read as the H200
                 f"NVIDIA H200{MIXED_SEP}NVIDIA A100-SXM4-80GB"):  # 132 and 108: the first found, for both
        r = _export(name, p, PERSISTENT)
        assert r.table == {}, name
        assert any("SM count" in s.reason for s in r.skipped), name


def _tuned_mm_value() -> str:
    """The value torch's tuned_mm compares max_autotune_gemm_search_space with, read here on its own."""
    from torch._inductor.kernel import mm

    return re.search(r"max_autotune_gemm_search_space == \"(\w+)\"", inspect.getsource(mm.tuned_mm)).group(1)


def test_the_long_k_note_names_the_value_this_torchs_tuned_mm_compares(monkeypatch):
    """At K >= 64 x max(M, N) tuned_mm offers triton::mm only in the exhaustive search space. The note
    said to set 'EXHAUSTIVE'; torch 2.13's tuned_mm compares lower-case 'exhaustive' (the config and
    its environment variable hold upper case), so following it left the entry ignored. The note names
    the installed torch's value, and is left out once the config holds it."""
    if ie.unavailable_reason() is not None:
        pytest.skip("no Inductor lookup table in this torch")
    icfg = pytest.importorskip("torch._inductor.config")
    import torch

    value = _tuned_mm_value()
    if torch.__version__.startswith("2.13"):
        assert value == "exhaustive"
    p = Problem.from_sizes(16, 16, 65536, "bf16")
    monkeypatch.setattr(icfg, "max_autotune_gemm_search_space", "EXHAUSTIVE")
    notes = [n for n in _export("NVIDIA H200", p, "triton_mm:BM32-BN32-BK64-S3-W4-G8").notes if "triton::mm" in n]
    if value == "EXHAUSTIVE":
        assert notes == []
        return
    assert len(notes) == 1 and f"== {value!r}" in notes[0]
    monkeypatch.setattr(icfg, "max_autotune_gemm_search_space", value)
    assert not [n for n in _export("NVIDIA H200", p, "triton_mm:BM32-BN32-BK64-S3-W4-G8").notes
                if "triton::mm" in n]
