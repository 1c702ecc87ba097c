"""Bad CLI input on a machine without a GPU: each is a one-line error (exit 2)
that names the problem, and no input or output file is touched."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import run_cli


ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "benchmarks/results/2026-11-22-h200-lut-odd/public-table.json"
SAMPLE = ROOT / "tests/data/model_sample.csv.gz"


run = run_cli  # conftest's: the CLI's exit code, stdout and stderr


def one_line_error(rc, err, msg):
    assert rc == 2, err
    assert msg in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("argv,msg", [
    # OverflowError traceback from numpy (a size beyond int64) in predict's analytic model.
    (["predict", "--shape", "99999999999999999999x8x8"], "M must be at most 2**63 - 1"),
    (["space", "--shape", "8x99999999999999999999x8", "--families", "aten"], "N must be at most 2**63 - 1"),
    (["predict", "--op", "bmm", "--shape", "99999999999999999999x8x8x8"], "the batch must be at most 2**63 - 1"),
])
def test_sizes_beyond_int64_are_one_line_errors(argv, msg, capsys):
    one_line_error(*run(argv, capsys)[::2], msg)


def test_binary_suite_is_a_one_line_error(tmp_path, capsys):
    # UnicodeDecodeError has no strerror: AttributeError traceback in load_csv.
    bad = tmp_path / "store.csv"
    bad.write_bytes(b"\x00\xff\xfe binary")
    for argv in (["tune", "--suite", str(bad)], ["collect", "--dry-run", "--shapes", str(bad)]):
        one_line_error(*run(argv, capsys)[::2], "cannot read shape suite")


def test_suite_rows_past_the_header_are_refused_and_unknown_columns_said(tmp_path, capsys):
    """A row with more fields than the header (csv.DictReader keeps them under None) and a column
    no reader knows (a misspelt "layout_B") were ignored without a word: every row then tuned
    row-major. The first is a one-line error naming the line, the second a warning."""
    import importlib

    from gemmtune.shapes import KNOWN_COLUMNS, load_csv
    capture = importlib.import_module("gemmtune.capture")  # (gemmtune.capture is also the function)

    long_row = tmp_path / "long.csv"
    long_row.write_text("group,name,M,N,K,dtype\ng,a,64,48,96,fp16,col\n")
    one_line_error(*run(["tune", "--suite", str(long_row)], capsys)[::2], f"{long_row}:2: bad row: 1 field(s) more")
    typo = tmp_path / "typo.csv"
    typo.write_text("group,name,M,N,K,dtype,layout_B\ng,a,64,48,96,fp16,col\n")
    with pytest.warns(RuntimeWarning, match="'layout_B' not read"):
        shapes = load_csv(typo)
    assert shapes[0].problem.layout_b == "row"  # (ignored, as the warning says)
    assert set(capture.SUITE_COLUMNS) <= set(KNOWN_COLUMNS)  # capture's own columns warn about nothing


def test_export_inductor_refuses_to_replace_its_own_table(tmp_path, capsys):
    t = tmp_path / "table.json"
    shutil.copy(TABLE, t)
    before = t.read_bytes()
    for out in (str(t), str(tmp_path / "." / "table.json")):
        rc, _, err = run(["lut", "export-inductor", str(t), out, "--force"], capsys)
        one_line_error(rc, err, "is the gemmtune table being exported")
    assert t.read_bytes() == before


def test_train_names_the_unknown_device_given(capsys):
    # Said "the training rows come from ... pass device=", as if --device had not been given.
    rc, _, err = run(["train", "--store", str(SAMPLE), "--device", "nosuch"], capsys)
    one_line_error(rc, err, "unknown GPU 'nosuch'")


def test_report_does_not_turn_an_empty_file_into_a_store(tmp_path, capsys):
    f = tmp_path / "results.sqlite"
    f.touch()
    rc, out, err = run(["report", "--store", str(f)], capsys)
    one_line_error(rc, err, "is empty, not a results store")
    assert f.stat().st_size == 0 and out == ""


@pytest.mark.parametrize("gpus", ["abc", "", "0,x"])
def test_collect_gpus_are_checked(gpus, tmp_path, capsys):
    rc, _, err = run(["collect", "--dry-run", "--gpus", gpus, "--out", str(tmp_path / "out")], capsys)
    one_line_error(rc, err, "--gpus")
    assert not (tmp_path / "out").exists()


def test_collect_dry_run_with_gpus_plans_only(tmp_path, capsys):
    # --gpus won over --dry-run / --list-shapes: collectors were started and an empty store exported.
    out = tmp_path / "out"
    rc, text, err = run(["collect", "--dry-run", "--gpus", "0", "--limit-shapes", "1", "--out", str(out)], capsys)
    assert rc == 0 and "bfloat16: 1 shapes" in text, err
    rc, text, err = run(["collect", "--list-shapes", "--gpus", "0", "--limit-shapes", "1", "--out", str(out)], capsys)
    assert rc == 0 and "# 1 shapes" in err
    assert not out.exists()


def test_collect_unknown_group_is_an_error(capsys):
    rc, _, err = run(["collect", "--dry-run", "--groups", "nosuch"], capsys)  # was: 0 shapes, exit 0
    one_line_error(rc, err, "no shapes in group(s) nosuch; the groups are llm")


def test_collect_export_only_needs_a_store(tmp_path, capsys):
    store = tmp_path / "none.sqlite"
    rc, _, err = run(["collect", "--export-only", "--store", str(store), "--out", str(tmp_path / "o")], capsys)
    one_line_error(rc, err, "no results store at")
    assert not store.exists() and not list((tmp_path / "o").glob("*"))


def test_inspect_arch_is_checked(monkeypatch, capsys):
    rc, _, err = run(["inspect", "triton_mm:BM64-BN64-BK32-S3-W4-G8", "--shape", "8x8x8", "--arch", "0"], capsys)
    one_line_error(rc, err, "argument --arch: must be >= 50")
    # An arch triton's passes reject (--arch 999: RuntimeError 'PassManager::run failed'), without compiling.
    from gemmtune import kernelinfo

    def fail(*a, **k):
        raise RuntimeError("PassManager::run failed")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(kernelinfo, "inspect_choice", fail)
    rc, _, err = run(["inspect", "triton_mm:BM64-BN64-BK32-S3-W4-G8", "--shape", "8x8x8", "--arch", "999"], capsys)
    one_line_error(rc, err, "cannot compile triton_mm:BM64-BN64-BK32-S3-W4-G8 for sm_999")


def test_train_out_is_checked_before_training(tmp_path, capsys):
    # It trained fully, then failed on the write.
    rc, _, err = run(["train", "--store", str(SAMPLE), "--out", str(tmp_path / "missing" / "m.json")], capsys)
    one_line_error(rc, err, "cannot write the model to")


def test_train_out_or_ship_naming_a_store_is_refused(tmp_path, capsys):
    """``train --out`` (or ``--cv --ship``) naming the --store or a --pool-store replaced the timings
    it trained on with the model JSON. One line, rc 2, before training; the data as it was."""
    data = tmp_path / "d.csv.gz"
    shutil.copy(SAMPLE, data)
    before = data.read_bytes()
    for argv in (["--out", str(data)], ["--pool-store", str(data), "--out", str(data)],
                 ["--cv", "2", "--ship", str(data)]):
        store = str(SAMPLE) if "--pool-store" in argv else str(data)
        rc, _, err = run(["train", "--store", store, "--kind", "gbt", "--force", *argv], capsys)
        one_line_error(rc, err, "are one file")
        assert data.read_bytes() == before, argv


@pytest.mark.parametrize("argv", [
    ["bench"],
    ["bench-model", "--models", "tiny-llama", "--phases", "decode_b1", "--modes", "eager", "--dtype", "float32"],
    ["collect", "--shapes", "8x8x8", "--list-shapes"],
    ["report", str(next(ROOT.glob("benchmarks/results/2026-11-22-h200-bench-onecall/*-bench.json"))), "--no-plots"],
])
def test_a_file_given_as_an_output_folder_is_one_line(argv, tmp_path, capsys):
    """bench, bench-model, collect and report write several files into their --out folder: a file there
    (``--out results.json``) is a one-line error before any work, and the file is untouched
    (bench-model ran its models and then said only "File exists")."""
    f = tmp_path / "results.json"
    f.write_text("{}")
    rc, _, err = run([*argv, "--out", str(f)], capsys)
    one_line_error(rc, err, f"--out {f} is a file; give a folder")
    assert f.read_text() == "{}"
    rc, _, err = run([*argv, "--out", str(f / "sub")], capsys)
    one_line_error(rc, err, f"{f} is a file, not a folder")
