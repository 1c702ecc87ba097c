"""The CLI hunt (CPU): a demanding user who reads one subcommand's help and assumes the next works
alike. Each test is one defect found there: an option taken and silently not used, one spelling
accepted by one command and refused by its neighbour, an entry point that did not start."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli

from gemmtune import cli

run = run_cli  # conftest's: the CLI's exit code, stdout and stderr
SAMPLE = str(Path(__file__).parent / "data" / "model_sample.csv.gz")  # a GPU results store (CSV export)


def test_python_dash_m_gemmtune_runs_the_cli(monkeypatch, capsys):
    """``python -m gemmtune --version`` said "No module named gemmtune.__main__; 'gemmtune' is a
    package and cannot be directly executed": only ``python -m gemmtune.cli`` worked."""
    import runpy
    import sys

    monkeypatch.setattr(sys, "argv", ["gemmtune", "--version"])
    with pytest.raises(SystemExit) as e:
        runpy.run_module("gemmtune", run_name="__main__", alter_sys=False)
    assert e.value.code == 0 and capsys.readouterr().out.startswith("gemmtune ")


@pytest.mark.parametrize("extra,needle", [
    (["--shape", "8x8x8"], "--shape"),
    (["--top", "3"], "--top"),
    (["--triton", "3.6"], "--triton"),
    (["--families", "aten"], "--families"),
    (["--op", "bmm"], "--op"),
])
def test_predict_eval_refuses_the_ranking_options_it_does_not_read(extra, needle, capsys):
    """``predict --eval STORE --shape X --top 3`` scored the model on every problem of the store and
    dropped --shape, --top, --families, --op, --layout-b, --space and --triton without a word
    (exit 0): the evaluation reads --model and --device alone, and the store's own triton."""
    rc, out, err = run(["predict", "--eval", SAMPLE, *extra], capsys)
    assert rc == 2 and needle in err and "--eval" in err and "Traceback" not in err, err
    assert out == ""


def test_tune_fast_with_space_default_is_refused(tmp_path, capsys):
    """``tune --fast --space default`` searched the exhaustive space (what --fast means) and dropped
    --space default without a word."""
    store, table = tmp_path / "s.sqlite", tmp_path / "t.json"
    rc, out, err = run(["tune", "--shape", "8x8x8", "--families", "aten", "--fast", "--space", "default",
                        "--store", str(store), "--out", str(table), "-q"], capsys)
    assert rc == 2 and "--fast" in err and "--space default" in err, err
    assert not store.exists() and not table.exists()


def test_tune_suite_takes_a_preset_name_as_bench_and_report_do(tmp_path, monkeypatch):
    """bench's and report's --suite take a bundled preset's name (``--suite bmm``); tune's said
    "cannot read shape suite bmm: No such file or directory". A file of that name still wins."""
    from gemmtune.cli.common import shapes_of
    from gemmtune.shapes import preset

    monkeypatch.chdir(tmp_path)
    args = cli.build_parser().parse_args(["tune", "--suite", "bmm", "--op", "bmm"])
    assert [s.problem for s in shapes_of(args)] == [s.problem for s in preset("bmm", op="bmm")]
    (tmp_path / "smoke").write_text("group,name,M,N,K,dtype\ng,x,8,8,8,fp16\n")
    args = cli.build_parser().parse_args(["tune", "--suite", "smoke"])
    assert [s.name for s in shapes_of(args)] == ["x"]


def test_bench_takes_preset_as_tune_does(capsys):
    """tune names a bundled suite --preset; bench refused that spelling ("unrecognized arguments:
    --preset"), taking it only as --suite. Both spellings now work, and one of each is refused."""
    args = cli.build_parser().parse_args(["bench", "--preset", "bmm"])
    assert args.suite == "bmm"
    with pytest.raises(SystemExit) as e:
        cli.build_parser().parse_args(["bench", "--preset", "bmm", "--suite", "public"])
    assert e.value.code == 2 and "given twice" in capsys.readouterr().err


