"""Session 55's reporting defects: bench-model's report (timer, failed modes, a model that raises),
the bench report's null records, NaN in JSON and non-atomic writes, the trace summary (CPU, fakes)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from strictjson import strict_loads as _strict  # tests/strictjson.py

from gemmtune import report

HEAD = {"device": "cpu", "torch": "t", "triton": "t", "gemmtune": "g", "date": "d", "dtype": "bf16", "tune": "fast"}


def _bm_run(monkeypatch, fake):
    pytest.importorskip("transformers")
    run = importlib.import_module("gemmtune.benchmodel.run")
    monkeypatch.setattr(run, "bench_causal", fake)
    monkeypatch.setattr(run, "plot", lambda doc, path: None)  # matplotlib's drawing: seconds, not the point
    return run


def _ok_model(name, phases, modes, **kw):
    return {"model": name, "params": 1, "modes": {"eager": {"first_calls_s": 0.5, "phases": {
        "prefill_b8_s128": {"ms": 1.0, "x_eager": 1.0}}}}}


def _held(path: Path):
    """An open handle on ``path``'s current file: what a reader of the old report holds."""
    return open(path, "rb")  # noqa: SIM115 - closed by the caller


# -- bench-model ---------------------------------------------------------------------------------

def test_bench_model_header_names_the_timer_it_used(monkeypatch, tmp_path):
    # On a CPU the header said the cells were CUDA-event-timed; time_call timed the wall clock.
    run = _bm_run(monkeypatch, _ok_model)
    monkeypatch.setattr(run.torch.cuda, "is_available", lambda: False)
    run.run(["tiny-llama"], phases=["prefill_b8_s128"], modes=["eager"], out_dir=tmp_path, log=lambda s: None)
    md = (tmp_path / "bench-model.md").read_text()
    assert "CUDA-event" not in md and "CUDA events" not in md.split("\n\n")[2]
    assert "timed with the host's wall clock" in md
    assert "wall clock" in json.loads((tmp_path / "bench-model.json").read_text())["header"]["timer"]


def test_bench_model_report_of_an_older_cpu_json_does_not_claim_cuda_events():
    from gemmtune.benchmodel.report import markdown
    md = markdown({"header": HEAD, "models": []})
    assert "CUDA-event" not in md and "timed with the host's wall clock" in md


def test_failed_mode_has_no_first_calls_time():
    # A failed (or skipped) mode showed "0.0" s of first calls, as if it had compiled in no time.
    from gemmtune.benchmodel.report import markdown
    m = {"model": "m", "params": 1e6, "modes": {
        "eager": {"first_calls_s": 0.25, "phases": {"p": {"ms": 1.0, "x_eager": 1.0}}},
        "compile": {"phases": {}, "failed": "torch._dynamo hit its recompile limit", "first_calls_s": None},
        "eager_graph": {"phases": {}, "skipped": "CUDA graphs need a CUDA device"}}}
    md = markdown({"header": HEAD, "models": [m]})
    row = next(line for line in md.splitlines() if line.startswith("| first calls"))
    assert row == "| first calls (compile) s | 0.2 | failed | skipped |"


def test_guarded_records_a_failed_modes_first_calls_as_null():
    # The JSON kept the seconds of a mode that then failed (its greedy check hit the recompile limit).
    pytest.importorskip("transformers")
    run = importlib.import_module("gemmtune.benchmodel.run")
    rec = {"setup_s": 0.0}

    def fails(mode):
        rec.update(phases={"p": {"ms": 1.0}}, first_calls_s=3.0)
        raise run.ModeUnavailable("not here")
    run._guarded(fails, "compile", rec, lambda s: None)
    assert rec["failed"] == "not here" and rec["phases"] == {} and rec["first_calls_s"] is None
    assert '"first_calls_s": null' in json.dumps(rec)


