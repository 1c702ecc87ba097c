"""Reports from bench JSONs (gemmtune.report): the arithmetic, the Markdown (asserted on table
cells) and plots, merging partial runs, the report command. The bench itself: test_bench.py.

The fixture tests/data/bench_fixture.json is 10 shapes of the recorded H200 run
benchmarks/results/2026-11-21-h200-public-full, in the bench JSON format, assembled by
report.bench_from_tune_run (test_fixture_matches_recorded_run rebuilds it).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

from gemmtune import cli, report
from mdtables import md_rows, md_tables  # noqa: F401 -- tests/mdtables.py

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "bench_fixture.json"
RUN = ROOT / "benchmarks" / "results" / "2026-11-21-h200-public-full"


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def doc() -> dict:
    return report.load_bench(FIXTURE)


def _shape(cublas_ms=10.0, cublas_spread=0.01, **methods) -> dict:
    """A minimal shape record: cuBLAS and methods given as (ms, spread[, baseline ms])."""
    recs = {}
    for name, v in methods.items():
        recs[name] = {"status": "ok", "kernel": {"ms": v[0], "spread": v[1], "repeats": 20}, "tune_s": 1.0}
        if len(v) > 2:
            recs[name]["baseline"] = {"ms": v[2], "spread": 0.0, "repeats": 20}
    return {"group": "splitk", "name": "s", "key": "k", "m": 1, "n": 1, "k": 1, "dtype": "bfloat16",
            "cublas": {"status": "ok", "kernel": {"ms": cublas_ms, "spread": cublas_spread, "repeats": 20}},
            "methods": recs}


# ------------------------------------------------------------------ pure arithmetic, exact values
def test_geomean_exact_values():
    assert report.geomean([2.0, 8.0]) == 4.0
    assert report.geomean([1.25, 0.8]) == 1.0
    assert report.geomean([3.0]) == 3.0
    assert report.geomean([0.5, 0.5, 0.5]) == 0.5
    # Missing, non-finite and non-positive values are left out, not counted as 1 or 0.
    assert report.geomean([4.0, None, math.nan, math.inf, 0.0, -1.0, 1.0]) == 2.0
    assert report.geomean([]) is None and report.geomean([None, math.nan]) is None
    # A product beyond float range still averages correctly (through logs).
    assert report.geomean([1e300, 1e300, 1e-300, 1e-300]) == pytest.approx(1.0, rel=1e-12)


def test_is_tie_exact_values():
    # widths: a_ms * a_spread and b_ms * b_spread (binary-exact numbers, no rounding at the edge)
    assert report.is_tie(8.0, 0.25, 9.5, 0.0)          # 1.5 apart < 2.0 wide
    assert not report.is_tie(8.0, 0.25, 10.0, 0.0)     # 2.0 apart is not smaller than 2.0
    assert report.is_tie(8.0, 0.0, 9.0, 0.125)         # b's width, 1.125, counts too
    assert not report.is_tie(8.0, 0.0625, 9.0, 0.0625)  # widths 0.5 and 0.5625 < 1.0
    assert report.is_tie(8.0, 0.0, 8.0, 0.0)           # equal times are a tie
    assert not report.is_tie(1.0, None, 1.5, None)     # no spread recorded: only equality ties


def test_speedup_roofline_and_verdict_exact_values():
    assert report.speedup(10.0, 4.0) == 2.5
    assert report.speedup(None, 1.0) is None and report.speedup(1.0, 0.0) is None
    assert report.roofline_ms(2 * 10**12, 10**9, 1000.0, 1000.0) == 2.0    # compute-bound
    assert report.roofline_ms(10**9, 4 * 10**9, 1000.0, 1000.0) == 4.0     # memory-bound
    assert report.roofline_ms(10**9, 10**9, None, None) is None
    assert report.verdict(2.0, 2.0) == "MET" and report.verdict(1.99, 2.0) == "MISSED"
    assert report.verdict(0.1, 0.1, at_most=True) == "MET"
    assert report.verdict(0.11, 0.1, at_most=True) == "MISSED"
    assert report.verdict(None, 1.0) == "NOT RUN"


def test_method_speedup_ties_and_same_process_baseline():
    s = _shape(10.0, 0.01, gemmtune=(5.0, 0.01), gemmtune_fast=(9.95, 0.01), inductor=(6.0, 0.0, 12.0))
    assert report.method_speedup(s, "gemmtune") == (2.0, False)
    x, tie = report.method_speedup(s, "gemmtune_fast")
    assert tie and x == 10.0 / 9.95
    # Inductor measured in another process: compared with that process's cuBLAS.
    assert report.method_speedup(s, "inductor") == (2.0, False)
    assert report.method_speedup(s, "nvmmh_top1") == (None, False)
    assert report.best_ms(s) == 5.0


def test_group_geomeans_and_targets_on_the_recorded_run(doc):
    gs = report.group_speedups(doc, "gemmtune")
    split = [s for s in doc["shapes"] if s["group"] == "splitk"]
    ratios = [s["cublas"]["kernel"]["ms"] / s["methods"]["gemmtune"]["kernel"]["ms"] for s in split]
    assert gs["splitk"]["geomean"] == report.geomean(ratios)
    assert gs["splitk"]["geomean"] == pytest.approx(1.2080, abs=1e-4)  # sqrt(1.2448 x 1.1723) on the H200
    assert (gs["splitk"]["wins"], gs["splitk"]["ties"], gs["splitk"]["losses"]) == (2, 0, 0)
    assert gs["all"]["n"] == len(doc["shapes"]) == 10
    t = report.targets(doc)
    assert [t["gemmtune"][g]["verdict"] for g, _ in report.SPEEDUP_TARGETS] == \
        ["MISSED", "MISSED", "MISSED", "MET", "MET"]
    # % of the floor: the geomean of floor / time, and cuBLAS's own beside it.
    fl = [s["floor_ms"] / s["methods"]["gemmtune"]["kernel"]["ms"] for s in split]
    assert gs["splitk"]["floor"] == pytest.approx(report.geomean(fl))
    cb = report.group_speedups(doc, "cublas")["splitk"]
    assert cb["geomean"] == 1.0 and cb["floor"] == pytest.approx(
        report.geomean(s["floor_ms"] / s["cublas"]["kernel"]["ms"] for s in split))
    assert gs["splitk"]["floor"] > cb["floor"]  # it won on both shapes, against the same floors
    sec = report.render_markdown(doc).split("## Geomean % of the physical floor", 1)[1].split("\n## ", 1)[0]
    [row] = md_rows(sec, group="splitk")
    assert row["cuBLAS"] == f"{cb['floor'] * 100:.0f}%" and row["gemmtune default"] == f"{gs['splitk']['floor'] * 100:.0f}%"
    tune = t["gemmtune"]["tuning"]
    assert tune["verdict"] == "MISSED" and tune["ratio"] == pytest.approx(79.4908 / 92.8866, abs=1e-3)
    # The time ratio is on the shapes both tuned, the % of best on every shape gemmtune tuned: the
    # report says how many each (they may differ where max-autotune did not run on a shape).
    tuned = [s for s in doc["shapes"] if report.kernel(s["methods"].get("gemmtune")) is not None
             and s["methods"]["gemmtune"].get("tune_s") is not None]
    assert tune["fraction_shapes"] == len(tuned) and tune["shapes"] <= len(tuned)
    assert f"({tune['shapes']} shapes) at" in report.render_markdown(doc)
    assert all(r["verdict"] == "NOT RUN" for m in ("gemmtune_fast", "gemmtune_top5") for r in t[m].values())



def test_tuning_time_counts_the_worker_start_up_where_the_header_has_it():
    """The run's one worker start-up (header modes[m]["startup_s"]) is part of a user's wall time:
    the ratio with it decides the target where max-autotune tuned every shape, and the report
    shows both; without it in the header (an older run) the shapes' sum alone, as before."""
    shapes = [_shape(gemmtune_fast=(1.0, 0.0), inductor=(1.0, 0.0)) for _ in range(2)]
    for sh in shapes:  # 1 s of tuning a shape for gemmtune, 10 s for max-autotune
        sh["methods"]["inductor"]["tune_s"] = 10.0
    header = {**report.load_bench(FIXTURE)["header"], "modes": {"gemmtune_fast": {"startup_s": 1.0}}}
    doc = {"header": header, "shapes": shapes}
    t = report.tuning_summary(doc, "gemmtune_fast")
    assert (t["ratio"], t["ratio_with_startup"], t["startup_s"]) == (pytest.approx(0.1), pytest.approx(0.15), 1.0)
    tg = report.targets(doc)["gemmtune_fast"]["tuning"]
    assert tg["verdict"] == "MISSED"  # 0.15x with the start-up, where 0.10x alone would have met it
    md = report.render_markdown(doc)
    assert "0.15× the time (2 shapes, with the worker start-up)" in md
    assert "| gemmtune --fast | 2.0 | 1.0 | 0.10× (2 shapes) | 0.15× |" in md
    del doc["header"]["modes"]
    t = report.tuning_summary(doc, "gemmtune_fast")
    assert t["ratio_with_startup"] is None and report.targets(doc)["gemmtune_fast"]["tuning"]["verdict"] == "MET"

