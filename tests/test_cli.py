"""The command line a new user meets: clear one-line errors and non-zero exits for impossible
input, one vocabulary across subcommands (old spellings still accepted), --version, defaults in
every help, and tables that a second run merges into instead of destroying."""

from __future__ import annotations

import json
import os

import pytest
from conftest import run_cli

from gemmtune import cli
from gemmtune.cli import common as cli_common


run = run_cli  # conftest's: the CLI's exit code, stdout and stderr


@pytest.mark.parametrize("argv,msg", [
    (["tune", "--shape", "0x4x4"], "M must be >= 1"),
    (["tune", "--shape", "4x0x4", "--shape", "8x8x8"], "N must be >= 1"),
    (["tune", "--shape", "-1x4x4"], "bad shape '-1x4x4': M must be >= 1"),  # a value, not an option
    (["tune", "--shape", "4x-2x4"], "N must be >= 1"),
    (["tune", "--shape", "99999999999x4x4"], "GiB, more than the"),
    (["predict", "--shape", "0x4x4:f16"], "M must be >= 1"),
    (["demo", "--size", "64x48"], "expected MxNxK"),              # was "not enough values to unpack"
    (["demo", "--size", "64x48x96:bf16x"], "unsupported dtype 'bf16x'"),
    (["demo", "--shape", "-64x48x96"], "M must be >= 1"),
    (["demo", "--shape", "64x48x0"], "K must be >= 1"),
    (["space", "--shape", "0x1x1", "--families", "aten"], "M must be >= 1"),
])
def test_impossible_shapes_are_one_line_errors(argv, msg, capsys):
    rc, out, err = run(argv, capsys)
    assert rc == 2 and msg in err and "Traceback" not in err