def test_bench_model_named_model_that_raises_keeps_the_report(monkeypatch, tmp_path):
    # A named model raising (gemmtune's bug: raised with its traceback) left no bench-model.md: the
    # finished models' results were in the JSON only, and the failing one's checkpoint was lost.
    def second_fails(name, phases, modes, *, checkpoint, **kw):
        if name == "tiny-llama":
            return _ok_model(name, phases, modes)
        checkpoint({"model": name, "params": 2e6, "modes": {
            "eager": {"first_calls_s": 0.5, "phases": {"prefill_b8_s128": {"ms": 2.0}}}, "compile": {"setup_s": 0.1}}})
        raise KeyError("boom")
    run = _bm_run(monkeypatch, second_fails)
    with pytest.raises(KeyError, match="boom"):
        run.run(["tiny-llama", "tiny-gpt2"], phases=["prefill_b8_s128"], modes=["eager", "compile"],
                out_dir=tmp_path, log=lambda s: None)
    md = (tmp_path / "bench-model.md").read_text()
    assert "## tiny-llama" in md and "## tiny-gpt2" in md
    assert "**Stopped:** KeyError: 'boom'" in md and "| prefill_b8_s128 | 2.000 | - |" in md
    doc = _strict((tmp_path / "bench-model.json").read_text())
    [a, b] = doc["models"]
    assert "error" not in a and b["error"] == "KeyError: 'boom'" and b["partial"] is True
    assert b["modes"]["eager"]["phases"]["prefill_b8_s128"]["ms"] == 2.0


def test_bench_model_failure_before_any_checkpoint_still_reads_not_run(monkeypatch, tmp_path):
    def fails(name, phases, modes, **kw):
        raise ValueError("bad config")
    run = _bm_run(monkeypatch, fails)
    with pytest.raises(ValueError):
        run.run(["tiny-llama"], phases=["prefill_b8_s128"], modes=["eager"], out_dir=tmp_path, log=lambda s: None)
    assert "Not run: ValueError: bad config" in (tmp_path / "bench-model.md").read_text()


def test_bench_model_plot_is_written_atomically(tmp_path):
    pytest.importorskip("matplotlib")
    from gemmtune.benchmodel.report import plot
    path = tmp_path / "bench-model.png"
    path.write_bytes(b"old plot")
    m = _ok_model("m", None, None)
    with _held(path) as old:
        assert plot({"header": HEAD, "models": [m]}, path) == path
        assert old.read() == b"old plot"  # replaced, not rewritten in place
    assert path.read_bytes().startswith(b"\x89PNG")


# -- the bench report ----------------------------------------------------------------------------

CTX = {"device_name": "NVIDIA H200", "date": "2026-11-30T10:00:00Z", "torch": "2.11", "triton": "3.6",
       "gemmtune": "0.1"}


def _shape(methods):
    return {"group": "odd", "name": "s", "key": "k", "m": 1, "n": 2, "k": 3, "dtype": "bfloat16",
            "cublas": {"status": "ok", "choice": "aten", "kernel": {"ms": 1.0}}, "methods": methods}


def _ok(ms, tune_s):
    return {"status": "ok", "choice": "x", "kernel": {"ms": ms}, "tune_s": tune_s}


def test_tuning_summary_skips_a_null_method_record():
    # A null method record (a hand-merged or partial file) raised AttributeError: 'NoneType' ... 'get'.
    doc = {"header": {"modes": {"gemmtune_fast": None}},
           "shapes": [_shape({"gemmtune_fast": None, "inductor": _ok(1.0, 10.0)}),
                      _shape({"gemmtune_fast": _ok(0.5, 1.0), "inductor": _ok(1.0, 10.0)})]}
    t = report.tuning_summary(doc, "gemmtune_fast")
    assert t["tune_s"] == 1.0 and t["shapes"] == 1 and t["ratio"] == 0.1 and t["startup_s"] is None


def test_bench_report_with_null_methods_and_null_mode_records(tmp_path):
    # A shape whose "methods" is null, and a header mode record that is null or has no wall time:
    # AttributeError / TypeError from the render, or "0 s" for a time never recorded.
    doc = {"schema": report.SCHEMA, "header": {**CTX, "modes": {"gemmtune": None, "gemmtune_fast": {"measured": 3}}},
           "shapes": [_shape(None), _shape({"gemmtune": _ok(0.5, 1.0)})]}
    md = report.render_markdown(doc)
    assert "gemmtune default: not recorded" in md and "(3 candidates, time not recorded)" in md
    assert "0 s)" not in md


def test_bench_report_markdown_is_written_atomically(tmp_path):
    # render wrote the Markdown in place (Path.write_text): a reader, or a run killed mid-write, saw
    # the previous report cut short.
    doc = {"schema": report.SCHEMA, "header": CTX, "shapes": [_shape({"gemmtune": _ok(0.5, 1.0)})]}
    md = tmp_path / "r.md"
    md.write_text("old report\n")
    with _held(md) as old:
        report.render(doc, tmp_path, "r", plots=False)
        assert old.read() == b"old report\n"
    assert md.read_text().startswith("# gemmtune bench")