def _grouped(group, name, cublas_ms, floor_ms, **methods) -> dict:
    s = _shape(cublas_ms, 0.0, **{m: (ms, 0.0) for m, ms in methods.items()})
    s.update(group=group, name=name, key=name, floor_ms=floor_ms)
    return s


def test_every_group_the_all_row_counts_has_a_row_of_its_own():
    # The public suite's fp8 group (and bmm, a user's groups) is not one of report.GROUPS: its
    # shapes went into 'all' with no row of their own, so a 0.5x fp8 loss was visible only as an
    # 'all' of 1.00x beside a decode row of 2.00x.
    doc = {"schema": report.SCHEMA, "source": "", "header": {"device_name": "X", "date": "2026-11-28"},
           "ceilings": None, "notes": [],
           "shapes": [_grouped("fp8", "f", 4.0, 2.0, gemmtune=8.0), _grouped("decode", "d", 4.0, 1.0, gemmtune=2.0),
                      _grouped("fp8", "g", 4.0, 2.0, gemmtune_fast=2.0)]}
    md = report.render_markdown(doc)
    speed = md.split("## Geomean speedup over cuBLAS", 1)[1].split("\n## ", 1)[0]
    floor = md.split("## Geomean % of the physical floor", 1)[1].split("\n## ", 1)[0]
    # public groups first, then the others in order of appearance
    assert [r["group"] for r in md_tables(speed)[0]] == ["decode", "fp8", "all"]
    # fp8, gemmtune: one shape, 4 / 8 = 0.50x; decode 4 / 2 = 2.00x; all sqrt(2 x 0.5) = 1.00x
    [fp8] = md_rows(speed, group="fp8")
    assert fp8["gemmtune default"] == "0.50× (1; 0/0/1)" and fp8["gemmtune --fast"] == "2.00× (1; 1/0/0)"
    assert md_rows(speed, group="all")[0]["gemmtune default"] == "1.00× (2; 1/0/1)"
    # % of the floor, floor / time: fp8 cuBLAS sqrt(2/4 x 2/4) = 50%; gemmtune 2 / 8 = 25% on 1 of
    # the 2 fp8 shapes (it has no time on 'g'); --fast 2 / 2 = 100%, 1 of 2; all: gemmtune
    # sqrt(25% x 50%) = 35.4%, 2 of 3 shapes; cuBLAS (25% x 50% x 50%)^(1/3) = 39.7%.
    [fp8] = md_rows(floor, group="fp8")
    assert (fp8["cuBLAS"], fp8["gemmtune default"], fp8["gemmtune --fast"]) == ("50%", "25% (1 of 2)", "100% (1 of 2)")
    [dec] = md_rows(floor, group="decode")
    assert (dec["cuBLAS"], dec["gemmtune default"], dec["gemmtune --fast"]) == ("25%", "50%", "-")
    [all_] = md_rows(floor, group="all")
    assert (all_["cuBLAS"], all_["gemmtune default"], all_["gemmtune --fast"]) == ("40%", "35% (2 of 3)", "100% (1 of 3)")


