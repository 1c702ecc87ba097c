"""The bench hunt (CPU): `gemmtune bench` and its report run on a suite we never saw, as an evaluator
would. Each test is one defect found there: a report that misleads (a total row counting a group
twice, targets of groups the run has none of, a mode that ran called "not run", a table whose
columns shift, a tuning time lost to a duplicated problem, a partial run that reads as finished),
files replaced without consent (a second run's JSON, a merged report, a --ceilings-file) or a
traceback where one line was due. The GPU parts are faked as in test_bench."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from gemmtune import cli, report
from gemmtune.bench import modes as bench_modes
from gemmtune.bench import suite as bench_suite
from gemmtune.problem import Problem
from gemmtune.shapes import Shape

FIXTURE = Path(__file__).parent / "data" / "bench_fixture.json"


@pytest.fixture
def fake_gpu(monkeypatch):
    """bench.suite.run on the CPU: a GPU (H100) said to be there, the ceilings, the tuning phase,
    TunableOp and each shape's measurement faked. ``stop``: shape names whose measurement is
    interrupted (KeyboardInterrupt, as Ctrl-C or bench_gpu.sh's SIGINT)."""
    from gemmtune.device import DeviceInfo

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(DeviceInfo, "from_torch", classmethod(lambda cls, *a, **k: DeviceInfo.lookup("H100")))
    monkeypatch.setattr(bench_suite, "measure_ceilings", lambda timer: {"copy": {"gbps": 1.0}, "read": None, "mm": {}})
    monkeypatch.setattr(bench_suite, "tune_phase", lambda *a, **k: {"notes": [], "modes": {}, "tuned": {}, "skipped": {},
                                                                  "extra_s": {}, "errors": {}})
    state = SimpleNamespace(stop=set(), methods={})

    def measure_shape(shape, *a, **k):
        if shape.name in state.stop:
            raise KeyboardInterrupt
        p = shape.problem
        return {"group": shape.group, "name": shape.name, "key": p.key, "m": p.m, "n": p.n, "k": p.k, "batch": 1,
                "dtype": p.dtype, "floor_ms": None, "cublas": {"status": "ok", "kernel": {"ms": 1.0, "spread": 0.0}},
                "methods": state.methods.get(shape.name, {})}

    monkeypatch.setattr(bench_suite, "measure_shape", measure_shape)

    state.said = []

    def run(shapes, out_dir, **kw):
        return bench_suite.run(shapes, out_dir=out_dir, render=False, log=state.said.append, skip_inductor=True,
                               skip_tunableop=True, **kw)
    state.run = run
    return state


def _shapes(*names, group="mine"):
    return [Shape(group, n, Problem.from_sizes(8 + i, 16, 32, "fp16")) for i, n in enumerate(names)]


def _csv(tmp_path, rows: str, header: str = "group,name,M,N,K,dtype") -> str:
    path = tmp_path / "hidden.csv"
    path.write_text(header + "\n" + rows)
    return str(path)


@pytest.fixture
def fake_bench_command(monkeypatch):
    """`gemmtune bench` up to bench.suite.run, which records what it was given."""
    seen = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(bench_suite, "run", lambda shapes, **kw: seen.update(kw, shapes=shapes) or Path("x.json"))
    return seen


# ------------------------------------------------------------------ files replaced, partial runs
def test_a_second_run_into_the_same_out_keeps_the_first_runs_json(fake_gpu, tmp_path):
    """The JSON's name is <date>-<gpu>-<versions>[-groups]-bench.json: a second run the same day
    (the public suite after a hidden one: --suite is not in the name; or a rerun after Ctrl-C)
    wrote over the first run's JSON and report."""
    first = fake_gpu.run(_shapes("h1", "h2"), tmp_path)
    second = fake_gpu.run(_shapes("p1"), tmp_path)
    assert first != second
    assert [s["name"] for s in report.load_bench(first)["shapes"]] == ["h1", "h2"]
    assert [s["name"] for s in report.load_bench(second)["shapes"]] == ["p1"]
    assert second.name.endswith(f"-t{report.load_bench(second)['header']['date'][11:19].replace(':', '')}-bench.json")
    assert sorted([first.name, second.name]) == [first.name, second.name]  # the later run is listed last


def test_an_interrupted_run_says_which_shapes_it_did_not_measure(fake_gpu, tmp_path):
    """Ctrl-C (or bench_gpu.sh's SIGINT at its deadline) kept the finished shapes in the JSON, but
    nothing in it said the run had stopped: its report read as a finished run of fewer shapes,
    groups and geomeans silently partial (the deadline, by contrast, notes the shapes left out)."""
    fake_gpu.stop = {"b"}
    with pytest.raises(KeyboardInterrupt):
        fake_gpu.run(_shapes("a", "b", "c"), tmp_path)
    [path] = tmp_path.glob("*-bench.json")
    doc = report.load_bench(path)
    assert [s["name"] for s in doc["shapes"]] == ["a"]
    assert doc["header"]["unmeasured"] == ["b", "c"]
    # and the run says where they are (the command's own line was only "gemmtune bench: interrupted")
    assert fake_gpu.said[-1].startswith(f"interrupted: 1 of 3 shapes measured, in {path} (`gemmtune report {path}`")
    md = report.render_markdown(doc)
    assert "2 of 3 shapes not measured" in md and "b, c" in md
    # A run that finishes says nothing of the kind.
    fake_gpu.stop = set()
    done = report.load_bench(fake_gpu.run(_shapes("a", "b", "c"), tmp_path))
    assert "unmeasured" not in done["header"] and not any("not measured" in n for n in done["notes"])


def test_a_peer_whose_output_held_nan_does_not_stop_the_run(fake_gpu, tmp_path):
    """verify.compare gives rel_err inf where an output holds NaN or inf (or has another shape), and
    compile_inductor and TunableOp keep it in their 'wrong' record: the JSON, written with
    allow_nan=False after every shape, raised ValueError there and the run stopped, that shape and
    every later one unmeasured and no report written."""
    import math

    from gemmtune.verify import compare

    nan_out = compare(torch.full((2, 2), math.nan), torch.ones(2, 2, dtype=torch.float64), 1e-2)
    assert nan_out.rel_err == math.inf  # what compile_inductor puts in its record
    fake_gpu.methods["a"] = {"inductor": {"status": "wrong", "reason": nan_out.reason, "tune_s": 3.0,
                                          "choice": "aten", "rel_err": nan_out.rel_err}}
    doc = report.load_bench(fake_gpu.run(_shapes("a", "b"), tmp_path))
    assert [s["name"] for s in doc["shapes"]] == ["a", "b"]
    assert doc["shapes"][0]["methods"]["inductor"]["rel_err"] is None
    assert "wrong: 4 of 4 outputs are NaN or inf" in report.render_markdown(doc)


def test_a_ceilings_file_that_holds_something_else_is_not_overwritten(fake_gpu, tmp_path):
    """--ceilings-file FILE: ceilings read from FILE when it holds this GPU's, else measured and
    written to FILE, whatever FILE held (a suite CSV or a bench JSON given by mistake)."""
    suite = Path(_csv(tmp_path, "g,a,8,8,8,fp16\n"))
    before = suite.read_text()
    with pytest.raises(ValueError, match="ceilings-file .* holds something other than ceilings"):
        fake_gpu.run(_shapes("a"), tmp_path / "out", ceilings_file=suite)
    assert suite.read_text() == before and not (tmp_path / "out").exists()
    # an earlier run's ceilings file (another GPU's too) is what the option is for
    other = tmp_path / "c.json"
    bench_suite.save_ceilings(other, "NVIDIA H200", {"copy": {"gbps": 2.0}, "mm": {}})
    fake_gpu.run(_shapes("a"), tmp_path / "out", ceilings_file=other)
    assert json.loads(other.read_text())["device_name"] == "NVIDIA H100 80GB HBM3"


def test_merge_does_not_overwrite_a_full_run_of_the_same_name(tmp_path, capsys):
    """`gemmtune report --merge A B --out DIR` names the merged JSON as a full run (no groups) of
    its date: a full run of that day in DIR was replaced without a word."""
    doc = report.load_bench(FIXTURE)
    a, b = copy.deepcopy(doc), copy.deepcopy(doc)
    a["shapes"], b["shapes"] = doc["shapes"][:5], doc["shapes"][5:]
    a["header"]["groups"], b["header"]["groups"] = ["x"], ["y"]
    report.save_bench(a, tmp_path / "a-bench.json")
    report.save_bench(b, tmp_path / "b-bench.json")
    full = tmp_path / report.bench_filename(report.merge_bench([a, b])["header"])
    full.write_text('{"the": "full run"}')
    assert cli.main(["report", "--merge", str(tmp_path / "a-bench.json"), str(tmp_path / "b-bench.json"),
                     "--out", str(tmp_path), "--no-plots"]) == 0
    assert full.read_text() == '{"the": "full run"}'
    merged = Path(capsys.readouterr().out.splitlines()[0])
    assert merged != full and len(report.load_bench(merged)["shapes"]) == len(doc["shapes"])


# ------------------------------------------------------------------ what the report says
def test_a_duplicated_problem_keeps_the_tuning_time_it_paid(tmp_path, monkeypatch):
    """Two rows of one problem (same sizes under two names; an addmm row benchmarked as mm beside
    the mm row): the tuner tunes it once and reads it back from its store for the second row in
    ~1 ms. The tuning phase kept the last result per problem, so both rows got ~0 s of tuning
    (measured on the CPU: 0.815 s, then 0.00075 s): gemmtune's tuning time against max-autotune's
    (which compiles each row) came out far too small."""
    monkeypatch.setattr(bench_modes, "dist_version", lambda dist: None)  # no nvMMH

    def tune(problems, **kw):
        seen, shapes = set(), []
        for s in problems:
            shapes.append(SimpleNamespace(problem=s.problem, best="aten", best_ms=0.01, tried=3, statuses={},
                                          tune_s=0.001 if s.problem.key in seen else 0.8))
            seen.add(s.problem.key)
        return SimpleNamespace(shapes=shapes, wall_s=1.0, measured=3, startup_s=0.1, compile_workers=0,
                               compile_wait_s=0.0, precompile_s=0.0)

    p = Problem.from_sizes(8, 8, 8, "fp32")
    phase = bench_modes.tune_phase([Shape("g", "a", p), Shape("h", "b", p)], tune_fn=tune, scratch=tmp_path, seed=0,
                                   provenance={"device_name": "NVIDIA H100"})
    assert phase["tuned"]["gemmtune"][p.key].tune_s == 0.8


def _rec(group, name, ms=None, **methods):
    ok = lambda t: {"status": "ok", "choice": "triton_mm:x", "kernel": {"ms": t, "spread": 0.0}, "tune_s": 1.0}  # noqa: E731
    return {"group": group, "name": name, "key": name, "m": 8, "n": 8, "k": 8, "dtype": "float16", "floor_ms": 0.5,
            "cublas": ok(ms) if ms else {"status": "error", "reason": "x"},
            "methods": {m: ok(t) if t else {"status": "error", "reason": "y"} for m, t in methods.items()}}


def _doc(*shapes):
    return {"schema": report.SCHEMA, "source": "", "notes": [], "ceilings": None,
            "header": {"device_name": "NVIDIA H100", "date": "2026-11-30"}, "shapes": list(shapes)}


def _section(md, title):
    return md.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def test_targets_of_groups_the_run_has_no_shapes_of_are_not_listed(tmp_path):
    """A hidden suite of other groups (or --groups splitk): the Targets table listed every public
    target as NOT RUN, and under it 'gemmtune default: not run.' for a mode that ran on every shape."""
    md = report.render_markdown(_doc(_rec("mine", "a", 1.0, gemmtune=0.5, gemmtune_fast=0.5),
                                     _rec("theirs", "b", 1.0, gemmtune=2.0)))
    targets = _section(md, "Targets")
    assert "geomean speedup over cuBLAS |" not in targets, targets
    assert "gemmtune default: not run." not in targets and "gemmtune --fast: not run." not in targets
    assert "gemmtune model top-5: not run." in targets  # it did not run
    md = report.render_markdown(_doc(_rec("splitk", "a", 1.0, gemmtune=0.5)))
    rows = [line for line in _section(md, "Targets").splitlines() if "geomean speedup over cuBLAS |" in line]
    assert len(rows) == 1 and rows[0].startswith("| splitk:"), rows


def _columns(md: str) -> list[tuple[int, int, str]]:
    """(header cells, row cells, row) of every table row whose cell count is not its header's
    (cells split at '|' not escaped as '\\|')."""
    bad, header = [], None
    for line in md.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        n = len(re.split(r"(?<!\\)\|", line.strip())) - 2
        if header is None:
            header = n
        elif n != header:
            bad.append((header, n, line))
    return bad


def test_a_pipe_in_a_group_or_shape_name_keeps_the_tables_columns():
    """A suite's group or name holding '|' (a CSV field may) split its table row into one cell
    more, every later cell shifted one column: a speedup read under another method's header."""
    md = report.render_markdown(_doc(_rec("a|b", "q|k", 1.0, gemmtune=0.5)))
    assert _columns(md) == []
    assert "| a\\|b | q\\|k |" in md


def test_tables_keep_their_columns_when_no_method_has_a_time():
    """Every method failed (or was skipped) on every shape: the geomean tables' header had one cell
    more than their separator ('| group |  |' over '|---|'), the per-shape one an empty extra cell."""
    md = report.render_markdown(_doc(_rec("mine", "a", 1.0, gemmtune=None)))
    assert _columns(md) == []


def test_report_of_a_bench_json_without_its_sizes_or_gpu_is_one_line(tmp_path, capsys):
    """load_bench checked a shape's group and name only: without its sizes (or a header without its
    GPU or date) `gemmtune report` and `report --merge` ended in a KeyError traceback."""
    good = json.loads(FIXTURE.read_text())
    for i, edit in enumerate(("m", "key", "device_name")):
        doc = copy.deepcopy(good)
        if edit == "device_name":
            del doc["header"]["device_name"]
        else:
            del doc["shapes"][0][edit]
        path = tmp_path / f"b{i}.json"
        path.write_text(json.dumps(doc))
        for argv in (["report", str(path)], ["report", "--merge", str(path), str(FIXTURE)]):
            assert cli.main([*argv, "--no-plots", "--out", str(tmp_path / "out")]) == 2, (edit, argv)
            err = capsys.readouterr().err
            assert f"b{i}.json" in err and repr(edit) in err and len(err.strip().splitlines()) == 1, err


# ------------------------------------------------------------------ the command's selection
def test_a_group_named_all_is_refused(fake_bench_command, tmp_path, capsys):
    """The report's total row is 'all': a suite group of that name went into the total a second
    time (3 shapes counted as 4 in the geomean over the suite) and showed as a second 'all' row."""
    suite = _csv(tmp_path, "all,a,16,16,16,bf16\nmine,b,8,8,8,fp32\n")
    assert cli.main(["bench", "--suite", suite, "--out", str(tmp_path / "out")]) == 2
    assert "group named 'all'" in capsys.readouterr().err and "shapes" not in fake_bench_command


def test_groups_are_trimmed_as_tunes_are(fake_bench_command, tmp_path):
    """`--groups "decode, odd"` said "no group  odd in the suite" (tune trims them)."""
    suite = _csv(tmp_path, "decode,a,1,64,64,bf16\nodd,b,33,17,9,fp16\nsquare,c,32,32,32,bf16\n")
    assert cli.main(["bench", "--suite", suite, "--groups", "decode, odd,", "--out", str(tmp_path / "out")]) == 0
    assert fake_bench_command["groups"] == ["decode", "odd"]
    assert [s.name for s in fake_bench_command["shapes"]] == ["a", "b"]


def test_addmm_rows_benchmarked_as_mm_are_noted_in_the_json(fake_bench_command, tmp_path, capsys):
    """bench runs an addmm row as mm (without its bias) and said so on stderr only: the JSON and
    its report named the row as the suite did, with nothing saying the bias was left out."""
    suite = _csv(tmp_path, "g,a,8,16,32,bfloat16,addmm\ng,b,8,16,32,bfloat16,mm\n", "group,name,M,N,K,dtype,op")
    assert cli.main(["bench", "--suite", suite, "--out", str(tmp_path / "out")]) == 0
    assert any("1 addmm row(s) are benchmarked as mm" in n for n in fake_bench_command["notes"])
    capsys.readouterr()


def test_merging_the_rerun_of_an_interrupted_run_is_not_called_unfinished(fake_gpu, tmp_path):
    """An interrupted run's JSON names the shapes it did not measure; merged with a run of those
    shapes, the report must not still say they were not measured (nor drop what no part has)."""
    fake_gpu.stop = {"b"}
    with pytest.raises(KeyboardInterrupt):
        fake_gpu.run(_shapes("a", "b", "c"), tmp_path)
    [part] = tmp_path.glob("*-bench.json")
    fake_gpu.stop = set()
    rest = fake_gpu.run(_shapes("a", "b", "c")[1:2], tmp_path)  # b only: c is still missing
    merged = report.merge_bench([report.load_bench(part), report.load_bench(rest)])
    assert [s["name"] for s in merged["shapes"]] == ["a", "b"] and merged["header"]["unmeasured"] == ["c"]
    assert [n for n in merged["notes"] if "not measured" in n] == [report.files.unfinished_note(["c"], 3)]


def test_a_name_matplotlib_reads_as_math_costs_neither_the_plots_nor_the_markdown(tmp_path, monkeypatch):
    """Plot labels are matplotlib text, where '$...$' is math: a shape named '$x_{$' raised
    ValueError from savefig, which ended a finished bench run with no report at all (the Markdown
    is written after the plots); 'cost $M$' was set in italics. A plot that fails for any other
    reason now costs its picture only, with a note."""
    pytest.importorskip("matplotlib")
    from gemmtune.report import plots

    doc = report.load_bench(FIXTURE)
    doc["shapes"] = doc["shapes"][:2]
    doc["shapes"][0]["name"], doc["shapes"][1]["group"] = "$x_{$", "cost $M$"
    assert plots.plot_speedup(doc, tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"

    def broken(doc, path):
        raise ValueError("Image size of 99333x495 pixels is too large.\nIt must be less than 2^16")
    for k in report.PLOTS:
        monkeypatch.setitem(plots._PLOTTERS, k, broken if k == "tuning" else lambda doc, path: Path(path))
    written = report.render(doc, tmp_path, "u")
    md = written["markdown"].read_text()
    assert "tuning" not in written and "plot tuning not drawn: ValueError: Image size of 99333x495" in md
    assert "u-tuning.png" not in md and "u-speedup.png" in md


def test_the_report_names_operand_layouts_other_than_row_major():
    """A suite's layout_a / layout_b columns (x @ W.T has a column-major B): the bench record kept
    no layout and the report's 'M×N×K dtype' read the same for x @ W and x @ W.T, whose kernels
    and speedups differ."""
    from gemmtune import benchmark
    from gemmtune.bench.runner import WorkerState
    from gemmtune.bench.timing import WallTimer

    shapes = [Shape("edge", "xw", Problem.from_sizes(3, 5, 7, "fp32")),
              Shape("edge", "xwt", Problem.from_sizes(3, 5, 7, "fp32", layout_b="col"))]
    skipped = {m: "x" for m in (*benchmark.TUNE_MODES, *benchmark.NVMMH_TOPK)}
    recs = [benchmark.measure_shape(s, WorkerState(timer=WallTimer(repeats=1), device="cpu"),
                                    {"copy": {"gbps": 1.0}, "mm": {}}, {}, skipped, seed=0, inductor_log=None)
            for s in shapes]
    assert [(r["layout_a"], r["layout_b"]) for r in recs] == [("row", "row"), ("row", "col")]
    md = report.render_markdown(_doc(*recs))
    cells = [line.split(" | ")[2] for line in _section(md, "Per shape: speedup over cuBLAS").splitlines()
             if line.startswith("| edge |")]
    assert cells == ["3×5×7 fp32", "3×5×7 fp32, A row, B col"]


def test_a_ceilings_file_of_this_gpu_without_the_bandwidth_is_measured_again(fake_gpu, tmp_path):
    """A ceilings file of this GPU's name whose ceilings lack what the run reads (the copy
    bandwidth, the mm peaks; written by hand or another version) was used as it was: the run's
    first line of output raised KeyError ('copy'), a traceback."""
    f = tmp_path / "c.json"
    bench_suite.save_ceilings(f, "NVIDIA H100 80GB HBM3", {"mm": {}})
    doc = report.load_bench(fake_gpu.run(_shapes("a"), tmp_path / "out", ceilings_file=f))
    assert doc["ceilings"]["copy"] == {"gbps": 1.0}  # measured (the fake's) and written back
    assert json.loads(f.read_text())["ceilings"]["copy"] == {"gbps": 1.0}


def test_a_merge_of_runs_of_two_suites_names_both():
    """report --merge of a hidden suite's run and the public suite's: the report's 'Suite' was the
    first part's alone, the other part's shapes presented as that suite's."""
    doc = report.load_bench(FIXTURE)
    a, b = copy.deepcopy(doc), copy.deepcopy(doc)
    a["shapes"], b["shapes"] = doc["shapes"][:5], doc["shapes"][5:]
    a["header"]["suite"], b["header"]["suite"] = "hidden.csv", "public"
    merged = report.merge_bench([a, b])
    assert "Suite `hidden.csv + public`" in report.render_markdown(merged)
    assert report.merge_bench([a, a])["header"]["suite"] == "hidden.csv"


def test_a_several_line_note_stays_one_bullet():
    """The notes keep a tuner's failure as the exception said it ('the tuner failed: ...'), often
    several lines (a Triton compile error): a line of it beginning with '#' or '|' became a
    heading or a table row of the report."""
    doc = _doc(_rec("mine", "a", 1.0, gemmtune=0.5))
    doc["notes"] = ["gemmtune --fast: the tuner failed: CompilationError: at 3:4:\n## not a heading\n| not | a row |"]
    md = report.render_markdown(doc)
    assert "## not a heading" not in md.splitlines() and not any(line.startswith("| not") for line in md.splitlines())
    assert "- gemmtune --fast: the tuner failed: CompilationError: at 3:4: ## not a heading | not | a row |" in md


def test_a_suite_with_comments_and_sizes_written_as_floats_loads(tmp_path):
    """A hand-annotated or pandas-written suite: '# ...' comment lines (before the header: 'missing
    column(s) group, name, ...'; after it: a bad row), sizes as '64.0' and a bmm row's batch as
    '32.0' (pandas writes a column with an empty cell, the batch of mm rows, as floats) were
    refused; and an error after a blank or comment line named the wrong line of the file."""
    from gemmtune.shapes import load_csv

    path = tmp_path / "hidden.csv"
    path.write_text("# the hidden suite\ngroup,name,M,N,K,dtype,op,batch\n# decode\n"
                    "decode,d,1.0,64,64.0,bf16,mm,\n\nattn,qk,16,16,8,bf16,bmm,32.0\ndecode,e,16,64,64,bf16,mm,1.0\n")
    shapes = load_csv(path)
    assert [(s.name, s.problem.m, s.problem.k, s.problem.batch) for s in shapes] == \
        [("d", 1, 64, 1), ("qk", 16, 8, 32), ("e", 16, 64, 1)]
    path.write_text("group,name,M,N,K,dtype\n# c\n\ng,a,8,8,8,bf16\n\ng,b,8.5,8,8,bf16\n")
    with pytest.raises(ValueError, match=r"hidden\.csv:6: .*M must be a whole number, got '8\.5'"):
        load_csv(path)