@pytest.mark.parametrize("argv,msg", [
    (["tune", "--timeout", "-1"], "must be > 0"),
    (["tune", "--timeout", "0"], "must be > 0"),
    (["tune", "--limit", "0"], "must be >= 1"),
    (["predict", "--shape", "8x8x8", "--top", "0"], "must be >= 1"),
    (["tune", "--workers", "0"], "must be >= 1"),
    (["tune", "--compile-workers", "-1"], "must be >= 0"),
    (["tune", "--compile-ahead", "-1"], "must be >= 0"),
    (["bench", "--repeats", "0"], "must be >= 1"),
    (["train", "--store", "x", "--test-fraction", "1"], "between 0 and 1"),
    # collect's numbers took any int or float: --limit-shapes -1 silently dropped the last shape
    # of the plan, a negative sample size dropped configs, a negative --timeout killed everything.
    (["collect", "--dry-run", "--limit-shapes", "-1"], "must be >= 1"),
    (["collect", "--dry-run", "--limit-shapes", "0"], "must be >= 1"),
    (["collect", "--dry-run", "--mm-sample", "-5"], "must be >= 0"),
    (["collect", "--dry-run", "--timeout", "0"], "must be > 0 (seconds)"),
    (["collect", "--dry-run", "--max-minutes", "-3"], "must be >= 0 (minutes)"),
    (["collect", "--dry-run", "--hard-stop-minutes", "-1"], "must be >= 0 (minutes)"),
    (["collect", "--dry-run", "--compile-ahead", "-1"], "must be >= 0"),
    (["worker", "--serve", "x.sock", "--timeout", "0"], "must be > 0"),
    (["tune", "--shape"], "expected one argument"),
    (["tune", "--nosuch"], "unrecognized arguments: --nosuch (see gemmtune tune --help)"),
])
def test_bad_numbers_are_refused_by_the_parser(argv, msg, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err
    # One line: what is wrong and where the help is, not argparse's whole usage block.
    assert e.value.code == 2 and msg in err and len(err.strip().splitlines()) == 1, err


def test_version_and_missing_command(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("gemmtune ")
    rc, out, err = run([], capsys)
    assert rc == 2 and "give a command: tune, demo, space" in err and "required: cmd" not in err
    rc, out, err = run(["lut"], capsys)
    assert rc == 2 and "give an action: validate, show, merge, diff" in err and "required" not in err


def test_help_shows_defaults_and_a_real_description(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    top = capsys.readouterr().out
    assert "The ``gemmtune`` command line" not in top and "find, verify and serve" in top
    with pytest.raises(SystemExit):
        cli.main(["tune", "--help"])
    h = " ".join(capsys.readouterr().out.split())
    assert "(default: gemmtune.sqlite)" in h and "(default: 120.0)" in h and "--overwrite" in h


def _parsers(parser=None, seen=None):
    """Every parser of the CLI, sub-commands' and lut actions' included."""
    import argparse
    parser = parser or cli.build_parser()
    yield parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for p in dict.fromkeys(a.choices.values()):
                yield from _parsers(p)


def test_every_argument_has_help_and_every_default_is_shown():
    import argparse
    n = 0
    for p in _parsers():
        p.format_help()  # a stray '%' in a help text would break it
        for a in p._actions:
            if isinstance(a, (argparse._HelpAction, argparse._VersionAction)):
                continue
            if a.help == argparse.SUPPRESS:
                assert isinstance(a, cli.Deprecated), (p.prog, a.option_strings)
                continue
            n += 1
            assert a.help and a.help.strip(), f"{p.prog} {a.option_strings or a.dest}: no help"
            if a.default not in (None, False) and a.option_strings:
                assert "default" in p.formatter_class(p.prog)._get_help_string(a), (p.prog, a.option_strings)
    assert n > 60


@pytest.mark.parametrize("argv,old,new", [
    (["space", "--shape", "64x64x64:fp16", "--family", "aten", "--kind", "exhaustive"], "--family", "--families"),
    (["space", "--shape", "64x64x64:fp16", "--families", "aten", "--kind", "exhaustive"], "--kind", "--space"),
    (["tune", "--preset", "smoke", "--group", "nosuch"], "--group", "--groups"),
    (["predict", "--shape", "8x8x8:fp16", "--family", "aten", "--device", "h100"], "--family", "--families"),
])
def test_old_spellings_still_work_hidden_and_deprecated(argv, old, new, capsys):
    rc, out, err = run(argv, capsys)
    assert f"{old} is deprecated and goes in the next release; use {new}" in err
    if argv[0] == "space":
        assert rc == 0 and out.strip() == "aten"
    elif argv[0] == "tune":
        assert rc == 2 and "--groups: no group nosuch" in err   # the value reached --groups
    else:
        assert rc == 0 and "aten" in out and "top 1 of 1" in " ".join(out.split())
    with pytest.raises(SystemExit):
        cli.main([argv[0], "--help"])
    assert old not in capsys.readouterr().out.replace(new, "")


def test_new_spellings(capsys):
    rc, out, err = run(["space", "--shape", "32x32x4096:fp16", "--families", "aten,decompose_k",
                        "--space", "default"], capsys)
    assert rc == 0 and "aten" in out and "decompose_k:s2" in out and not err.startswith("warning")
    rc, out, err = run(["space", "--shape", "32x32x4096:fp16"], capsys)
    assert rc == 2 and "give --families" in err


def test_demo_takes_shape_and_the_old_size(capsys):
    """demo parses --shape (and --size, deprecated) like tune: MxNxK[:dtype]; the issue's
    `demo --size 64x48x96:bf16` printed "invalid literal for int()"."""
    for opt in ("--shape", "--size"):
        rc, out, err = run(["demo", opt, "64x48x96:bf16"], capsys)
        text = " ".join(out.split())
        assert rc == 0, err
        assert "64x48x96 bfloat16" in text and "aten" in text and "NO:" not in text
        assert ("deprecated" in err) == (opt == "--size")



def test_demo_prints_whole_choice_ids(capsys, monkeypatch):
    """demo cut its choice ids to 'triton_mm:BM32-BN32-BK16-S1…' in an 80-column terminal: the
    id a user copies into matmul(choice=...) was unreadable. Now a long id folds onto the next
    line of its cell."""
    import sys

    import gemmtune
    from gemmtune.shapes import parse_shape
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TERM", "dumb")  # a terminal of 80 columns, without colour codes
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    rc, out, err = run(["demo", "--shape", "9x7x30:fp16"], capsys)
    assert rc == 0, err
    assert "…" not in out, out
    choices, family = {}, None
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == 5:
            family = cells[0] or family
            choices[family] = choices.get(family, "") + cells[1]
    p = parse_shape("9x7x30:fp16").problem
    for fam in ("triton_mm", "triton_static", "skinny"):
        assert choices[fam] == gemmtune.space(p, fam)[0].id, (fam, out)


def test_operands_are_checked_against_this_machines_memory(monkeypatch):
    """On a CPU the interpreter allocates on the host: the smaller of the built-in GPU's memory
    and this machine's is the limit."""
    import torch

    from gemmtune.shapes import parse_shape
    if torch.cuda.is_available():
        pytest.skip("a GPU's own memory is the limit")
    big = [parse_shape("16384x16384x16384:fp32")]  # 3 GiB of operands
    cli.check_allocatable(big)
    monkeypatch.setattr(cli_common, "host_memory_bytes", lambda: 2**30)
    with pytest.raises(ValueError, match=r"cannot be allocated: its operands take 3.0 GiB, more than the 1 GiB "
                                         r"of this machine"):
        cli.check_allocatable(big)
    with pytest.raises(ValueError, match=r"141 GiB|131 GiB"):
        monkeypatch.setattr(cli_common, "host_memory_bytes", lambda: 2**50)
        cli.check_allocatable([parse_shape("200000x200000x4:fp32")], device="h200")


def _tune(tmp_path, shape, *extra):
    # --in-process: these tests are about the table --out writes, not the benchmark worker (a
    # subprocess with its own torch import, ~5 s of CPU each on the 2-core CI machine).
    return cli.main(["tune", "--shape", shape, "--families", "aten", "--store", str(tmp_path / "s.sqlite"),
                     "--out", str(tmp_path / "t.json"), "-q", "--in-process", *extra])


def _cpu_table(entries: dict):
    """A table as a tuning run on this machine would write it (same device provenance)."""
    import gemmtune
    from gemmtune.configs import Choice
    from gemmtune.problem import Problem
    from gemmtune.table import LookupTable, TableChoice, provenance
    import torch
    import triton
    if torch.cuda.is_available():
        dev, cap = torch.cuda.get_device_name(), "%d.%d" % torch.cuda.get_device_capability()
    else:
        dev, cap = "cpu (Triton interpreter)", "interp"
    return LookupTable(provenance(dev, cap, torch.__version__, triton.__version__, gemmtune.__version__, "tuned"),
                       {Problem.from_sizes(*mnk, "fp16").key: [TableChoice(Choice.parse(c), ms) for c, ms in chs]
                        for mnk, chs in entries.items()})



def test_tune_names_the_shapes_a_partial_table_does_not_cover(tmp_path, capsys):
    """`tune --table` covering 1 of 2 shapes timed the covered one and tuned the other in full
    without a word; by default a line names the uncovered shape, and the summary gives the counts."""
    from gemmtune.problem import Problem
    _cpu_table({(8, 8, 16): [("aten", 0.5)]}).save(tmp_path / "in.json")
    rc = cli.main(["tune", "--shape", "8x8x16:fp16", "--shape", "8x8x32:fp16", "--families", "aten", "--in-process",
                   "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "t.json"),
                   "--table", str(tmp_path / "in.json")])
    out, err = capsys.readouterr()
    assert rc == 0
    assert (f"[gemmtune] the lookup table {tmp_path / 'in.json'} covers 1 of the 2 shapes; the other has no entry "
            f"and is tuned in full: {Problem.from_sizes(8, 8, 32, 'fp16').key}") in err
    assert "lookup table covered 1 of 2 shapes" in " ".join(out.split())

@pytest.mark.slow
def test_out_merges_into_an_existing_table_and_overwrite_replaces(tmp_path, capsys):
    """The issue's lost table: `tune --out t.json` replaced a 3-entry table with its 1 entry."""
    from gemmtune.problem import Problem
    _cpu_table({(8, 8, 16): [("aten", 0.5)], (8, 16, 16): [("aten", 0.5)],
                # 16x24x32, tuned below: this table's (made-up, fast) time must survive the merge
                (16, 24, 32): [("decompose_k:s2", 1e-6)]}).save(tmp_path / "t.json")
    assert _tune(tmp_path, "8x8x48:fp16") == 0
    entries = json.loads((tmp_path / "t.json").read_text())["entries"]
    assert len(entries) == 4  # 3 kept + 1 new
    assert _tune(tmp_path, "16x24x32:fp16") == 0
    entries = {e["key"]: e["choices"] for e in json.loads((tmp_path / "t.json").read_text())["entries"]}
    assert len(entries) == 4
    assert [c["id"] for c in entries[Problem.from_sizes(16, 24, 32, "fp16").key]] == ["decompose_k:s2", "aten"]
    assert _tune(tmp_path, "8x8x48:fp16", "--overwrite") == 0
    assert len(json.loads((tmp_path / "t.json").read_text())["entries"]) == 1


def test_the_python_api_merges_too(tmp_path):
    import gemmtune
    from gemmtune.problem import Problem
    _cpu_table({(8, 8, 16): [("aten", 0.5)]}).save(tmp_path / "t.json")
    r = gemmtune.tune([Problem.from_sizes(8, 8, 48, "fp16")], families=["aten"], store=tmp_path / "s.sqlite",
                      out=tmp_path / "t.json", progress=False, in_process=True)  # (the table, not the worker)
    assert len(r.table.entries) == 2 and len(json.loads((tmp_path / "t.json").read_text())["entries"]) == 2


def test_out_onto_a_table_it_cannot_merge_fails_before_tuning(tmp_path, capsys):
    import gemmtune
    from gemmtune.table import LookupTable, provenance
    out, store = tmp_path / "t.json", tmp_path / "s.sqlite"
    out.write_text("{not json")
    assert _tune(tmp_path, "8x8x48:fp16") == 2
    assert "not valid JSON" in capsys.readouterr().err and not store.exists()  # nothing was measured
    h200 = LookupTable(provenance("NVIDIA H200", "9.0", "2.11", "3.6.0", gemmtune.__version__, "tuned"), {})
    h200.save(out)
    before = out.read_text()
    assert _tune(tmp_path, "8x8x48:fp16") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "holds a table made on 'NVIDIA H200'" in err and "--overwrite" in err
    assert out.read_text() == before
    from gemmtune.store import ResultStore
    with ResultStore(store) as db:
        assert db.count() == 0


def test_failed_candidates_say_why(capsys):
    from gemmtune.problem import Problem
    from gemmtune.tune import ShapeResult, TuneResult, failure_lines
    s = ShapeResult("x", "cli", Problem.from_sizes(4, 4, 4), None, None, None, 5, 5,
                    {"compile_error": 4, "wrong": 1}, {"compile_error": "CompilationError: no", "wrong": "rel err 3"})
    assert failure_lines(TuneResult([s], None, False, 0.0, 5, 0)) == [
        "x: failed 5: compile_error x4 (CompilationError: no), wrong x1 (rel err 3)"]


def test_a_triton_compile_error_is_summarized_by_its_error_not_its_location():
    """Triton's CompilationError starts with "at L:C:" and quotes the source; the summary line
    needs the error at its end."""
    from gemmtune.tune import reason_line
    reason = ("CompilationError: at 14:8:\n    b = tl.load(b_ptr)\n    acc += tl.dot(a, b)\n        ^\n"
              "AssertionError('Both operands must be same dtype. Got bf16 and fp16')")
    assert reason_line(reason) == ("CompilationError: at 14:8: ... AssertionError('Both operands must be same "
                                   "dtype. Got bf16 and fp16')")
    assert reason_line("RuntimeError: boom\nmore") == "RuntimeError: boom"
    assert reason_line("") == "" and len(reason_line("x" * 500)) == 200


def test_tune_prints_why_candidates_failed(tmp_path, capsys, monkeypatch):
    """The issue: every candidate failed and the summary said only 'failed 15'. Faults are
    injected through the worker's runner; the CLI's summary names each status, its count
    and its first reason."""
    import importlib
    gt = importlib.import_module("gemmtune.tune")  # the module: gemmtune.tune is also the function
    real = gt.tune
    faults = {"decompose_k:s2": "compile_error", "decompose_k:s4": "raise", "decompose_k:s8": "raise"}
    monkeypatch.setattr(gt, "tune", lambda *a, **kw: real(*a, runner="gemmtune.bench.faults:handle",
                                                         env={"GEMMTUNE_FAULTS": json.dumps(faults)}, **kw))
    rc = cli.main(["tune", "--shape", "16x16x1024:fp16", "--families", "decompose_k", "--store",
                   str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "t.json"), "-q"])
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("16x16x1024: failed")]
    assert rc == 0 and len(lines) == 1, out
    assert "compile_error x1 (" in lines[0] and "fails to compile" in lines[0]
    assert "error x2 (" in lines[0] and "injected fault" in lines[0]


def test_bench_model_command_passes_its_options(monkeypatch, tmp_path, capsys):
    from gemmtune import benchmodel
    seen = {}

    def fake_run(models, **kw):
        seen.update(kw, models=models)
        return {"models": [{"model": m} for m in models]}
    monkeypatch.setattr(benchmodel, "run", fake_run)
    rc = cli.main(["bench-model", "--models", "gpt2,minilm", "--phases", "decode_b1", "--modes", "eager,eager_patch",
                   "--out", str(tmp_path), "--tune", "default"])
    assert rc == 0
    assert seen["models"] == ["gpt2", "minilm"] and seen["phases"] == ["decode_b1"]
    assert seen["modes"] == ["eager", "eager_patch"] and seen["tune_kwargs"] == {"space": "default"}
    assert seen["eager_rounds"] is None
    assert cli.main(["bench-model", "--models", "gpt2", "--out", str(tmp_path), "--eager-rounds", "101"]) == 0
    assert seen["eager_rounds"] == 101
    with pytest.raises(SystemExit):
        cli.main(["bench-model", "--models", "gpt2", "--out", str(tmp_path), "--eager-rounds", "0"])
    assert "--eager-rounds" in capsys.readouterr().err


def test_doctests_of_the_cli_and_tune_modules():
    import doctest
    import importlib
    for name in ("gemmtune.cli", "gemmtune.cli.model", "gemmtune.cli.common", "gemmtune.tune", "gemmtune.shapes",
                 "gemmtune.tuning.plan", "gemmtune.tuning.options",
                 "gemmtune.tuning.executor", "gemmtune.tuning.recorder", "gemmtune.tuning.results"):
        mod = importlib.import_module(name)
        assert doctest.testmod(mod).failed == 0, name


def test_tune_refuses_paths_it_would_fail_on_only_after_the_run(tmp_path, capsys):
    """--summary or --out naming a directory crashed with a traceback once the whole run was done;
    --out naming the store replaced every measurement with the table (with --overwrite). Each is
    one line, rc 2, before anything is measured."""
    (tmp_path / "d").mkdir()
    store = str(tmp_path / "s.sqlite")
    for extra, needle in ((["--summary", str(tmp_path / "d")], "is a directory"),
                          (["--out", str(tmp_path / "d"), "--store", store], "is a directory"),
                          (["--out", store, "--store", store, "--overwrite"], "one file")):
        rc = cli.main(["tune", "--shape", "8x8x16:fp16", "--families", "aten", "-q", *extra])
        err = capsys.readouterr().err
        assert rc == 2 and needle in err and "Traceback" not in err, (extra, err)
    assert not (tmp_path / "s.sqlite").exists()


def test_tune_summary_never_replaces_the_store_or_a_table(tmp_path, capsys):
    """``--summary`` naming the results store replaced the SQLite file, every measurement in it,
    with the summary JSON after the run; naming --out replaced the table just merged (entries of
    earlier runs included), naming --table the user's input table. Each is refused, one line, rc 2,
    before anything is measured, and the files are as they were."""
    store, out, table = tmp_path / "s.sqlite", tmp_path / "t.json", tmp_path / "in.json"
    base = ["tune", "--shape", "8x8x16:fp16", "--families", "aten", "-q", "--in-process", "--store", str(store),
            "--out", str(out)]
    assert cli.main(base) == 0
    capsys.readouterr()
    table.write_text(out.read_text())
    before = {p: p.read_bytes() for p in (store, out, table)}
    for target in (store, out, table):
        rc, _, err = run([*base, "--table", str(table), "--summary", str(target)], capsys)
        assert rc == 2 and "--summary" in err and "Traceback" not in err, (target, err)
        assert len(err.strip().splitlines()) == 1, err
    assert {p: p.read_bytes() for p in (store, out, table)} == before


def test_file_errors_are_one_line_and_found_before_the_work(tmp_path, capsys):
    """A file that cannot be written was a traceback: --summary in a missing folder (after the
    whole run), capture --out naming a directory (after the capture), worker --serve in a missing
    folder. Each is one line naming the file, rc 2; tune's and capture's before any work."""
    (tmp_path / "d").mkdir()
    cases = [
        (["tune", "--shape", "8x8x16:fp16", "--families", "aten", "-q", "--store", str(tmp_path / "s.sqlite"),
          "--summary", str(tmp_path / "nowhere" / "s.json")], "does not exist"),
        (["capture", "--model", "tiny-llama", "--out", str(tmp_path / "d")], "is a directory"),
        (["worker", "--serve", str(tmp_path / "nowhere" / "w.sock")], str(tmp_path / "nowhere" / "w.sock.key")),
    ]
    for argv, needle in cases:
        rc, out, err = run(argv, capsys)
        assert rc == 2 and needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert not (tmp_path / "s.sqlite").exists()  # refused before the store was opened


@pytest.mark.skipif(not os.path.isdir("/proc/self"),
                    reason="needs Linux's /proc, a directory no process can create files in")
def test_tune_into_a_directory_it_cannot_write_stops_before_the_sweep(tmp_path, capsys):
    """``tune --out`` into a directory this process cannot create files in ran the whole sweep and
    then failed writing the table (session 31's audit). /proc refuses new files even to root, whom a
    chmod would not stop. One line, rc 2, nothing measured."""
    store = tmp_path / "s.sqlite"
    rc, out, err = run(["tune", "--shape", "8x8x16:fp16", "--families", "aten", "-q", "--store", str(store),
                        "--out", "/proc/gemmtune-table.json"], capsys)
    assert rc == 2 and "/proc is not writable" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and not store.exists()


def test_tune_over_a_read_only_table_is_refused_before_the_sweep(tmp_path, capsys):
    """A table made read-only (chmod 444) was replaced all the same by the atomic rename (it needs
    only the directory writable), its entries gone with --overwrite. Refused by its mode bits
    (root, who runs this, may write anything), before anything is measured; the table unchanged."""
    table = tmp_path / "t.json"
    assert run(["tune", "--shape", "8x8x16:fp16", "--families", "aten", "-q", "--in-process", "--store",
                str(tmp_path / "a.sqlite"), "--out", str(table)], capsys)[0] == 0  # the table to refuse
    before = table.read_bytes()
    table.chmod(0o444)
    store = tmp_path / "s.sqlite"
    rc, out, err = run(["tune", "--shape", "8x8x24:fp16", "--families", "aten", "-q", "--store", str(store),
                        "--out", str(table), "--overwrite"], capsys)
    assert rc == 2 and "read-only (mode 444)" in err and "Traceback" not in err, err
    assert table.read_bytes() == before and not store.exists()


def test_capture_device_is_checked_before_the_model_is_built(tmp_path, capsys, monkeypatch):
    """``capture --device foo`` was torch's traceback listing every device type, after the
    argument parsing; ``--device h100`` (what tune and space take) the same. One line, rc 2."""
    monkeypatch.chdir(tmp_path)
    for dev, needle in (("foo", "not a torch device"), ("h100", "names a GPU model, which tune and space take"),
                        ("mps", "not mps")):
        rc, out, err = run(["capture", "--model", "tiny-llama", "--device", dev], capsys)
        assert rc == 2 and needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, (dev, err)
    import torch
    if not torch.cuda.is_available():
        rc, out, err = run(["capture", "--model", "tiny-llama", "--device", "cuda:1"], capsys)
        assert rc == 2 and "no CUDA GPU is visible" in err
    assert not list(tmp_path.iterdir())


def test_interrupt_message_promises_a_resume_only_where_there_is_one(monkeypatch, capsys):
    """Ctrl-C said 'every finished measurement is in the store, rerun to resume' for every
    command, a capture or a lut show included."""
    def interrupted(args):
        raise KeyboardInterrupt

    parser_fn = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda: _with_fn(parser_fn(), "space", interrupted))
    rc, out, err = run(["space", "--shape", "8x8x8", "--families", "aten"], capsys)
    assert rc == 130 and "store" not in err and "interrupted" in err