@pytest.mark.parametrize("extra,needle", [
    (["--cv", "2", "--out", "OUT"], "--out"),
    (["--cv", "2", "--test-fraction", "0.5"], "--test-fraction"),
    (["--policies", "pol", "--out", "OUT"], "--out"),
])
def test_train_refuses_out_and_test_fraction_where_the_mode_does_not_read_them(extra, needle, tmp_path, capsys,
                                                                               monkeypatch):
    """``train --cv 2 --out m.json`` cross-validated, printed its table and wrote no m.json (exit 0);
    ``--cv 2 --test-fraction 0.5`` ignored the fraction (the folds split the shapes)."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "m.json"
    argv = ["train", "--store", SAMPLE, *[str(out) if a == "OUT" else a for a in extra]]
    rc, stdout, err = run(argv, capsys)
    assert rc == 2 and needle in err and "Traceback" not in err, err
    assert not out.exists() and not (tmp_path / "pol").exists()


@pytest.mark.parametrize("argv,want", [
    (["--shape", "8x8x6:fp16", "--layout-b", "col"], "mm:M8-N8-K6:fp16->fp16:row.u/col.u"),
    (["--shape", "8x6x8:fp16", "--layout-b", "col"], "mm:M8-N6-K8:fp16->fp16:row.a/col.a"),
    (["--op", "bmm", "--shape", "4x8x8x6:fp16", "--layout-b", "bcast_col"], "bmm:B4-M8-N8-K6:fp16->fp16:row.u/bcast_col.u"),
])
def test_inspect_layout_b_sets_bs_alignment_as_space_does(argv, want, monkeypatch, capsys):
    """``inspect --layout-b col`` changed B's layout and kept the alignment of a row-major B (its
    leading dim N): 8x8x6:fp16 compiled for an aligned B whose leading dim is K=6 (12 bytes), and
    8x6x8 for an unaligned one. space and predict (problem_of) had it right."""
    import gemmtune.kernelinfo as ki

    seen = []
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(ki, "inspect_choice", lambda cid, p, arch: seen.append(p) or [])
    rc, out, err = run(["inspect", "triton_mm:BM16-BN16-BK16-S1-W2-G8", *argv], capsys)
    assert rc == 0 and [p.key for p in seen] == [want], (err, seen)


def test_report_run_summary_suite_is_read_by_file_not_by_its_suffix(tmp_path, capsys):
    """``report --store S --run-summary R --suite shapes.txt`` (or ``S.CSV``) said "unknown preset
    'shapes.txt'": a suite was a file only when its name ended in '.csv'. A file of that name is
    read, as tune's and bench's --suite read it; a preset's name still names the preset."""
    import json

    from test_firsthour_hunt import make_store

    store = make_store(tmp_path / "s.sqlite")
    suite = tmp_path / "shapes.txt"
    suite.write_text("group,name,M,N,K,dtype\ndecode,tiny,16,16,16,fp16\n")
    rc, out, err = run(["report", "--store", str(store), "--run-summary", str(tmp_path / "r.json"),
                        "--suite", str(suite)], capsys)
    assert rc == 0, err
    rows = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert [(r["group"], r["name"]) for r in rows] == [("decode", "tiny")]


@pytest.mark.parametrize("opt", ["--workers", "--compile-workers"])
def test_tune_in_process_refuses_worker_counts_it_does_not_start(opt, tmp_path, capsys):
    """``tune --in-process --workers 4`` (or ``--compile-workers 8``) measured in this process,
    started neither, and said nothing of the count (exit 0)."""
    store, table = tmp_path / "s.sqlite", tmp_path / "t.json"
    rc, out, err = run(["tune", "--shape", "8x8x8", "--families", "aten", "--in-process", opt, "2",
                        "--store", str(store), "--out", str(table), "-q"], capsys)
    assert rc == 2 and opt in err and "--in-process" in err, err
    assert not store.exists() and not table.exists()