# ------------------------------------------------------------------ the fixture and its source
def test_fixture_matches_recorded_run(doc):
    rebuilt = report.bench_from_tune_run(RUN, [s["name"] for s in doc["shapes"]])
    assert doc["source"].startswith(rebuilt["source"])
    assert {k: v for k, v in doc.items() if k != "source"} == \
        json.loads(json.dumps({k: v for k, v in rebuilt.items() if k != "source"}))


def test_report_markdown_and_pngs(doc, tmp_path):
    written = report.render_file(FIXTURE, tmp_path)
    md = written["markdown"].read_text()
    assert written["markdown"] == tmp_path / "bench_fixture.md"
    for needle in ("## Targets", "**MET**", "**MISSED**", "**NOT RUN**", "## Geomean speedup over cuBLAS",
                   "## Tuning wall time", "Assembled from the recorded run"):
        assert needle in md, needle
    speedups = md_rows(md, group="all")[0]  # the first table with an 'all' row: geomean speedups
    assert speedups["gemmtune default"].startswith("1.04× (10; ")
    s16 = next(s for s in doc["shapes"] if s["name"] == "llama3_8b_qkv_m16")
    [row] = md_rows(md, group="decode", shape="llama3_8b_qkv_m16")
    assert row["M×N×K dtype"] == "16×6144×4096 bf16"
    assert row["floor µs"] == f"{s16['floor_ms'] * 1e3:.2f}"
    assert row["cuBLAS µs"] == f"{s16['cublas']['kernel']['ms'] * 1e3:.2f}"
    assert row["gemmtune default"] == row["Inductor max-autotune"] == "1.00× tie"
    [sk] = md_rows(md, method="gemmtune default", choice="`splitk:BM32-BN32-BK128-S4-W4-G8-SK64-atomic`")
    assert (sk["kernel µs"], sk["spread"], sk["× cuBLAS"]) == ("6.30", "0.6%", "1.24×")
    for s in doc["shapes"]:
        assert f"### {s['group']} / {s['name']}:" in md
    # The plots need matplotlib (gemmtune[report]; Pillow comes with it), which not every venv has
    # (the torch 2.11 audit venv has neither): the Markdown above is checked either way; the
    # no-matplotlib path is test_report_without_matplotlib_is_markdown_with_a_note.
    pytest.importorskip("matplotlib")
    from PIL import Image
    import matplotlib.image

    for kind in report.PLOTS:
        png = written[kind]
        assert png.read_bytes()[:8] == PNG_MAGIC
        assert f"]({png.name})" in md
        with Image.open(png) as im:
            im.verify()
        img = matplotlib.image.imread(png)
        assert img.ndim == 3 and img.shape[0] > 200 and img.shape[1] > 400