def test_bench_report_plot_is_written_atomically(tmp_path):
    pytest.importorskip("matplotlib")
    doc = {"schema": report.SCHEMA, "header": CTX, "shapes": [_shape({"gemmtune": _ok(0.5, 1.0)})]}
    png = tmp_path / "r-tuning.png"
    png.write_bytes(b"old plot")
    with _held(png) as old:
        report.plot_tuning(doc, png)
        assert old.read() == b"old plot"
    assert png.read_bytes().startswith(b"\x89PNG")


def test_tune_run_report_with_a_null_inductor_tune_time(tmp_path):
    # inductor.json with inductor_tune_s null (its tuning failed): TypeError formatting None.
    ctx = {"device_name": "NVIDIA H200", "capability": "9.0", "torch_version": "2.11",
           "triton_version": "3.6", "gemmtune_version": "0.1"}
    key = "mm:M1-N6144-K4096:bf16->bf16:row.a/row.a"
    (tmp_path / "tune-summary.json").write_text(json.dumps({"context": ctx, "rows": [
        {"group": "decode", "name": "qkv", "key": key, "candidates": 3, "statuses": {"ok": 3}, "best": "aten",
         "best_ms": 0.02, "aten_ms": 0.02}]}))
    (tmp_path / "tune-run.json").write_text(json.dumps({"context": ctx, "measured": 3,
                                                        "shapes": [{"key": key, "tune_s": 1.0}]}))
    (tmp_path / "inductor.json").write_text(json.dumps({"rows": [
        {"key": key, "inductor_tune_s": None, "inductor_error": "boom"}]}))
    (tmp_path / "env.txt").write_text("env\n")
    md = report.render_tune_run(tmp_path)
    assert "| 3 | 1.0 | - | - | - |" in md


def test_store_run_summary_json_has_no_infinity(tmp_path):
    # The store keeps an ok row's inf ms; run_summary took cuBLAS's row unfiltered and the JSON
    # got a bare Infinity, which strict readers refuse.
    from gemmtune.cli import main
    from gemmtune.problem import Problem
    from gemmtune.store import ResultStore
    from gemmtune.store.rows import ResultRow, RunContext

    p = Problem.from_sizes(16, 16, 32, "fp16")
    ctx = RunContext("NVIDIA H200", "9.0", "2.11", "3.6", "0.1")

    def row(choice, ms, spread):
        return ResultRow(problem_key=p.key, choice_id=choice, family=choice.split(":")[0], status="ok",
                         device_ms=ms, eager_ms=None, rel_err=0.0, m=16, n=16, k=32, dtype="float16",
                         out_dtype="float16", layout="row/row", aligned=True, spread=spread)
    path = tmp_path / "s.sqlite"
    with ResultStore(path) as st:
        st.record_many(ctx, [row("aten", float("inf"), 0.01), row("triton_mm:x", 0.01, float("inf"))])
    out = tmp_path / "summary.json"
    assert main(["report", "--store", str(path), "--run-summary", str(out), "--suite", "smoke"]) == 0
    [r] = _strict(out.read_text())["rows"]
    assert r["aten_ms"] is None and r["best_ms"] == 0.01 and r["best_spread"] is None


# -- the trace summary ---------------------------------------------------------------------------

def test_trace_summary_skips_a_line_without_its_seconds_and_says_so(tmp_path):
    # A worker line without "s" (or with a text start time) ended the summary with KeyError 's'.
    from gemmtune.report.trace import summarise
    (tmp_path / "worker-1.jsonl").write_text("".join(json.dumps(x) + "\n" for x in [
        {"t0": 1000.0, "s": 0.0, "op": "ready"},
        {"t0": 1001.0, "s": 0.4, "op": "bench", "problem": "P0", "choice": "aten", "status": "ok"},
        {"t0": 1002.0, "op": "bench", "problem": "P0", "choice": "x"},
        {"t0": "later", "s": 0.1, "op": "bench", "problem": "P1"}]))
    out = "\n".join(summarise(tmp_path))
    assert "skipped 2 line(s)" in out and "worker-1.jsonl 2" in out
    p0 = next(line for line in out.splitlines() if line.strip().startswith("P0"))
    assert "1 requests" in p0 and "busy  0.400 s" in p0


def test_trace_cli_on_a_partial_entry_is_not_a_traceback(tmp_path, capsys):
    from gemmtune import cli
    (tmp_path / "worker-1.jsonl").write_text(json.dumps({"t0": 1.0, "op": "prewarm"}) + "\n"
                                             + json.dumps({"t0": 1.0, "s": 0.1, "op": "bench", "problem": "P"}) + "\n")
    assert cli.main(["report", "--trace", str(tmp_path)]) == 0
    assert "skipped 1 line(s)" in capsys.readouterr().out