def test_readme_benchmark_space_k_is_the_models_k_best_not_per_family():
    """README said ``tune --benchmark-space 5`` benchmarks the "model's top-5 per family"; it
    benchmarks the model's 5 best over all the families searched (plus cuBLAS), as tune's help
    says ("the performance model's top K"): with the ranker's 2 best both of one family, k=2
    picks no other family's."""
    from gemmtune.device import DeviceInfo
    from gemmtune.problem import Problem
    from gemmtune.tuning.plan import candidates, select_by_model

    class ByIndex:
        def predict(self, problem, choices):
            return list(range(len(choices)))

    p = Problem.from_sizes(64, 64, 4096, "bf16")
    cands = candidates(p, ["decompose_k", "splitk"], "default", DeviceInfo.lookup("h100"))
    picked = [c.id.partition(":")[0] for c in select_by_model(p, cands, 2, ByIndex()) if c.id != "aten"]
    assert picked == ["decompose_k", "decompose_k"]
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    line = next(x for x in readme.splitlines() if "--benchmark-space 5" in x)
    assert "per family" not in line, line


@pytest.mark.parametrize("argv,needle", [
    (["tune", "--shape", "8x8x8", "--families", "aten", "--out", ""], "--out is empty"),
    (["tune", "--shape", "8x8x8", "--families", "aten", "--store", ""], "--store is empty"),
    (["tune", "--shape", "8x8x8", "--families", "aten", "--table", ""], "--table is empty"),
    (["report", "--store", ""], "--store is empty"),
    (["report", "--trace", ""], "--trace is empty"),
    (["predict", "--eval", ""], "--eval is empty"),
    (["train", "--store", SAMPLE, "--out", ""], "--out is empty"),
    (["bench", "--suite", ""], "--suite is empty"),
    (["capture", "--model", "tiny-llama", "--device", "meta", "--out", ""], "--out is empty"),
])
def test_an_empty_path_option_is_refused_by_name(argv, needle, tmp_path, capsys, monkeypatch):
    """An empty path ("--out $OUT" with OUT unset) was read as the working directory or as the
    option not given: tune said "cannot write the table to : it is a directory", report --store ""
    "give a bench JSON to render", predict --eval "" "give --shape", bench --suite "" ran the public
    suite, and capture --out "" ran the whole capture before ".: Device or resource busy". One line
    naming the option, exit 2, as tune's --suite "" already had."""
    monkeypatch.chdir(tmp_path)
    rc, out, err = run(argv, capsys)
    assert rc == 2 and needle in err and "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


def test_train_compare_refuses_kind_it_does_not_read(tmp_path, capsys):
    """``train --compare DIR --kind mlp`` trained --kinds' default (gbt, lgbm_rank) and no MLP, and
    said nothing of --kind (exit 0); --compare reads --kinds."""
    rc, out, err = run(["train", "--store", SAMPLE, "--compare", str(tmp_path / "cmp"), "--kind", "mlp"], capsys)
    assert rc == 2 and "--kind mlp" in err and "--kinds" in err, err
    assert not (tmp_path / "cmp").exists()


def test_bench_names_a_bad_deadline_variable(monkeypatch, capsys):
    """GEMMTUNE_BENCH_DEADLINE=tomorrow (the deprecated spelling of --deadline) failed with
    "could not convert string to float: 'tomorrow'", naming neither the variable nor the option."""
    import torch

    from gemmtune.bench import suite

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(suite, "run", lambda *a, **k: pytest.fail("ran with a bad deadline"))
    monkeypatch.setenv("GEMMTUNE_BENCH_DEADLINE", "tomorrow")
    rc, out, err = run(["bench", "--suite", "smoke", "--skip-inductor", "--skip-tunableop"], capsys)
    assert rc == 2 and "GEMMTUNE_BENCH_DEADLINE='tomorrow'" in err, err
