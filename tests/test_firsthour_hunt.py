"""The first-hour hunt (CPU): a new user follows the README, then strays, with the results store
and the command line's inputs. Each test is one defect found there: a file written over a results
store, a read-only store that cannot even be read, an error where one line was due, or a flag that
means one thing here and another there."""

from __future__ import annotations

import pytest
from conftest import run_cli

from gemmtune import cli
from gemmtune.store import ResultRow, ResultStore, RunContext

CTX = RunContext("cpu (Triton interpreter)", "cpu", "2.0", "3.0", "0.1")
KEY = "mm:M16-N16-K16:fp16->fp16:row.a/row.a"


run = run_cli  # conftest's: the CLI's exit code, stdout and stderr


def make_store(path, choices=("aten",)):
    with ResultStore(path) as s:
        for c in choices:
            s.record(CTX, ResultRow(problem_key=KEY, choice_id=c, family=c.partition(":")[0], status="ok",
                                    device_ms=0.01, eager_ms=0.01, rel_err=0.0, m=16, n=16, k=16,
                                    dtype="float16", out_dtype="float16", layout="row/row", aligned=True))
        s.checkpoint()
    return path


@pytest.mark.parametrize("flag", ["--json", "--run-summary"])
def test_report_store_json_never_replaces_another_results_store(tmp_path, capsys, flag):
    """``report --store a.sqlite --json b.sqlite`` (or ``--run-summary b.sqlite``) wrote the summary
    JSON over b.sqlite, another results store, every measurement in it lost: the check compared the
    path with --store only, and the file was written with Path.write_text, not write_atomic, which
    refuses a SQLite file everywhere else (tune --out, lut merge, capture --out)."""
    a = make_store(tmp_path / "a.sqlite")
    b = make_store(tmp_path / "b.sqlite")
    before = b.read_bytes()
    rc, out, err = run(["report", "--store", str(a), flag, str(b)], capsys)
    assert rc == 2 and "SQLite file" in err and "Traceback" not in err, err
    assert b.read_bytes() == before
    with ResultStore(b) as s:
        assert s.count() == 1


@pytest.mark.parametrize("header", ["group,name,M,N,K,dtype,M", "group,name,M,N,K,dtype,layout_b, layout_b"])
def test_suite_with_a_column_named_twice_is_refused(tmp_path, header):
    """A suite whose header names a column twice (a spreadsheet's extra "M" column, two layout_b)
    was read with the last one's values and no word: the row ``16,...,32`` tuned M = 32. The file,
    the column and one line, as every other bad header gets."""
    from gemmtune.shapes import load_csv

    path = tmp_path / "s.csv"
    path.write_text(header + "\ng,a,16,16,16,fp16," + ("32" if header.endswith("M") else "row,col") + "\n")
    with pytest.raises(ValueError, match=r"s\.csv: column\(s\) .*(M|layout_b).* named twice"):
        load_csv(path)


def _unwritable_beside(store):
    """Make SQLite unable to create the store's shared-memory file beside it, as on a read-only
    mount or in another user's folder (a directory takes the name: root, who runs CI, is stopped
    by that as well); returns the store's bytes."""
    (store.parent / (store.name + "-shm")).mkdir()
    return store.read_bytes()


def test_report_reads_a_store_it_cannot_write(tmp_path, capsys):
    """``report --store`` on a store it may not write (a colleague's results, a read-only mount)
    failed with 'attempt to write a readonly database' / 'unable to open database file': opening
    any store switched it to WAL and took the write lock to check (and extend) its tables, so a
    read-only summary needed write access. Read-only commands open the store read-only, and leave
    the file as it was."""
    store = make_store(tmp_path / "r.sqlite", ("aten", "triton_mm:x"))
    before = _unwritable_beside(store)
    rc, out, err = run(["report", "--store", str(store)], capsys)
    assert rc == 0, err
    assert "mm:M16-N16-K16" in out and "1 problems" in out
    assert store.read_bytes() == before


def test_train_reads_a_store_it_cannot_write(tmp_path, capsys):
    """``train --store`` on a store it may not write failed at opening it, before reading a row,
    for the same reason; now it gets as far as the rows (these are interpreter rows, which it
    refuses, by name)."""
    store = make_store(tmp_path / "r.sqlite")
    before = _unwritable_beside(store)
    rc, out, err = run(["train", "--store", str(store), "--out", str(tmp_path / "m.json")], capsys)
    assert rc == 2 and "Triton CPU interpreter" in err and "readonly" not in err, err
    assert store.read_bytes() == before


