"""The command line a new user meets: clear one-line errors and non-zero exits for impossible
input, one vocabulary across subcommands (old spellings still accepted), --version, defaults in
every help, and tables that a second run merges into instead of destroying."""

from __future__ import annotations

import json

import pytest

from gemmtune import cli


def run(argv, capsys):
    rc = cli.main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("argv,msg", [
    (["tune", "--shape", "0x4x4"], "M must be >= 1"),
    (["tune", "--shape", "4x0x4", "--shape", "8x8x8"], "N must be >= 1"),
    (["tune", "--shape", "-1x4x4"], "bad shape '-1x4x4'"),           # a value, not an option
    (["tune", "--shape", "99999999999x4x4"], "GiB, more than the"),
    (["predict", "--shape", "0x4x4:f16"], "M must be >= 1"),
    (["demo", "--size", "64x48"], "expected MxNxK"),
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
])
def test_bad_numbers_are_refused_by_the_parser(argv, msg, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2 and msg in capsys.readouterr().err


def test_version_and_missing_command(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("gemmtune ")
    rc, out, err = run([], capsys)
    assert rc == 2 and "give a command: tune, demo, space" in err and "required: cmd" not in err


def test_help_shows_defaults_and_a_real_description(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    top = capsys.readouterr().out
    assert "The ``gemmtune`` command line" not in top and "find, verify and serve" in top
    with pytest.raises(SystemExit):
        cli.main(["tune", "--help"])
    h = " ".join(capsys.readouterr().out.split())
    assert "(default: gemmtune.sqlite)" in h and "(default: 120.0)" in h and "--overwrite" in h


def test_old_spellings_still_work(capsys):
    rc, out, err = run(["space", "--shape", "64x64x64:fp16", "--family", "aten", "--kind", "exhaustive"], capsys)
    assert rc == 0 and out.strip() == "aten"
    rc, out, err = run(["space", "--shape", "32x32x4096:fp16", "--families", "aten,decompose_k",
                        "--space", "default"], capsys)
    assert rc == 0 and "aten" in out and "decompose_k:s2" in out
    rc, out, err = run(["tune", "--preset", "smoke", "--group", "nosuch"], capsys)
    assert rc == 2 and "check --groups" in err


def _tune(tmp_path, shape, *extra):
    return cli.main(["tune", "--shape", shape, "--families", "aten", "--store", str(tmp_path / "s.sqlite"),
                     "--out", str(tmp_path / "t.json"), "-q", *extra])


def test_out_merges_into_an_existing_table_and_overwrite_replaces(tmp_path, capsys):
    assert _tune(tmp_path, "16x24x32:fp16") == 0
    assert _tune(tmp_path, "8x8x48:fp16") == 0
    entries = json.loads((tmp_path / "t.json").read_text())["entries"]
    assert len(entries) == 2  # the second run kept the first run's entry
    assert _tune(tmp_path, "8x8x48:fp16", "--overwrite") == 0
    assert len(json.loads((tmp_path / "t.json").read_text())["entries"]) == 1


def test_failed_candidates_say_why(capsys):
    from gemmtune.problem import Problem
    from gemmtune.tune import ShapeResult, TuneResult, failure_lines
    s = ShapeResult("x", "cli", Problem.from_sizes(4, 4, 4), None, None, None, 5, 5,
                    {"compile_error": 4, "wrong": 1}, {"compile_error": "CompilationError: no", "wrong": "rel err 3"})
    assert failure_lines(TuneResult([s], None, False, 0.0, 5, 0)) == [
        "x: failed 5: compile_error x4 (CompilationError: no), wrong x1 (rel err 3)"]


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