def test_sigterm_in_a_resumable_command_says_what_was_kept(monkeypatch, capsys):
    """A batch scheduler's time limit sends SIGTERM, whose default action ended `tune` with no word
    of what was kept. It now takes Ctrl-C's path: the same clean-up and message, exit 143; the
    handler is put back after, and other commands keep the default action."""
    import os
    import signal
    seen = {}

    def terminated(args):
        seen["handler"] = signal.getsignal(signal.SIGTERM)
        if seen["handler"] is not cli._raise_terminated:
            return 0  # someone else's handler: left in place (and not ours to trigger)
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not interrupt")  # (delivered before the next bytecode)

    def plain(args):
        seen["other"] = signal.getsignal(signal.SIGTERM)
        return 0

    parser_fn = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda: _with_fn(_with_fn(parser_fn(), "tune", terminated),
                                                               "space", plain))
    # the default action, as in a shell (pytest-xdist's workers handle SIGTERM themselves, and a
    # handler already there is left alone)
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        rc, out, err = run(["tune", "--shape", "8x8x8", "--families", "aten"], capsys)
        assert rc == 143 and "interrupted (SIGTERM); every finished measurement is in the store" in err, err
        assert seen["handler"] is cli._raise_terminated and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        assert run(["space", "--shape", "8x8x8", "--families", "aten"], capsys)[0] == 0
        assert seen["other"] == signal.SIG_DFL
        def theirs(signum, frame):
            pass
        signal.signal(signal.SIGTERM, theirs)
        assert run(["tune", "--shape", "8x8x8", "--families", "aten"], capsys)[0] == 0
        assert seen["handler"] is theirs and signal.getsignal(signal.SIGTERM) is theirs
    finally:
        signal.signal(signal.SIGTERM, before)