# ------------------------------------------------------------------ merging partial runs
def _parts(doc: dict, tmp_path: Path) -> tuple[Path, Path]:
    a, b = copy.deepcopy(doc), copy.deepcopy(doc)
    a["shapes"] = [s for s in doc["shapes"] if s["group"] in ("decode", "prefill")]
    a["header"]["groups"] = ["decode", "prefill"]
    b["shapes"] = [s for s in doc["shapes"] if s["group"] not in ("decode", "prefill")]
    b["header"].update(groups=["splitk", "odd", "square"], date="2026-11-23T01:02:03Z")
    b["notes"] = [*b["notes"], "second part"]
    pa, pb = tmp_path / "a-bench.json", tmp_path / "b-bench.json"
    # the later part first: merging puts the shapes back in group order
    report.save_bench(b, pb)
    report.save_bench(a, pa)
    return pa, pb


def test_merge_two_partial_runs(doc, tmp_path):
    pa, pb = _parts(doc, tmp_path)
    merged = report.merge_bench([report.load_bench(pb), report.load_bench(pa)])
    assert [s["name"] for s in merged["shapes"]] == [s["name"] for s in doc["shapes"]]
    assert merged["header"]["groups"] == list(report.GROUPS)
    assert merged["header"]["date"] == "2026-11-23T01:02:03Z" and merged["header"]["merged_from"] == 2
    assert merged["notes"][-1] == "second part" and len(merged["notes"]) == len(doc["notes"]) + 1
    assert len(merged["parts"]) == 2
    assert report.targets(merged) == report.targets(doc)
    # Parts measured under other ceilings: the header names each part's (the floors use their own).
    assert "Merged from" not in report.render_markdown(merged)  # same ceilings: one line says it all
    a3, b3 = report.load_bench(pa), report.load_bench(pb)
    b3["ceilings"] = copy.deepcopy(b3["ceilings"]) or {}
    b3["ceilings"]["copy"] = {"gbps": 1234.0}
    text = report.render_markdown(report.merge_bench([b3, a3]))
    assert "Merged from 2 runs" in text and "copy bandwidth 1234 GB/s" in text
    # a shape measured in both parts keeps the later part's record
    b2 = report.load_bench(pb)
    again = copy.deepcopy(b2["shapes"][0])
    again["cublas"]["kernel"]["ms"] = 1.0
    a2 = report.load_bench(pa)
    a2["shapes"].append(again)
    m2 = report.merge_bench([b2, a2])
    assert len(m2["shapes"]) == len(doc["shapes"])
    assert next(s for s in m2["shapes"] if s["key"] == again["key"])["cublas"]["kernel"]["ms"] == 1.0
    # runs from another GPU do not merge
    other = report.load_bench(pb)
    other["header"]["device_name"] = "NVIDIA H100 80GB HBM3"
    with pytest.raises(ValueError, match="device_name"):
        report.merge_bench([report.load_bench(pa), other])