def test_a_read_only_store_refuses_writes_by_name(tmp_path):
    """The read-only opening: rows read; a write is a StoreError naming the file, not sqlite3's."""
    from gemmtune.store import StoreError

    store = make_store(tmp_path / "r.sqlite")
    with ResultStore(store, readonly=True) as s:
        assert [r.choice_id for _, r in s.rows()] == ["aten"]
        with pytest.raises(StoreError, match="cannot write to results store"):
            s.record(CTX, s.rows()[0][1])
    with pytest.raises(StoreError, match="no results store"):
        ResultStore(tmp_path / "none.sqlite", readonly=True)
    assert not (tmp_path / "none.sqlite").exists()


@pytest.mark.parametrize("extra", [[], ["--gpus", "0,1"]])
def test_collect_without_a_gpu_is_refused_before_it_writes_anything(extra, tmp_path, capsys, monkeypatch):
    """``gemmtune collect`` on a machine without a GPU said so (rc 2), but only after it had made
    ./out (the default --out) and prepared its store there: with ``--resume-from X.gz`` it unpacked
    the whole earlier store into out/collect.sqlite first, and with --drop-oom also rewrote that
    copy, before the refusal. With ``--gpus 0,1`` it started a collector per GPU, each of which
    printed the refusal, then exported the empty store (out/collect-empty.csv.gz), exit 1. Refused
    first, once; nothing made."""
    import torch

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    src = make_store(tmp_path / "earlier.sqlite")
    rc, out, err = run(["collect", "--resume-from", str(src)] + extra, capsys)
    assert rc == 2 and "this machine has none" in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [
    ["tune", "--suite", "a.csv", "--suite", "b.csv"],
    ["tune", "--preset", "smoke", "--preset", "bmm"],
    ["tune", "--shape", "8x8x8:fp16", "--families", "aten", "--families", "triton_mm"],
    ["space", "--shape", "8x8x8:fp16", "--families", "aten", "--families", "triton_mm"],
    ["predict", "--shape", "8x8x8:fp16", "--families", "aten", "--families", "triton_mm"],
    ["bench", "--suite", "a.csv", "--suite", "b.csv"],
    ["demo", "--shape", "37x53x300:bf16", "--shape", "8x8x8"],  # one problem, as space's --shape
])
def test_a_list_option_given_twice_is_refused(argv, capsys):
    """``--shape`` may be repeated and every one is tuned; ``--suite a.csv --suite b.csv``,
    ``--preset smoke --preset bmm`` or ``--families aten --families triton_mm`` read the same way
    kept the last alone (argparse's rule) and ran without a word: the first suite's shapes, or
    families, never tuned. Refused when parsed, as space's --shape is (one line, rc 2)."""
    with pytest.raises(SystemExit) as e:
        cli.build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "given twice" in err and "Traceback" not in err, err