def _with_fn(parser, cmd, fn):
    import argparse
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices[cmd].set_defaults(fn=fn)
    return parser


@pytest.mark.parametrize("cmd", [["space"], ["predict", "--top", "1"], ["tune", "-q"]])
def test_families_is_one_list_format_in_every_command(cmd, tmp_path, capsys, monkeypatch):
    """`--families "triton_mm, aten"` worked in space but was 'unknown kernel family ' aten'' in
    tune; a trailing comma made space list triton_mm's configs and then fail; `--families ""`
    tuned every family. Now: spaces and a trailing comma are fine everywhere, an empty list is an
    error, and every name is checked before anything is printed or measured."""
    monkeypatch.chdir(tmp_path)
    base = cmd + ["--shape", "8x8x16:fp16"]
    for bad, needle in (("triton_mm,nosuch", "unknown kernel family 'nosuch'"), (",", "names no family"),
                        ("", "names no family")):
        rc, out, err = run(base + ["--families", bad], capsys)
        assert rc == 2 and needle in err and out == "" and "Traceback" not in err, (bad, out, err)
    assert not (tmp_path / "gemmtune.sqlite").exists()
    if cmd[0] != "tune":  # tune's parse is the same helper; space and predict run in no time
        rc, out, err = run(base + ["--families", " aten , "], capsys)
        assert rc == 0 and "aten" in out, err


