"""CPU hunt of the lookup-table and export path (table io / merge, jsonio, ``gemmtune lut ...``,
``lut export-inductor``): each test failed before its fix. Real files in tmp_path, no mocks."""

from __future__ import annotations

import os
import stat
import warnings

import pytest
from conftest import run_cli

from gemmtune import inductor_export as ie
from gemmtune.configs import Choice
from gemmtune.jsonio import write_atomic
from gemmtune.problem import Problem
from gemmtune.table import LookupTable, TableChoice, TableError, TableWarning, load, load_or_none, loads, provenance

H100 = "NVIDIA H100 80GB HBM3"
P1 = Problem.from_sizes(32, 32, 64, "bf16")
P2 = Problem.from_sizes(64, 32, 64, "bf16")


def _table(entries: dict, device: str = H100) -> LookupTable:
    return LookupTable(provenance(device, "9.0", "2.11.0", "3.6.0", "0.1.0"),
                       {p.key: [TableChoice(Choice.parse("aten"), ms)] for p, ms in entries.items()})


run = run_cli  # conftest's: the CLI's exit code, stdout and stderr


# ------------------------------------------------------------------ an integer device_ms too big for a float
def test_a_device_ms_integer_too_big_for_a_float_is_a_table_error(tmp_path, capsys):
    """``"device_ms": 1000...0`` (400 digits) is a JSON integer that Python reads exactly; the check
    ``math.isfinite(ms)`` converts it to a float and raised OverflowError: a traceback from ``lut
    validate``, and ``load_or_none`` (dispatch's reader, which never raises) let it out."""
    text = _table({P1: 0.01}).dumps().replace('"device_ms": 0.01', '"device_ms": 1' + "0" * 400)
    with pytest.raises(TableError, match=r"device_ms: must be a positive finite number"):
        loads(text, "t.json")
    path = tmp_path / "t.json"
    path.write_text(text)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert load_or_none(path) is None
    assert any(issubclass(x.category, TableWarning) for x in w)
    rc, out, err = run(["lut", "validate", str(path)], capsys)
    assert rc == 1 and out.startswith("FAIL") and "device_ms" in out and "Traceback" not in err


# ------------------------------------------------------------------ read-only outputs
@pytest.mark.skipif(not hasattr(os, "chmod"), reason="needs file modes")
def test_lut_merge_and_export_refuse_a_read_only_output(tmp_path, capsys):
    """A table made read-only (chmod 444) was replaced by ``lut merge T T other`` and an Inductor
    table by ``lut export-inductor``: the atomic rename needs only the directory writable (and its
    mode came back 644). ``tune --out`` refuses such a file (jsonio.check_file_target); these did not."""
    t, other = tmp_path / "t.json", tmp_path / "other.json"
    _table({P1: 0.01}).save(t)
    _table({P2: 0.02}).save(other)
    t.chmod(0o444)
    before = t.read_bytes()
    rc, _, err = run(["lut", "merge", str(t), str(t), str(other)], capsys)
    assert rc == 2 and "read-only" in err, err
    assert t.read_bytes() == before and stat.S_IMODE(t.stat().st_mode) == 0o444

    ind = tmp_path / "inductor.json"
    ind.write_text("{}\n")
    ind.chmod(0o444)
    rc, _, err = run(["lut", "export-inductor", str(other), str(ind), "--force"], capsys)
    assert rc == 2 and "read-only" in err, err
    assert ind.read_text() == "{}\n"
    with pytest.raises(ValueError, match="read-only"):
        ie.export(str(other), ind, force=True)


# ------------------------------------------------------------------ a private table stays private
@pytest.mark.skipif(not hasattr(os, "chmod"), reason="needs file modes")
def test_write_atomic_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    """write_atomic gave the new file the umask's default mode (0644 with umask 022) whatever the
    old one had: a table kept private (chmod 600) became world-readable at the next ``tune --out``
    or ``lut merge``; ``open(path, "w")``, which it says it imitates, keeps the file's mode."""
    path = tmp_path / "t.json"
    _table({P1: 0.01}).save(path)
    path.chmod(0o600)
    _table({P1: 0.01, P2: 0.02}).save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(load(path).entries) == 2
    write_atomic(path, "{}")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# ------------------------------------------------------------------ an Inductor table given for a gemmtune one
def test_an_inductor_table_given_as_a_gemmtune_table_is_named_in_a_short_line(tmp_path, capsys):
    """``lut validate / show / diff / merge / export-inductor`` (and ``tune --table``) given the
    export's output listed every Inductor key as an "unknown field": one line of ~100 KB for a
    table of a few hundred entries, without saying what the file was."""
    t = LookupTable(provenance(H100, "9.0", "2.11.0", "3.6.0", "0.1.0"),
                    {Problem.from_sizes(16 * i, 64, 64, "bf16").key: [TableChoice(Choice.parse("aten"), 0.01)]
                     for i in range(1, 301)})
    src = t.save(tmp_path / "t.json")
    ind = tmp_path / "inductor.json"
    ie.export(src, ind, force=True)
    rc, out, err = run(["lut", "validate", str(ind)], capsys)
    assert rc == 1 and "an Inductor lookup table" in out and len(out) < 400, out[:500]
    rc, out, err = run(["lut", "show", str(ind)], capsys)
    assert rc == 2 and "an Inductor lookup table" in err and len(err) < 400, err[:500]
    # Any other document with many unknown fields: the first few and the count.
    doc = '{"schema_version": 1, ' + ", ".join(f'"f{i}": 0' for i in range(1000)) + "}"
    with pytest.raises(TableError, match=r"\(1000 in all\)") as ei:
        loads(doc, "x.json")
    assert len(str(ei.value)) < 400


