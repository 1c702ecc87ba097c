"""Defects found in bench-model's run/report and the bench report package (CPU, fakes only)."""

from __future__ import annotations

import importlib
import json

import pytest
from strictjson import strict_loads as _strict  # tests/strictjson.py

from gemmtune import report
from gemmtune.report.records import method_speedup


def _bm_run(monkeypatch, fake):
    pytest.importorskip("transformers")
    run = importlib.import_module("gemmtune.benchmodel.run")
    monkeypatch.setattr(run, "bench_causal", fake)
    return run


def _ok_model(name, phases, modes, **kw):
    return {"model": name, "params": 1, "modes": {"eager": {"phases": {
        "prefill_b8_s128": {"ms": 1.0, "x_eager": 1.0, "logits_rel_err": float("nan"), "logits_ok": False}}}}}


def test_bench_model_json_has_no_nan(monkeypatch, tmp_path):
    # NaN logits (a bf16 overflow) wrote a bare NaN into bench-model.json: not JSON.
    run = _bm_run(monkeypatch, _ok_model)
    monkeypatch.setattr(run, "plot", lambda doc, path: None)  # matplotlib's drawing: seconds, not the point
    run.run(["tiny-llama"], phases=["prefill_b8_s128"], modes=["eager"], out_dir=tmp_path, log=lambda s: None)
    doc = _strict((tmp_path / "bench-model.json").read_text())
    assert doc["models"][0]["modes"]["eager"]["phases"]["prefill_b8_s128"]["logits_rel_err"] is None


def test_bench_model_drops_an_earlier_runs_plot(monkeypatch, tmp_path):
    # A run with nothing to plot left the previous run's bench-model.png beside its report.
    (tmp_path / "bench-model.png").write_bytes(b"\x89PNG old run")

    def fails(name, phases, modes, **kw):
        raise RuntimeError("cannot build it")
    run = _bm_run(monkeypatch, fails)
    run.run(["tiny-llama"], phases=["prefill_b8_s128"], modes=["eager"], out_dir=tmp_path, log=lambda s: None)
    assert "Not run: RuntimeError: cannot build it" in (tmp_path / "bench-model.md").read_text()
    assert not (tmp_path / "bench-model.png").exists()


def test_method_speedup_with_a_baseline_without_time():
    # A baseline whose cuBLAS time is null (failed, or NaN saved as null) raised TypeError in is_tie.
    shape = {"cublas": {"status": "ok", "kernel": {"ms": 1.0}},
             "methods": {"inductor": {"status": "ok", "kernel": {"ms": 0.5}, "baseline": {"ms": None}}}}
    assert method_speedup(shape, "inductor") == (None, False)


def test_tune_run_report_leaves_out_a_wrong_inductor_kernel(tmp_path):
    # inductor.json keeps inductor_ms of a kernel that failed its fp64 check (inductor_ok False):
    # the report showed its 2.00x and counted it in Inductor's geomean.
    ctx = {"device_name": "NVIDIA H200", "capability": "9.0", "torch_version": "2.11",
           "triton_version": "3.6", "gemmtune_version": "0.1"}
    key = "mm:M1-N6144-K4096:bf16->bf16:row.a/row.a"
    (tmp_path / "tune-summary.json").write_text(json.dumps({"context": ctx, "rows": [
        {"group": "decode", "name": "qkv", "key": key, "candidates": 3, "statuses": {"ok": 3}, "best": "aten",
         "best_ms": 0.02, "aten_ms": 0.02}]}))
    (tmp_path / "tune-run.json").write_text(json.dumps({"context": ctx, "measured": 3,
                                                        "shapes": [{"key": key, "tune_s": 1.0}]}))
    (tmp_path / "inductor.json").write_text(json.dumps({"rows": [
        {"key": key, "inductor_tune_s": 5.0, "inductor_ok": False, "inductor_ms": 0.01, "aten_ms": 0.02}]}))
    (tmp_path / "env.txt").write_text("env\n")
    md = report.render_tune_run(tmp_path)
    assert "2.00" not in md and "| decode | 1 | 1.000 | - |" in md and "wrong output" in md


def test_bench_model_report_renders_its_json_with_nulls():
    # bench-model writes NaN as null; re-rendering that JSON (as the committed partial ones are)
    # raised TypeError formatting None.
    from gemmtune.benchmodel.report import markdown
    from gemmtune.report.files import finite

    nan = float("nan")
    head = {"device": "GPU", "torch": "t", "triton": "t", "gemmtune": "g", "date": "d", "dtype": "bf16", "tune": "fast"}
    eager = {"ms": 1.0, "logits_rel_err": nan, "logits_ok": False,
             "interleaved_aa": {"x_paired": nan, "q1": nan, "q3": nan, "lo": nan, "hi": nan, "rounds": 0}}
    patched = {"ms": 1.0, "x_eager": 1.0, "logits_rel_err": nan, "logits_ok": False,
               "interleaved": {"eager_ms": 1.0, "eager_patch_ms": 1.0, "x_eager": 1.0, "x_eager_paired": nan,
                               "x_eager_q1": nan, "x_eager_q3": nan, "x_eager_lo": nan, "x_eager_hi": nan,
                               "rounds": 0}}
    m = {"model": "m", "params": 1e6, "modes": {"eager": {"phases": {"p": eager}},
                                                "eager_patch": {"phases": {"p": patched}}}}
    md = markdown(finite({"header": head, "models": [m]}))
    assert "eager_patch/p: logits err nan FAIL" in md and "paired rounds nan×" in md


def test_merge_of_jsons_without_versions(tmp_path):
    # load_bench accepts a header without torch / triton (the report renders it), but the merged
    # file's name read them: `report --merge` ended with KeyError 'torch'.
    from gemmtune.cli import main

    for name in "ab":
        (tmp_path / f"{name}-bench.json").write_text(json.dumps({
            "schema": "gemmtune-bench/1", "header": {"device_name": "NVIDIA H200", "date": "2026-11-30T10:00:00Z"},
            "shapes": [{"group": "odd", "name": name, "key": "k" + name, "m": 1, "n": 2, "k": 3, "dtype": "bfloat16",
                        "cublas": {"status": "ok", "kernel": {"ms": 1.0}}, "methods": {}}]}))
    assert main(["report", "--merge", "--no-plots", str(tmp_path / "a-bench.json"), str(tmp_path / "b-bench.json")]) == 0
    merged = report.load_bench(next(tmp_path.glob("2026-11-30-h200-*-bench.json")))
    assert [s["name"] for s in merged["shapes"]] == ["a", "b"]