def test_family_help_names_every_family(capsys):
    from gemmtune import kernels
    with pytest.raises(SystemExit):
        cli.main(["tune", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert all(f in out for f in kernels.family_names()), out


def test_tune_takes_the_old_family_spelling_as_space_and_predict_do(capsys):
    """The README lists --family as an old spelling that still works; tune refused it
    ('unrecognized arguments') while space and predict took it."""
    rc, out, err = run(["tune", "--shape", "8x8x16:fp16", "--family", "nosuch"], capsys)
    assert rc == 2 and "--family is deprecated" in err and "unknown kernel family 'nosuch'" in err


def test_a_bad_out_table_says_it_is_the_one_merged_into_and_how_to_replace_it(tmp_path, capsys):
    """A corrupt --out file failed with 'bad.json: not valid JSON' only: nothing said that it is
    the table the run merges into, nor that --overwrite replaces it. An fp8 --shape said
    "use op='scaled_mm'", the Python spelling."""
    bad = tmp_path / "bad.json"
    bad.write_text("not json{")
    rc, out, err = run(["tune", "--shape", "8x8x16:fp16", "--families", "aten", "-q", "--out", str(bad),
                        "--store", str(tmp_path / "s.sqlite")], capsys)
    assert rc == 2 and "not valid JSON" in err and "--overwrite" in err, err
    assert not (tmp_path / "s.sqlite").exists()  # before anything was measured
    rc, out, err = run(["tune", "--shape", "8x8x16:e4m3"], capsys)
    assert rc == 2 and "--op scaled_mm" in err, err


def test_gemmtunes_own_warnings_are_one_line(capsys, monkeypatch):
    """predict --device h100 on another triton printed the ModelWarning with its file, line and
    the source line 'return load_model(path, dev, ...)' under it. gemmtune's warnings are one
    line now; the formatter is put back after the command."""
    import warnings

    before = warnings.formatwarning

    def warn_and_list(args):
        from gemmtune.model.errors import ModelWarning
        warnings.warn("no learned model for this GPU", ModelWarning, stacklevel=1)
        print(warnings.formatwarning("x", UserWarning, "lib.py", 1, "src line"), end="")
        return 0

    parser_fn = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda: _with_fn(parser_fn(), "space", warn_and_list))
    import sys
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        # What Python shows a warning with outside pytest (which records them instead).
        warnings.showwarning = lambda m, c, f, n, file=None, line=None: sys.stderr.write(
            warnings.formatwarning(m, c, f, n, line))
        rc, out, err = run(["space", "--shape", "8x8x8", "--families", "aten"], capsys)
    assert rc == 0 and err == "gemmtune: warning: no learned model for this GPU\n", err
    assert "lib.py:1: UserWarning: x" in out  # another library's warning keeps its usual form
    assert warnings.formatwarning is before


def test_space_and_predict_take_the_op_and_bs_layout(capsys):
    """space and predict look at bmm, addmm and scaled_mm problems and at a column-major B (the
    Linear case), as tune does; they took only a row-major mm before."""
    from gemmtune import space
    from gemmtune.problem import Problem

    rc, out, err = run(["space", "--shape", "4x64x96x128:fp16", "--op", "bmm", "--families", "triton_mm"], capsys)
    bmm = Problem.from_sizes(64, 96, 128, "fp16", op="bmm", batch=4)
    assert rc == 0 and out.split() == [c.id for c in space(bmm, "triton_mm")], err
    # B column-major with an odd N: aligned there (its leading dim is K), unaligned row-major.
    rc, out, err = run(["space", "--shape", "8x4095x4096:fp16", "--layout-b", "col", "--families", "persistent_tma"],
                       capsys)
    col = Problem.from_sizes(8, 4095, 4096, "fp16", layout_b="col")
    assert col.aligned_b and rc == 0 and out.split() == [c.id for c in space(col, "persistent_tma")], err
    assert out.split() and not space(Problem.from_sizes(8, 4095, 4096, "fp16"), "persistent_tma")  # TMA: aligned only
    rc, out, err = run(["predict", "--shape", "64x256x512", "--op", "scaled_mm", "--top", "3"], capsys)
    assert rc == 0 and "e4m3" in out + err, out + err
    rc, out, err = run(["space", "--shape", "64x256x512:bf16", "--op", "bmm", "--families", "aten"], capsys)
    assert rc == 2 and "bad bmm shape" in err


def test_an_unknown_device_names_the_short_names_help_gives(capsys):
    rc, _, err = run(["space", "--shape", "8x8x8", "--families", "aten", "--device", "h300"], capsys)
    assert rc == 2 and "built-in devices: h100, h200, a100 (NVIDIA H100" in err


def test_single_value_options_and_free_text_are_checked(capsys):
    """Audit finds: ``space --shape`` given twice listed the last shape's space silently, ``predict
    --triton abc`` looked for a model of triton 'abc', ``capture --group ""`` (or one with a comma)
    wrote a suite whose group column was empty or split. Each is one line, rc 2."""
    cases = [(["space", "--families", "aten", "--shape", "8x8x16:fp16", "--shape", "16x16x16:fp16"], "given twice"),
             (["inspect", "aten", "--shape", "8x8x16:fp16", "--shape", "9x9x9"], "given twice"),
             (["predict", "--shape", "8x8x16:fp16", "--triton", "abc"], "not a version"),
             (["capture", "--model", "tiny-llama", "--group", ""], "non-empty name"),
             (["capture", "--model", "tiny-llama", "--group", "a,b"], "without commas")]
    for argv, needle in cases:
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and needle in err and len(err.strip().splitlines()) == 1, (argv, err)
    rc, out, err = run(["space", "--families", "aten", "--shape", "8x8x16:fp16"], capsys)
    assert rc == 0 and out.strip() == "aten"


def test_inputs_are_checked_before_they_are_opened_and_errors_have_one_form(tmp_path, capsys, monkeypatch):
    """Audit finds (session 36): ``collect --dry-run --resume-from MISSING.sqlite`` opened the
    missing file as a store, which created an empty one there, and reported every candidate left,
    exit 0. A folder given for a file: ``predict --eval``/``train --store`` said 'no such file',
    ``worker --serve`` 'another server may be running there'. ``bench-model --minilm-dir`` was
    checked only when minilm's turn came, after the models before it. collect's own usage errors
    were bare lines without 'gemmtune collect: error:'. Each is now that one line, rc 2."""
    missing, folder = tmp_path / "missing.sqlite", tmp_path / "d"
    folder.mkdir()

    def ran(*a, **kw):
        raise AssertionError("bench-model ran minilm with a --minilm-dir that does not exist")

    import importlib
    import importlib.util
    # (the module, not gemmtune.benchmodel.run, the function the package exports under its name)
    monkeypatch.setattr(importlib.import_module("gemmtune.benchmodel.run"), "bench_minilm", ran)
    cases = [
        (["collect", "--dry-run", "--limit-shapes", "1", "--dtypes", "bf16", "--resume-from", str(missing)],
         f"gemmtune collect: error: --resume-from {missing}: no such file"),
        (["collect", "--dry-run", "--resume-from", str(folder)], "it is a directory"),
        (["collect", "--dry-run", "--gpus", "0", "--cluster", "local:1"],
         "gemmtune collect: error: --cluster runs one collector"),
        (["predict", "--eval", str(folder)], f"cannot read {folder}: it is a directory"),
        (["train", "--store", str(folder)], f"cannot read {folder}: it is a directory"),
        (["worker", "--serve", str(folder)], f"{folder} is a directory; give a socket path"),
        # Without transformers (gemmtune[models]; the torch 2.11 audit venv has none) bench-model
        # stops, in the same one-line form, on that before it reads --models: the same rc 2 line.
        (["bench-model", "--models", "minilm", "--minilm-dir", str(tmp_path / "nowhere"), "--out", str(tmp_path / "bm")],
         "--minilm-dir" if importlib.util.find_spec("transformers") else "bench-model needs transformers"),
    ]
    for argv, needle in cases:
        rc, out, err = run(argv, capsys)
        assert rc == 2 and needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert not missing.exists() and not list(folder.iterdir())


def test_progress_lines_reach_a_pipe_as_they_are_printed(monkeypatch):
    """Piped or redirected, stdout was block-buffered: bench-model's per-mode lines and collect
    --dry-run's per-phase counts came out only at exit (or never, when a time limit killed the
    run). main() line-buffers stdout for the command and puts the setting back after it."""
    import io
    import sys

    seen = {}

    def progress(args):
        print("shape 1 of 9 done")
        seen["written"] = sys.stdout.buffer.getvalue()  # what a `| tee log` has read so far
        return 0

    pipe = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", line_buffering=False)
    monkeypatch.setattr(sys, "stdout", pipe)
    parser_fn = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda: _with_fn(parser_fn(), "space", progress))
    assert cli.main(["space", "--shape", "8x8x8", "--families", "aten"]) == 0
    assert seen["written"] == b"shape 1 of 9 done\n" and pipe.line_buffering is False