# ------------------------------------------------------------------ install() given a parsed document
@pytest.mark.skipif(ie.unavailable_reason() is not None, reason="this torch cannot take a lookup table")
def test_install_converts_a_gemmtune_table_document_and_checks_an_inductor_dict(tmp_path):
    """``install(json.load(open("table.json")))`` installed the gemmtune document itself as
    Inductor's table: its keys ('schema_version', 'entries', ...) match no GEMM, and torch.compile
    tuned as without a table, without a word. A dict whose values are not lists of configs was
    installed too, and failed later inside torch.compile."""
    import json

    src = _table({P1: 0.01, P2: 0.02}).save(tmp_path / "t.json")
    try:
        got = ie.install(json.loads(src.read_text()))
        assert got == ie.to_inductor(load(src)) and len(got) == 2
        with pytest.raises(TableError, match="must be a list of configs"):
            ie.install({"((torch.bfloat16, [32, 64], [64, 1]), (torch.bfloat16, [64, 32], [32, 1]))+mm":
                        {"template_id": "aten::mm"}})
        with pytest.raises(TableError, match="provenance"):
            ie.install({"schema_version": 1, "entries": []})
    finally:
        ie.uninstall()


# ------------------------------------------------------------------ a huge key or choice id
@pytest.mark.parametrize("entry", [
    {"key": "mm:M1-N1-K1:bf16->bf16:row.a/row.a" + "x" * 100_000, "choices": [{"id": "aten"}]},
    {"key": P1.key, "choices": [{"id": "triton_mm:" + "B" * 100_000}]},
    {"key": P1.key, "choices": [{"id": "aten" + " " * 100_000}]},
])
def test_a_huge_key_or_choice_id_makes_a_short_error(entry):
    """Problem.from_key and Choice.parse quote what they are given in full: a 100 KB key or choice
    id (a corrupted or generated file) made a TableError of 100-200 KB, one "line" that buried the
    terminal; the fields' values were already shortened (io._show)."""
    import json

    doc = {"schema_version": 1, "provenance": _table({}).provenance, "entries": [entry]}
    with pytest.raises(TableError) as ei:
        loads(json.dumps(doc), "t.json")
    assert len(str(ei.value)) < 1000, str(ei.value)[:300]
    if entry["choices"][0]["id"].startswith("aten "):
        assert "did you mean 'aten'?" in str(ei.value)


# ------------------------------------------------------------------ merging triton patch releases
def test_a_table_merged_from_triton_patch_releases_stays_trusted():
    """Tables from triton 3.6.0 and 3.6.1 are each trusted on 3.6.x (the policy compares
    MAJOR.MINOR), but their merge warned "different triton versions", and its provenance
    '3.6.0 + 3.6.1' did not parse as a version: the merged table was marked untrusted on every
    machine, "(another MAJOR.MINOR generates other code)"."""
    from gemmtune.table import check_provenance, major_minor, merge

    def made_with(triton_v: str, p: Problem) -> LookupTable:
        return LookupTable(provenance(H100, "9.0", "2.11.0", triton_v, "0.1.0"),
                           {p.key: [TableChoice(Choice.parse("aten"), 0.01)]})

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no TableWarning: same MAJOR.MINOR
        m = merge([made_with("3.6.0", P1), made_with("3.6.1", P2)])
        assert m.provenance["triton"] == "3.6.0 + 3.6.1" and major_minor(m.provenance["triton"]) == (3, 6)
        assert check_provenance(m, H100, "3.6.2") == [] and m.trusted
    with pytest.warns(TableWarning, match="different triton versions"):
        m = merge([made_with("3.5.0", P1), made_with("3.6.1", P2)])
    with pytest.warns(TableWarning, match="made with triton '3.5.0 \\+ 3.6.1'"):
        check_provenance(m, H100, "3.6.1")
    assert not m.trusted


def test_a_table_choice_given_as_its_id_is_parsed_and_anything_else_named():
    # A LookupTable built by hand with id strings (as a script does) used to fail deep in planning.
    from gemmtune.configs import Choice
    from gemmtune.table import TableChoice

    tc = TableChoice("triton_mm:BM64-BN64-BK32-S3-W4-G8", 0.5)
    assert tc.choice == Choice.parse("triton_mm:BM64-BN64-BK32-S3-W4-G8") and tc.device_ms == 0.5
    with pytest.raises(ValueError, match="unknown kernel family"):
        TableChoice("nope:x")
    with pytest.raises(TypeError, match="Choice or its id string"):
        TableChoice(42)


def test_export_inductor_with_nothing_to_export_exits_1_on_every_run(tmp_path, capsys):
    # The first run wrote '{}' and exited 1; a rerun refused to replace that file and exited 2.
    t = _table({P1: 0.01}).save(tmp_path / "t.json")
    out = tmp_path / "inductor.json"
    argv = ["lut", "export-inductor", str(t), str(out), "--no-aten", "--force"]
    rc1, _, _ = run(argv, capsys)
    rc2, _, err2 = run(argv, capsys)
    assert (rc1, rc2) == (1, 1), err2
    assert "nothing to export" in err2 and "Traceback" not in err2
