"""Report figures that read against their verdicts or were left out, each pinned by a minimal case."""

from __future__ import annotations

from gemmtune import report
from gemmtune.benchmodel.report import markdown as bm_markdown
from mdtables import md_rows  # noqa: F401 -- tests/mdtables.py


def _rec(ms: float, tune_s: float | None = 1.0, spread: float = 0.0) -> dict:
    r = {"status": "ok", "choice": "x", "kernel": {"ms": ms, "spread": spread, "repeats": 20}}
    if tune_s is not None:
        r["tune_s"] = tune_s
    return r


def _doc(shapes: list[dict]) -> dict:
    return {"schema": report.SCHEMA, "header": {"device_name": "GPU", "date": "2026-01-01"},
            "ceilings": {}, "notes": [], "shapes": shapes}


def _shape(group: str, cublas: dict | None, floor_ms: float | None = None, **methods) -> dict:
    return {"group": group, "name": f"{group}-s", "key": f"mm:{group}", "m": 1, "n": 1, "k": 1, "batch": 1,
            "dtype": "bfloat16", "floor_ms": floor_ms, "cublas": cublas, "methods": methods}


def _targets_row(md: str, start: str) -> str:
    return next(line for line in md.splitlines() if line.startswith(start))


def test_targets_speedup_figure_agrees_with_its_verdict():
    # prefill geomean 0.9796 against >= 0.98: MISSED, correctly; but printed as '0.98×' beside
    # '≥ 0.98×' the figure reads as meeting the threshold (H100 run 2026-11-26, gemmtune top-5).
    doc = _doc([_shape("prefill", _rec(0.9796), gemmtune=_rec(1.0), gemmtune_fast=_rec(1.0),
                       gemmtune_top5=_rec(1.0))])
    assert report.targets(doc)["gemmtune"]["prefill"]["verdict"] == "MISSED"
    row = _targets_row(report.render_markdown(doc), "| prefill: geomean")
    assert "0.98× **MISSED**" not in row
    assert "0.980× **MISSED**" in row or "0.9796× **MISSED**" in row


def test_targets_tuning_figure_agrees_with_its_verdict():
    # tuning ratio 0.1029 against <= 0.10: MISSED, printed as '0.10× the time ... MISSED'
    # (H100 runs 2026-11-26/27); and 96.96% of best against >= 97%, printed as '97.0%'.
    ind = lambda: _rec(1.0, tune_s=1000.0)  # noqa: E731
    doc = _doc([_shape("splitk", _rec(1.0), gemmtune=_rec(1.0, tune_s=102.9), inductor=ind(),
                       gemmtune_fast=_rec(1.0 / 0.9696, tune_s=50.0), gemmtune_top5=_rec(1.0, tune_s=50.0))])
    tg = report.targets(doc)
    assert tg["gemmtune"]["tuning"]["verdict"] == "MISSED"
    assert tg["gemmtune_fast"]["tuning"]["verdict"] == "MISSED"
    row = _targets_row(report.render_markdown(doc), "| tuning wall time")
    cells = [c.strip() for c in row.strip("|").split("|")][2:]
    assert not cells[0].startswith("0.10× the time"), cells[0]
    assert "97.0% of best" not in cells[1], cells[1]


def test_floor_geomean_counts_a_shape_where_only_cublas_failed():
    # The method has a kernel time on both shapes (floor fractions 0.5 and 0.125): its geomean
    # % of the floor is 25% over 2 shapes. cuBLAS failing on the second must not drop that
    # shape's floor from the method's figure (the cell's '(n of N)' says n counts the shapes
    # where the method has a kernel time).
    doc = _doc([_shape("odd", _rec(4.0), floor_ms=1.0, gemmtune=_rec(2.0)),
                _shape("odd", {"status": "error", "reason": "cuBLAS refused"}, floor_ms=1.0, gemmtune=_rec(8.0))])
    g = report.group_speedups(doc, "gemmtune")["odd"]
    assert g["floor_n"] == 2
    assert g["floor"] == 0.25
    assert g["n"] == 1 and g["geomean"] == 2.0  # the speedup still needs cuBLAS


def _bm_doc(modes: dict) -> dict:
    return {"header": {"device": "GPU", "torch": "t", "triton": "t", "gemmtune": "g", "date": "d",
                       "dtype": "bfloat16", "tune": "x"},
            "models": [{"model": "m", "params": 1e6, "modes": modes}]}


def test_bench_model_missing_x_eager_is_not_shown_as_one():
    # Graph modes without eager_graph have no × eager: the committed minilm report
    # (2026-11-26-h100-minilm-inprocess) shows 0.485, 0.491 and 0.538 ms all as '(1.00×)'.
    doc = _bm_doc({"compile_graph": {"phases": {"p": {"ms": 0.485}}},
                   "max_autotune_graph": {"phases": {"p": {"ms": 0.538}}}})
    row = next(line for line in bm_markdown(doc).splitlines() if line.startswith("| p |"))
    assert "1.00×" not in row
    assert "0.485" in row and "0.538" in row


def test_bench_model_renders_a_mode_without_phases():
    # Committed partial JSONs (2026-11-24-h200-eager/call7-*-bench-model.json) hold modes with
    # only setup_s: the report raised KeyError('phases').
    doc = _bm_doc({"eager": {"phases": {"p": {"ms": 2.0, "x_eager": 1.0}}},
                   "compile": {"setup_s": 1.0}})
    row = next(line for line in bm_markdown(doc).splitlines() if line.startswith("| p |"))
    assert "2.000 (1.00×)" in row


def test_load_bench_reads_the_gzipped_json_the_benchmarks_keep(tmp_path):
    import gzip
    import json

    doc = _doc([_shape("odd", _rec(4.0), floor_ms=1.0, gemmtune=_rec(2.0))])
    p = tmp_path / "x-bench.json.gz"
    p.write_bytes(gzip.compress(json.dumps(doc).encode()))
    assert report.load_bench(p) == doc
    bad = tmp_path / "bad-bench.json.gz"
    bad.write_bytes(b"not gzip")
    import pytest
    with pytest.raises(ValueError, match="cannot read"):
        report.load_bench(bad)