def test_report_cli_merge(doc, tmp_path, capsys):
    pa, pb = _parts(doc, tmp_path)
    out = tmp_path / "merged"
    assert cli.main(["report", "--merge", str(pa), str(pb), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.split()
    merged = out / "2026-11-23-h200-torch2.11.0-cu130-triton3.6.0-bench.json"
    assert printed[0] == str(merged)
    assert len(report.load_bench(merged)["shapes"]) == len(doc["shapes"])
    assert (out / "2026-11-23-h200-torch2.11.0-cu130-triton3.6.0-bench.md").exists()
    pytest.importorskip("matplotlib")  # the PNGs (gemmtune[report]); the merge itself is checked above
    assert all((out / f"{merged.stem}-{k}.png").read_bytes()[:8] == PNG_MAGIC for k in report.PLOTS)


# ------------------------------------------------------------------ the report command
def test_report_cli_single_file(tmp_path, capsys):
    assert cli.main(["report", str(FIXTURE), "--out", str(tmp_path), "--no-plots"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "bench_fixture.md")
    assert "## Per shape: every method" in (tmp_path / "bench_fixture.md").read_text()
    assert not list(tmp_path.glob("*.png"))


@pytest.mark.parametrize("argv, needle", [
    (["missing.json"], "cannot read"),
    (["BAD"], "not a gemmtune bench JSON"),
    ([str(FIXTURE), str(FIXTURE)], "add --merge"),
    ([], "give a bench JSON"),
    (["--tune-run", "no-such-dir"], "no-such-dir"),
])
def test_report_cli_errors(tmp_path, capsys, argv, needle):
    (tmp_path / "BAD").write_text(json.dumps({"rows": []}))
    argv = [str(tmp_path / a) if a in ("missing.json", "BAD") else a for a in argv]
    assert cli.main(["report", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gemmtune report: error:") and needle in err


def test_report_cli_tune_run_reproduces_the_recorded_report(capsys):
    title = "Public suite, default space, full run (pad+ v1: aligned leading stride only)"
    assert cli.main(["report", "--tune-run", str(RUN), "--title", title]) == 0
    assert capsys.readouterr().out == (RUN / "report.md").read_text()


# ------------------------------------------------------------------ the bench command without a GPU


# ------------------------------------------------------------------ bench pieces that run on a CPU


def test_report_shows_extra_modes_and_names_the_exhaustive_reference():
    s = _shape(10.0, 0.01, gemmtune=(5.0, 0.01), gemmtune_top20=(4.0, 0.01), gemmtune_exhaustive=(4.0, 0.01))
    doc = {"schema": report.SCHEMA, "source": "", "header": {"device_name": "X", "date": "2026-11-22"},
           "ceilings": None, "notes": [], "shapes": [s]}
    assert report.methods_present(doc) == ["gemmtune", "gemmtune_top20", "gemmtune_exhaustive"]
    md = report.render_markdown(doc)
    assert "gemmtune model top-20" in md
    assert any("gemmtune exhaustive" in row.values() or "gemmtune exhaustive" in row for t in md_tables(md) for row in t)
    assert "benchmarked the whole exhaustive space" in md
    del s["methods"]["gemmtune_exhaustive"]
    assert "no exhaustive search is part of it" in report.render_markdown(doc)


def test_report_without_matplotlib_is_markdown_with_a_note(tmp_path, monkeypatch):
    # The lent GPU machine may have no matplotlib: the bench still writes its Markdown there.
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    written = report.render_file(FIXTURE, tmp_path)
    assert list(written) == ["markdown"] and not list(tmp_path.glob("*.png"))
    assert "plots not drawn: matplotlib is not installed" in written["markdown"].read_text()


# ------------------------------------------------------------------ interleaved timing rounds


# ------------------------------------------------------------------ memory ceiling and floors
def test_memory_bandwidth_is_the_higher_of_copy_and_read():
    assert report.memory_gbps({"copy": {"gbps": 2763.0}, "read": {"gbps": 4096.0}}) == 4096.0
    assert report.memory_gbps({"copy": {"gbps": 4096.0}, "read": {"gbps": 2763.0}}) == 4096.0
    assert report.memory_gbps({"copy": {"gbps": 2763.0}}) == 2763.0                    # older JSONs
    assert report.memory_gbps({"copy": {"gbps": 2763.0}, "read": {"gbps": None, "status": "error"}}) == 2763.0
    assert report.memory_gbps({}) is None and report.memory_gbps(None) is None


# H200-like ceilings (GB/s): copy read + written, the best read kernel, a fill.
_OLD_CEILINGS = {"copy": {"gbps": 2700.0}, "read": {"gbps": 4400.0}, "mm": {"bfloat16": {"tflops": 750.0}}}
_WRITE_CEILINGS = {**_OLD_CEILINGS, "write": {"gbps": 2000.0}}


def _floor(p, c):
    return report.roofline_ms(p.flops, p.min_bytes, c["mm"]["bfloat16"]["tflops"], report.memory_gbps(c),
                              p.write_bytes, report.write_gbps(c))


def test_the_floor_counts_c_at_the_write_bandwidth():
    from gemmtune.problem import Problem

    # the copy implies 1 / (2/2700 - 1/4400) = 1947.5 GB/s of writes: below the fill's 2000, unused
    assert report.write_gbps(_WRITE_CEILINGS) == 2000.0
    # write-heavy: 8192x8192x16 bf16, C is 99.6% of the bytes; its floor was C at the read rate
    big = Problem.from_sizes(8192, 8192, 16, "bf16")
    assert big.write_bytes == 8192 * 8192 * 2 and big.read_bytes == 2 * 2 * 8192 * 16
    old, new = _floor(big, _OLD_CEILINGS), _floor(big, _WRITE_CEILINGS)
    assert old == big.min_bytes / (4400.0 * 1e6)                  # no write ceiling: exactly today's floor
    assert new == pytest.approx(big.read_bytes / 4400e6 + big.write_bytes / 2000e6, rel=1e-12)
    assert new / old == pytest.approx(2.19, abs=0.01)              # 4400 / 2000 on almost every byte
    # decode: 1x4096x4096 bf16 reads 32 MiB of weights, writes 8 KiB: the floor barely moves
    dec = Problem.from_sizes(1, 4096, 4096, "bf16")
    d_old, d_new = _floor(dec, _OLD_CEILINGS), _floor(dec, _WRITE_CEILINGS)
    assert d_old == dec.min_bytes / (4400.0 * 1e6)
    assert 1.0 < d_new / d_old < 1.0005
    # a compute-bound shape keeps its compute floor
    sq = Problem.from_sizes(8192, 8192, 8192, "bf16")
    assert _floor(sq, _WRITE_CEILINGS) == _floor(sq, _OLD_CEILINGS) == sq.flops / (750.0 * 1e9)


def test_write_bandwidth_takes_the_copys_implied_rate_when_higher():
    # a slow fill: the copy, timed at 2700 GB/s read + written, wrote faster than that under the sum
    c = {"copy": {"gbps": 2700.0}, "read": {"gbps": 4400.0}, "write": {"gbps": 1000.0}}
    w = report.write_gbps(c)
    assert w == pytest.approx(1 / (2 / 2700 - 1 / 4400))
    x = 1 << 30  # the copy's own floor is then its measured time, never above it
    assert x / (4400 * 1e6) + x / (w * 1e6) == pytest.approx(2 * x / (2700 * 1e6))
    # with the fill's rate alone the copy would beat its floor (166%): what the implied rate prevents
    assert (x / 4400e6 + x / 1000e6) / (2 * x / 2700e6) == pytest.approx(1.66, abs=0.01)
    # no copy, or a read rate so low the copy left no time for writes: the fill's rate
    assert report.write_gbps({"read": {"gbps": 4400.0}, "write": {"gbps": 1000.0}}) == 1000.0
    assert report.write_gbps({"copy": {"gbps": 2700.0}, "write": {"gbps": 1000.0}}) == \
        pytest.approx(1 / (2 / 2700 - 1 / 2700))  # read = the copy's rate: writes at it too
    # no write ceiling (older JSONs, a failed one): None, and the floor is min_bytes / memory_gbps
    for c in ({"copy": {"gbps": 2700.0}}, {"copy": {"gbps": 2700.0}, "write": {"gbps": None, "status": "error"}},
              {"copy": {"gbps": 2700.0}, "write": {"gbps": float("nan")}}, {}, None):
        assert report.write_gbps(c) is None
    assert report.roofline_ms(10**9, 4 * 10**9, 1000.0, 1000.0, 3 * 10**9, None) == 4.0


def test_report_names_the_write_ceiling_and_the_floors_sum(doc):
    new = copy.deepcopy(doc)
    new["ceilings"]["copy"] = {"gbps": 2700.0}
    new["ceilings"]["read"] = {"gbps": 4400.0, "kernel": "gemv_bf16"}
    new["ceilings"]["write"] = {"gbps": 2000.0, "kernel": "fill_fp32", "kernels": {"fill_fp32": {"gbps": 2000.0}}}
    md = report.render_markdown(new)
    assert "write bandwidth 2000 GB/s (fill_fp32 2000)" in md
    assert "read bytes / read bandwidth + write bytes / write bandwidth" in md
    assert "the write bandwidth the write ceiling's (2000 GB/s)" in md
    new["ceilings"]["write"] = {"gbps": 1000.0}
    assert "above the write ceiling's 1000 GB/s (1948 GB/s)" in report.render_markdown(new)
    new["ceilings"]["write"] = {"gbps": None, "status": "error", "reason": "x"}
    md = report.render_markdown(new)
    assert "write bandwidth not measured (error)" in md and "+ write bytes" not in md
    assert "minimum bytes / memory bandwidth" in md  # no write ceiling: the floor is the old one


def test_report_says_how_the_floor_is_computed(doc):
    old = report.render_markdown(doc)
    assert "minimum bytes / copy bandwidth" in old
    new = copy.deepcopy(doc)
    new["ceilings"]["read"] = {"gbps": 4500.0, "kernel": "gemv_bf16",
                               "kernels": {"sum_fp32": {"gbps": 4200.0}, "gemv_bf16": {"gbps": 4500.0}}}
    md = report.render_markdown(new)
    assert "read bandwidth 4500 GB/s (best of sum_fp32 4200, gemv_bf16 4500)" in md
    assert "the higher of the copy and the read bandwidth (4500 GB/s)" in md
    assert "shown as measured, never capped" in md
    # fp8 floors use twice the measured bf16 peak (bench.suite.measure_shape): the line says so
    assert "fp8: twice the bf16 peak" not in md
    new["shapes"][0]["dtype"] = "float8_e4m3fn"
    assert "max(flops / mm peak of its dtype (fp8: twice the bf16 peak, no fp8 peak is measured)" in \
        report.render_markdown(new)


# ------------------------------------------------------------------ "same kernel as cuBLAS"
def test_same_kernel_as_cublas_marker(doc):
    s = _shape(10.0, 0.01, gemmtune=(10.75, 0.01), gemmtune_fast=(8.0, 0.01), gemmtune_top5=(9.0, 0.0),
               inductor=(10.25, 0.0))
    s["cublas"]["choice"] = "aten"
    for m, c in (("gemmtune", "aten"), ("gemmtune_fast", "pad+aten"), ("gemmtune_top5", "triton_mm:BM16-BN32-BK16-S2-W2-G1"),
                 ("inductor", "aten + 1 other kernel")):
        s["methods"][m]["choice"] = c
    assert [report.same_kernel_as_cublas(s, m) for m in ("gemmtune", "gemmtune_fast", "gemmtune_top5", "inductor")] \
        == [True, False, False, False]
    s2 = copy.deepcopy(s)
    s2["methods"]["inductor"]["choice"] = "aten"  # Inductor's extern mm: torch.mm again
    assert report.same_kernel_as_cublas(s2, "inductor")
    s2["methods"]["gemmtune"]["status"] = "wrong"  # no time, nothing to mark
    assert not report.same_kernel_as_cublas(s2, "gemmtune")

    d = copy.deepcopy(doc)
    s.update(group="prefill", name="same_kernel_row", m=64, n=64, k=64, floor_ms=5.0)
    d["shapes"] = [s]
    md = report.render_markdown(d)
    # the measured numbers stay as they are; only the marker is added
    [row] = md_rows(md, group="prefill", shape="same_kernel_row")
    assert (row["floor µs"], row["cuBLAS µs"]) == ("5000.00", "10000.00")
    assert [v for k, v in row.items() if k not in ("group", "shape", "M×N×K dtype", "floor µs", "cuBLAS µs")] \
        == ["0.93× †", "1.25×", "1.11×", "0.98×"]
    [default] = md_rows(md, method="gemmtune default", choice="`aten`")
    assert (default["kernel µs"], default["× cuBLAS"]) == ("10750.00", "0.93× †")
    [fast] = md_rows(md, method="gemmtune --fast", choice="`pad+aten`")
    assert (fast["kernel µs"], fast["× cuBLAS"]) == ("8000.00", "1.25×")
    assert report.SAME_NOTE in md and "† same kernel as cuBLAS: the difference is noise." in md
    # no marker where no method ran cuBLAS's kernel
    d["shapes"][0]["methods"]["gemmtune"]["choice"] = "pad+aten"
    assert "†" not in report.render_markdown(d)


def test_committed_h200_bench_still_renders_with_the_marker(tmp_path):
    src = next((ROOT / "benchmarks" / "results" / "2026-11-22-h200-bench").glob("*-bench.json"))
    written = report.render_file(src, tmp_path, plots=False)
    md = written["markdown"].read_text()
    # the recorded numbers, marked where a mode ran cuBLAS's own kernel ('aten')
    [row] = md_rows(md, group="prefill", shape="llama3_8b_qkv_m2048")
    assert (row["M×N×K dtype"], row["floor µs"], row["cuBLAS µs"]) == ("2048×6144×4096 bf16", "128.42", "129.13")
    methods = [v for k, v in row.items() if k not in ("group", "shape", "M×N×K dtype", "floor µs", "cuBLAS µs")]
    assert methods == ["0.93× †", "0.87× †", "0.88× †", "0.99× †", "0.91×", "0.83×"]
    [odd] = md_rows(md, group="odd", shape="unaligned_333")
    assert not any("†" in v for v in odd.values()) and list(odd.values()).count("1.28×") >= 3  # pad+aten: not marked
    assert "minimum bytes / copy bandwidth" in md and "read bandwidth" not in md
    assert report.SAME_NOTE in md


def test_module_doctests():
    import doctest
    import importlib

    attempted = 0
    for name in ("report", "report.stats", "report.files", "bench.rounds", "bench.modes", "bench.settings"):
        res = doctest.testmod(importlib.import_module(f"gemmtune.{name}"))
        assert res.failed == 0, name
        attempted += res.attempted
    assert attempted > 0




def test_report_says_whether_a_mode_never_timed_the_fastest_choice_or_timed_it_slower():
    """A gemmtune mode more than 5% behind the fastest gemmtune choice of the shape gets a line from
    its own sweep (bench record ``sweep``): never timed it, timed it slower, or saw it fail. A mode
    without a sweep (JSONs before session 22), or within 5%, gets none."""
    s = _shape(0.0306, 0.01, gemmtune=(0.0172, 0.01), gemmtune_fast=(0.0306, 0.01), gemmtune_top5=(0.0175, 0.01),
               gemmtune_top20=(0.025, 0.01), gemmtune_exhaustive=(0.020, 0.01))
    m = s["methods"]
    s["cublas"]["choice"] = "aten"
    m["gemmtune"]["choice"] = "skinny:BM1-BN32-BK128-SK1-S1-W4-core-det"
    m["gemmtune_fast"].update(choice="aten", sweep=[{"choice": "aten", "ms": 0.0302},
                                                    {"choice": "skinny:BM1-BN32-BK64-SK1-S1-W4-core-det", "ms": 0.041}])
    m["gemmtune_top5"].update(choice="skinny:BM1-BN32-BK256-SK1-S1-W4-core-det",
                              sweep=[{"choice": "skinny:BM1-BN32-BK128-SK1-S1-W4-core-det", "ms": 0.019}])
    m["gemmtune_top20"].update(choice="triton_mm:x", sweep=[{"choice": "triton_mm:x", "ms": 0.024},
                               {"choice": "skinny:BM1-BN32-BK128-SK1-S1-W4-core-det", "status": "timeout", "reason": "r"}])
    m["gemmtune_exhaustive"].update(choice="triton_mm:y", sweep=[{"choice": "skinny:BM1-BN32-BK128-SK1-S1-W4-core-det",
                                                                  "ms": 0.017}, {"choice": "triton_mm:y", "ms": 0.0169}])
    from gemmtune.report.records import sweep_misses

    lines = sweep_misses(s)
    best = "`skinny:BM1-BN32-BK128-SK1-S1-W4-core-det`"
    assert lines == [
        f"gemmtune --fast: never timed {best} (17.2 µs here), the fastest gemmtune choice; it kept `aten` (30.6 µs)",
        f"gemmtune model top-20: {best} failed in its sweep (timeout); it kept `triton_mm:x` (25.0 µs)",
        f"gemmtune exhaustive: timed {best} at 17.0 µs in its sweep (17.2 µs here); it kept `triton_mm:y` (20.0 µs)"]
    # top-5 is within 5% of the fastest (17.5 against 17.2 µs): no line. The Markdown carries the lines.
    doc = {"schema": report.SCHEMA, "source": "", "header": {"device_name": "X", "date": "2026-11-27"},
           "ceilings": None, "notes": [], "shapes": [s]}
    md = report.render_markdown(doc)
    assert "Why a mode missed the fastest gemmtune choice (its own sweep):" in md and all(f"- {x}" in md for x in lines)
    for r in m.values():
        r.pop("sweep", None)
    assert "Why a mode missed" not in report.render_markdown(doc)


def test_tuning_plot_star_is_the_mean_of_its_points(tmp_path, monkeypatch):
    # The star of plot_tuning: mean tuning time and geomean fraction of the best over the points
    # drawn. It divided the summary's total time (which holds the 10 s of a shape where the mode
    # found no kernel, so has no point) by the points: (2 + 10) / 1 = 12 s instead of 2 s.
    pytest.importorskip("matplotlib")
    from matplotlib.axes import Axes
    calls = []
    real = Axes.scatter
    monkeypatch.setattr(Axes, "scatter", lambda self, x, y, *a, **k: (calls.append((list(x), list(y))),
                                                                       real(self, x, y, *a, **k))[1])
    ok = _shape(10.0, 0.0, gemmtune=(5.0, 0.0))
    ok["methods"]["gemmtune"]["tune_s"] = 2.0
    failed = _shape(10.0, 0.0)
    failed["methods"]["gemmtune"] = {"status": "error", "reason": "no candidate passed", "tune_s": 10.0}
    doc = {"schema": report.SCHEMA, "source": "", "header": {"device_name": "X", "date": "2026-11-28"},
           "ceilings": None, "notes": [], "shapes": [ok, failed]}
    report.plot_tuning(doc, tmp_path / "t.png")
    points, star = calls
    assert points == ([2.0], [1.0])   # one point: 2 s, best 5.0 / its 5.0
    assert star == ([2.0], [1.0])