@pytest.mark.parametrize("argv", [
    ["capture", "--model", "tiny-llama", "--dtype", "fp8"],
    ["capture", "--model", "tiny-llama", "--dtype", "e5m2"],
    ["bench-model", "--models", "tiny-llama", "--modes", "eager", "--dtype", "fp8"],
])
def test_a_model_dtype_of_fp8_is_a_one_line_error(argv, tmp_path, capsys, monkeypatch):
    """``capture --dtype fp8`` built the model in fp8 and died in its forward with torch's
    traceback ('"neg_cpu" not implemented for Float8_e4m3fn', exit 1); ``bench-model --dtype fp8``
    ran every model to 'not run' and wrote a report of nothing, exit 1; ``--dtype int8`` was one
    line, exit 2, in both. fp8 names GEMM operands (scaled_mm), not a model's weights: refused
    the same way, before any model is built."""
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(argv + ["--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and "--dtype" in err and "fp16, bf16 or fp32" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


@pytest.mark.parametrize("extra", [["--summary", "s.csv"], ["--out", "s.csv", "--overwrite"]])
def test_tune_never_writes_over_its_own_suite(extra, tmp_path, capsys, monkeypatch):
    """``tune --suite s.csv --summary s.csv`` replaced the user's suite with the run's summary JSON,
    exit 0 (--summary was checked against --store, --out and --table, not --suite); ``--out s.csv``
    said to pass --overwrite, which then replaced the suite with the table. Refused before the
    sweep, the suite unchanged."""
    monkeypatch.chdir(tmp_path)
    suite = tmp_path / "s.csv"
    suite.write_text("group,name,M,N,K,dtype\ng,a,8,8,16,fp16\n")
    before = suite.read_bytes()
    rc, out, err = run(["tune", "--suite", "s.csv", "--families", "aten", "-q", "--store", "x.sqlite"] + extra, capsys)
    assert rc == 2 and "--suite" in err and "one file" in err and "Traceback" not in err, err
    assert suite.read_bytes() == before and not (tmp_path / "x.sqlite").exists()


@pytest.mark.parametrize("extra,needle", [
    (["BENCH", "--json", "j.json"], "--json"),
    (["BENCH", "--run-summary", "r.json"], "--run-summary"),
    (["BENCH", "--tune-json", "t.json"], "--tune-json"),
    (["BENCH", "--suite", "smoke"], "--suite"),
    (["--store", "STORE", "--out", "rep"], "--out"),
    (["--store", "STORE", "--no-plots"], "--no-plots"),
    (["--store", "STORE", "--merge"], "--merge"),
    (["--store", "STORE", "--title", "T"], "--title"),
    (["--store", "STORE", "--suite", "smoke"], "--suite"),
    (["--store", "STORE", "--tune-json", "t.json"], "--tune-json"),
])
def test_report_options_of_another_mode_are_refused(extra, needle, tmp_path, capsys, monkeypatch):
    """``report`` has four modes (a bench JSON, --tune-run, --trace, --store), and options that only
    one of them reads were taken by the others and dropped: ``report X-bench.json --json j.json``
    wrote no j.json, exit 0; ``report --store S --out rep`` printed to the terminal and made no rep;
    ``--suite`` / ``--tune-json`` without --run-summary, ``--title`` without --tune-run, likewise.
    One line naming the option, exit 2, nothing written."""
    monkeypatch.chdir(tmp_path)
    from pathlib import Path
    bench = Path(__file__).parent / "data" / "bench_fixture.json"
    store = make_store(tmp_path / "s.sqlite")
    argv = ["report"] + [str(bench) if a == "BENCH" else str(store) if a == "STORE" else a for a in extra]
    if "BENCH" in extra:
        argv += ["--out", str(tmp_path / "o")]
    rc, out, err = run(argv, capsys)
    assert rc == 2 and needle in err and "Traceback" not in err, (argv, err)
    assert not any(p.name in ("j.json", "r.json", "rep", "o") for p in tmp_path.iterdir())


@pytest.mark.parametrize("opt", ["--suite", "--preset", "--groups", "--summary"])
def test_tune_option_given_an_empty_value_is_refused(opt, tmp_path, capsys, monkeypatch):
    """``gemmtune tune --suite "$SUITE"`` with SUITE unset passed an empty value, which counted as
    not given: with no --shape the smoke preset was tuned instead, exit 0; an empty --groups kept
    every group, an empty --summary wrote none. One line naming the option, exit 2, nothing run."""
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(["tune", "--shape", "8x8x16:fp16", "--families", "aten", "-q", opt, ""], capsys)
    assert rc == 2 and f"{opt} is empty" in err and "Traceback" not in err, err
    assert not (tmp_path / "gemmtune.sqlite").exists()


def test_store_summary_of_two_run_contexts_keeps_them_apart(tmp_path, capsys):
    """A store holding two run contexts (two GPUs sharing a file, or the same GPU before and after a
    torch / triton upgrade: the versions are part of the context) was summarized as if one: each
    problem listed twice with nothing telling the rows apart, "4 problems" for 2, and one geomean
    speedup over both GPUs' rows (2.00× on one, 1.00× on the other: "1.41×"). Each row names its
    run context, and each context gets its own geomean."""
    h100 = RunContext("NVIDIA H100", "9.0", "2.6", "3.2", "0.1")
    h200 = RunContext("NVIDIA H200", "9.0", "2.6", "3.2", "0.1")
    store = tmp_path / "m.sqlite"

    def row(choice, ms, k=16):
        return ResultRow(problem_key=f"mm:M8-N8-K{k}:fp16->fp16:row.a/row.a", choice_id=choice,
                         family=choice.split(":")[0], status="ok", device_ms=ms, eager_ms=ms, rel_err=0.0,
                         m=8, n=8, k=k, dtype="float16", out_dtype="float16", layout="row/row", aligned=True)
    with ResultStore(store) as s:
        s.record_many(h100, [row("aten", 0.02), row("triton_mm:x", 0.01), row("aten", 0.02, 32), row("triton_mm:x", 0.01, 32)])
        s.record_many(h200, [row("aten", 0.01), row("triton_mm:x", 0.02), row("aten", 0.01, 32), row("triton_mm:x", 0.02, 32)])
    rc, out, err = run(["report", "--store", str(store)], capsys)
    assert rc == 0, err
    table = [line for line in out.splitlines() if line.startswith("| `mm:")]
    assert len(table) == 4 and sum("NVIDIA H100" in line for line in table) == 2
    assert sum("NVIDIA H200" in line for line in table) == 2
    assert "1.41" not in out
    assert "2 problems on NVIDIA H100" in out and "2.00×" in out
    assert "2 problems on NVIDIA H200" in out and "1.00×" in out


def test_report_store_reads_a_gzipped_store_as_train_does(tmp_path, capsys):
    """``train --store collect.sqlite.gz`` reads a compressed store (what collect ships, e.g.
    data/collect/collect.sqlite.gz), but ``report --store`` on the same file said 'not a SQLite
    database'. Both read it; the summary is the uncompressed file's."""
    import gzip

    store = make_store(tmp_path / "r.sqlite", ("aten", "triton_mm:x"))
    gz = tmp_path / "r.sqlite.gz"
    gz.write_bytes(gzip.compress(store.read_bytes()))
    rc, plain, err = run(["report", "--store", str(store)], capsys)
    assert rc == 0, err
    rc, out, err = run(["report", "--store", str(gz)], capsys)
    assert rc == 0 and out == plain, err


@pytest.mark.parametrize("extra,needle", [
    (["--policy-store", "STORE"], "--policy-store"),
    (["--kinds", "gbt"], "--kinds"),
    (["--policies", "pol", "--kinds", "gbt"], "--kinds"),
])
def test_train_options_of_another_mode_are_refused(extra, needle, tmp_path, capsys, monkeypatch):
    """``train --policy-store S`` (help: "with --policies") and ``train --kinds gbt`` (the kinds
    --compare trains or --cv cross-validates; --policies takes --kind) trained a plain model and
    dropped the option without a word, exit 0. One line naming it, exit 2, nothing written."""
    from pathlib import Path
    monkeypatch.chdir(tmp_path)  # --policies pol: a folder it would write
    store = str(Path(__file__).parent / "data" / "model_sample.csv.gz")
    argv = ["train", "--store", store, "--out", str(tmp_path / "m.json")] + [store if a == "STORE" else a for a in extra]
    rc, out, err = run(argv, capsys)
    assert rc == 2 and needle in err and "Traceback" not in err, err
    assert not (tmp_path / "m.json").exists() and not (tmp_path / "pol").exists()


@pytest.mark.parametrize("action", [["validate"], ["show"]])
def test_lut_given_a_results_store_says_so(action, tmp_path, capsys):
    """``lut show gemmtune.sqlite`` (the two files tune writes side by side, taken one for the
    other) said 'not UTF-8 text: byte 102: invalid start byte'. It names what the file is and
    where its summary is."""
    store = make_store(tmp_path / "gemmtune.sqlite")
    rc, out, err = run(["lut"] + action + [str(store)], capsys)
    assert rc in (1, 2) and "results store, not a lookup table" in out + err and "report --store" in out + err


@pytest.mark.parametrize("cmd", [["space", "--families", "aten,triton_mm"], ["predict", "--top", "2"]])
def test_scaled_mm_layout_b_row_is_not_refused_as_an_mm(cmd, capsys):
    """``space --op scaled_mm --shape 16x16x32 --layout-b row`` said 'float8_e4m3fn inputs need
    scales: use op='scaled_mm' (... got op 'mm')' to a user who had given --op scaled_mm: B's
    alignment for the new layout was computed on a Problem of the default op. It now answers for
    the scaled_mm problem with a row-major B (or refuses it for what it is)."""
    rc, out, err = run([cmd[0], "--op", "scaled_mm", "--shape", "16x16x32", "--layout-b", "row", "--device", "h100"]
                       + cmd[1:], capsys)
    assert "got op 'mm'" not in err and "Traceback" not in err, err
    assert rc == 0 and ("triton_mm:" in out if cmd[0] == "space" else "scaled_mm" in out), (rc, out, err)


def test_suite_with_empty_trailing_columns_still_loads(tmp_path):
    """A spreadsheet's export with empty trailing columns (``...,dtype,,``) names the empty column
    twice; it is read by nobody, so it is no duplicate (the check above must not refuse it)."""
    from gemmtune.shapes import load_csv

    path = tmp_path / "s.csv"
    path.write_text("group,name,M,N,K,dtype,,\ng,a,16,16,16,fp16,,\n")
    with pytest.warns(RuntimeWarning, match="not read"):
        (shape,) = load_csv(path)
    assert shape.problem.key == "mm:M16-N16-K16:fp16->fp16:row.a/row.a"
