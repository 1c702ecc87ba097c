"""Reports from bench JSONs (gemmtune.report), merging partial runs, and what of the bench
runner (gemmtune.benchmark) can be checked without a GPU.

The fixture tests/data/bench_fixture.json is 10 shapes of the recorded H200 run
benchmarks/results/2026-11-21-h200-public-full, in the bench JSON format, assembled by
report.bench_from_tune_run (test_fixture_matches_recorded_run rebuilds it).
"""

from __future__ import annotations

import copy
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from gemmtune import benchmark, cli, report
from gemmtune.bench import modes as bench_modes
from gemmtune.bench import suite as bench_suite
from gemmtune.configs import Choice
from gemmtune.problem import Problem
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
    assert all(r["verdict"] == "NOT RUN" for m in ("gemmtune_fast", "gemmtune_top5") for r in t[m].values())


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
def test_bench_without_gpu_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cli.main(["bench", "--limit", "1"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"gemmtune bench: error: {benchmark.CUDA_ERROR}"
    with pytest.raises(ValueError, match="bench needs a CUDA GPU"):
        benchmark.run([], out_dir="unused")
    # A misspelt opt-in mode is named before anything else is looked at.
    assert cli.main(["bench", "--extra-modes", "top20,top50"]) == 2
    assert "unknown extra mode 'top50'" in capsys.readouterr().err


@pytest.mark.parametrize("fail", [False, True], ids=["returns", "raises"])
def test_bench_run_restores_process_settings(tmp_path, monkeypatch, fail):
    """bench.suite.run sets the compile caches' environment, tf32, Inductor's config, its
    autotuning hook and TunableOp for its own run, and puts each back when it returns or raises.
    Everything that needs a GPU is faked: the run goes through the part that sets them."""
    import torch._inductor.config as icfg
    from gemmtune.device import DeviceInfo

    monkeypatch.setenv("TRITON_CACHE_DIR", "/before/triton")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    # torch's backends flag and Inductor's config are set by hand, put back below (monkeypatch
    # would delete them on teardown: neither holds the attribute in its own __dict__).
    tf32, caches = torch.backends.cuda.matmul.allow_tf32, icfg.force_disable_caches
    torch.backends.cuda.matmul.allow_tf32, icfg.force_disable_caches = True, False
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(DeviceInfo, "from_torch", classmethod(lambda cls, *a, **k: DeviceInfo.lookup("H100")))
    ceilings = {"copy": {"gbps": 1.0}, "read": None, "mm": {}}
    monkeypatch.setattr(bench_suite, "measure_ceilings", lambda timer: ceilings)
    monkeypatch.setattr(bench_suite, "tune_phase", lambda *a, **k: {"notes": [], "modes": {}, "tuned": {}, "skipped": {},
                                                                  "extra_s": {}, "errors": {}})
    seen, installed = {}, []
    monkeypatch.setattr(bench_suite, "_install_autotune_log", lambda log: installed.append(log) or True)
    monkeypatch.setattr(bench_suite, "_remove_autotune_log", lambda log: installed.remove(log))

    class FakeTunableOp:
        closed = 0

        def __init__(self, scratch):
            pass

        def close(self):
            FakeTunableOp.closed += 1

    monkeypatch.setattr(bench_suite, "TunableOp", FakeTunableOp)

    def measure_shape(*a, **k):
        seen.update(triton=os.environ.get("TRITON_CACHE_DIR"), inductor=os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
                    tf32=torch.backends.cuda.matmul.allow_tf32, caches=icfg.force_disable_caches,
                    hooks=len(installed))
        if fail:
            raise RuntimeError("a GPU fault")
        return {"cublas": None, "methods": {}}

    monkeypatch.setattr(bench_suite, "measure_shape", measure_shape)
    shapes = _shapes()[:1]
    try:
        if fail:
            with pytest.raises(RuntimeError, match="a GPU fault"):
                benchmark.run(shapes, out_dir=tmp_path, render=False, log=lambda msg: None)
        else:
            benchmark.run(shapes, out_dir=tmp_path, render=False, log=lambda msg: None)
        after = torch.backends.cuda.matmul.allow_tf32, icfg.force_disable_caches
    finally:
        torch.backends.cuda.matmul.allow_tf32, icfg.force_disable_caches = tf32, caches
    # Set while it ran ...
    assert seen["triton"].endswith("triton-bench") and seen["inductor"].endswith("inductor")
    assert seen["tf32"] is False and seen["caches"] is True and seen["hooks"] == 1
    # ... and put back afterwards.
    assert os.environ.get("TRITON_CACHE_DIR") == "/before/triton" and "TORCHINDUCTOR_CACHE_DIR" not in os.environ
    assert after == (True, False)
    assert installed == [] and FakeTunableOp.closed >= 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="the real process would run the benchmark")
def test_bench_without_gpu_in_a_real_process(tmp_path):
    r = subprocess.run([sys.executable, "-m", "gemmtune.cli", "bench", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "bench needs a CUDA GPU; use `gemmtune report` to render recorded results" in r.stderr
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------ bench pieces that run on a CPU
def test_supported_modes_follow_the_tune_options():
    old = {"space", "store"}  # a tuner without the model's top-k options
    modes, skipped = benchmark.supported_modes(fields=old)
    assert list(modes) == ["gemmtune"] and sorted(skipped) == ["gemmtune_fast", "gemmtune_top5"]
    assert "'fast'" in skipped["gemmtune_fast"] and "'benchmark_space'" in skipped["gemmtune_top5"]
    modes, skipped = benchmark.supported_modes()  # this version's TuneOptions
    assert modes == benchmark.TUNE_MODES and skipped == {}


def test_extra_modes_are_opt_in_and_checked():
    assert benchmark.extra_modes(None) == [] and benchmark.extra_modes("") == []
    assert benchmark.extra_modes("top20, exhaustive,top20") == ["gemmtune_top20", "gemmtune_exhaustive"]
    with pytest.raises(ValueError, match="unknown extra mode 'top50'.*top20, exhaustive"):
        benchmark.extra_modes("top20,top50")
    modes, skipped = benchmark.supported_modes(benchmark.extra_modes("exhaustive"))
    assert list(modes) == [*benchmark.TUNE_MODES, "gemmtune_exhaustive"] and skipped == {}
    assert modes["gemmtune_exhaustive"] == {"space": "exhaustive", "benchmark_space": "SAME"}
    assert benchmark.supported_modes()[0] == benchmark.TUNE_MODES  # not asked: not run


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


# Inductor's generated code, in the shape torch._inductor.select_algorithm writes it
# (template decorator, @triton.jit, the def, then the constexpr defines).
_TEMPLATE_CODE = """
triton_tem_fused_mm_0 = async_compile.triton('triton_tem_fused_mm_0', '''
import triton
import triton.language as tl

@triton_heuristics.template(
    num_stages=3,
    num_warps=8,
    triton_meta={'signature': {'arg_A': '*bf16'}, 'device': DeviceProperties(type='cuda', index=0)},
    inductor_meta={'kernel_name': 'triton_tem_fused_mm_0'},
)
@triton.jit
def triton_tem_fused_mm_0(arg_A, arg_B, out_ptr0):
    EVEN_K : tl.constexpr = True
    ALLOW_TF32 : tl.constexpr = False
    ACC_TYPE : tl.constexpr = tl.float32
    BLOCK_M : tl.constexpr = 128
    BLOCK_N : tl.constexpr = 64
    BLOCK_K : tl.constexpr = 32
    GROUP_M : tl.constexpr = 8
    A = arg_A
''', device_str='cuda')
"""
_TMA_CODE = _TEMPLATE_CODE.replace("    A = arg_A\n", "    a_desc = tl.make_tensor_descriptor(A)\n")
_POINTWISE = "\ntriton_poi_fused_0 = async_compile.triton('x', '''\n@triton.jit\ndef triton_poi_fused_0(x):\n    pass\n''')\n"


@pytest.mark.parametrize("codes, want", [
    ([_TEMPLATE_CODE], "triton_mm:BM128-BN64-BK32-S3-W8-G8"),
    ([_TMA_CODE], "triton_mm_tma:BM128-BN64-BK32-S3-W8-G8"),
    (["buf0 = empty_strided_cuda((64, 64), (64, 1), torch.bfloat16)\nextern_kernels.mm(arg0_1, arg1_1, out=buf0)"],
     "aten"),
    (["extern_kernels.bmm(reinterpret_tensor(arg0_1), reinterpret_tensor(arg1_1), out=buf0)" + _POINTWISE],
     "aten_bmm + 1 other kernel"),
    (["def call(args):\n    return ()"], None),
])
def test_inductor_choice_from_generated_code(codes, want):
    assert benchmark.inductor_choice(codes) == want


def test_nvmmh_config_to_choice():
    def kernel(cta, warp, stages, split, swizzle):
        return SimpleNamespace(cta_tile_m=cta[0], cta_tile_n=cta[1], cta_tile_k=cta[2], warp_tile_m=warp[0],
                               warp_tile_n=warp[1], warp_tile_k=warp[2], stages=stages, split_k=split,
                               swizzle_factor=swizzle)

    # nvMatmulHeuristics 0.1.0.27's H200 answers for 32x32x28672 and 4096^3 bf16
    c = benchmark.nvmmh_to_choice(kernel((64, 32, 64), (16, 32, 64), 8, 14, 1))
    assert c.id == "splitk:BM64-BN32-BK64-S8-W4-G1-SK14-det"
    c = benchmark.nvmmh_to_choice(kernel((256, 128, 64), (64, 64, 64), 4, 1, 8))
    assert c.id == "triton_mm:BM256-BN128-BK64-S4-W8-G8"
    assert Choice.parse(c.id) == c


def test_nvmmh_with_the_library():
    nv = pytest.importorskip("nvMatmulHeuristics")
    assert benchmark._nvmmh_gpu(nv, "NVIDIA H200").name == "H200_SXM"
    assert benchmark._nvmmh_gpu(nv, "NVIDIA H100 80GB HBM3").name == "H100_SXM"
    assert benchmark._nvmmh_gpu(nv, "NVIDIA H100 PCIe").name == "H100_PCIE"
    assert benchmark._nvmmh_gpu(nv, "NVIDIA A100-SXM4-80GB").name == "A100_SXM_80GB"
    with pytest.raises(ValueError, match="knows no GPU"):
        benchmark._nvmmh_gpu(nv, "cpu (Triton interpreter)")
    for p in (Problem.from_sizes(32, 32, 28672, "bf16"), Problem.from_sizes(333, 4097, 1025, "bf16"),
              Problem.from_sizes(64, 64, 32768, "fp32")):
        choices = benchmark.nvmmh_choices(p, "NVIDIA H200", 5)
        assert 1 <= len(choices) <= 5
        assert all(c.family in ("triton_mm", "splitk") and Choice.parse(c.id) == c for c in choices)


def _fake_tuner(calls: list):
    def tune(problems, *, space="default", store=None, out=None, progress=True, seed=0, env=None, table=None,
             fast=False, benchmark_space="SAME"):
        calls.append({"n": len(problems), "space": space, "store": store, "env": env, "fast": fast,
                      "benchmark_space": benchmark_space, "table": table})
        shapes = [SimpleNamespace(problem=s.problem, best="aten", best_ms=0.01, tune_s=0.5, tried=1, statuses={})
                  for s in problems]
        return SimpleNamespace(shapes=shapes, wall_s=1.0, measured=len(problems), startup_s=0.25,
                               compile_workers=0)
    return tune


def _shapes():
    from gemmtune.shapes import Shape
    return [Shape("splitk", "tiny", Problem.from_sizes(32, 32, 4096, "fp16")),
            Shape("odd", "odd", Problem.from_sizes(17, 33, 65, "fp16"))]


def test_tune_phase_runs_every_mode_fresh(tmp_path, monkeypatch):
    pytest.importorskip("nvMatmulHeuristics")
    calls = []
    prov = {"device_name": "NVIDIA H200", "capability": "9.0", "torch": "x", "triton": "x", "gemmtune": "x"}
    phase = benchmark.tune_phase(_shapes(), tune_fn=_fake_tuner(calls), scratch=tmp_path, seed=0, provenance=prov)
    assert list(phase["tuned"]) == [*benchmark.TUNE_MODES, *benchmark.NVMMH_TOPK] and phase["skipped"] == {}
    assert [c["fast"] for c in calls[:3]] == [False, True, False]
    assert [(c["space"], c["benchmark_space"]) for c in calls[:3]] == \
        [("default", "SAME"), ("default", "SAME"), ("exhaustive", 5)]
    # nothing is reused between modes: a store and a Triton cache each
    assert len({c["store"] for c in calls}) == len({c["env"]["TRITON_CACHE_DIR"] for c in calls}) == 5
    assert all(m["startup_s"] == 0.25 and m["wall_s"] == 1.0 for m in phase["modes"].values())
    top1, top5 = calls[3]["table"], calls[4]["table"]
    assert all(len(v) == 1 for v in top1.entries.values()) and all(1 <= len(v) <= 5 for v in top5.entries.values())
    assert all(top5.entries[k][0] == v[0] for k, v in top1.entries.items())  # top-1 is top-5's first
    assert set(phase["extra_s"]["nvmmh_top1"]) == set(top1.entries)  # the query time is added per shape
    # without the library, nvMMH is skipped with the reason, and gemmtune still runs
    monkeypatch.setattr(bench_modes, "dist_version", lambda dist: None)
    calls.clear()
    phase = benchmark.tune_phase(_shapes(), tune_fn=_fake_tuner(calls), scratch=tmp_path, seed=0, provenance=prov)
    assert len(calls) == 3 and phase["skipped"]["nvmmh_top5"] == "nvidia-matmul-heuristics is not installed"


def test_measure_shape_record_on_cpu():
    from gemmtune.bench.runner import WorkerState
    from gemmtune.bench.timing import WallTimer

    shape = _shapes()[1]
    key = shape.problem.key
    tuned = {"gemmtune": {key: SimpleNamespace(best="triton_mm:BM16-BN32-BK16-S2-W2-G1", best_ms=0.01, tune_s=1.5, tried=3, statuses={})},
             "gemmtune_top20": {key: SimpleNamespace(best="aten", best_ms=0.01, tune_s=0.5, tried=21, statuses={})},
             "nvmmh_top1": {key: SimpleNamespace(best=None, best_ms=None, tune_s=0.2, tried=1,
                                                 statuses={"wrong": 1})}}
    skipped = {"gemmtune_fast": "no 'fast'", "gemmtune_top5": "no 'benchmark_space'",
               "gemmtune_exhaustive": "the tuner failed: RuntimeError: x"}
    ceilings = {"copy": {"gbps": 4000.0}, "mm": {"float16": {"tflops": 800.0}}}
    rec = benchmark.measure_shape(shape, WorkerState(timer=WallTimer(), device="cpu"), ceilings, tuned, skipped,
                                  seed=0, inductor_log=None, extra_s={"nvmmh_top1": {key: 0.05}},
                                  errors={"nvmmh_top5": {key: "nvMatmulHeuristics returned no configuration"}})
    assert rec["floor_ms"] == report.roofline_ms(2 * 17 * 33 * 65, shape.problem.min_bytes, 800.0, 4000.0)
    assert rec["bound"] == "memory" and rec["cublas"]["status"] == "ok" and rec["cublas"]["choice"] == "aten"
    g = rec["methods"]["gemmtune"]
    assert g["status"] == "ok" and g["choice"] == "triton_mm:BM16-BN32-BK16-S2-W2-G1" and g["tune_s"] == 1.5 and g["rel_err"] < 1e-3
    assert g["kernel"]["ms"] > 0 and g["kernel"]["repeats"] == 3 and g["kernel"]["spread"] is not None
    m = rec["methods"]
    assert m["gemmtune_fast"] == {"status": "skipped", "reason": "no 'fast'"}
    # Opt-in modes are recorded when they ran (or were asked for and failed), never otherwise.
    assert m["gemmtune_top20"]["status"] == "ok" and m["gemmtune_top20"]["candidates"] == 21
    assert m["gemmtune_exhaustive"] == {"status": "skipped", "reason": "the tuner failed: RuntimeError: x"}
    assert list(m)[:5] == ["gemmtune", "gemmtune_fast", "gemmtune_top5", "gemmtune_top20", "gemmtune_exhaustive"]
    assert m["nvmmh_top1"]["status"] == "error" and "wrong" in m["nvmmh_top1"]["reason"]
    assert m["nvmmh_top5"]["reason"] == "nvMatmulHeuristics returned no configuration"
    assert m["inductor"] == {"status": "skipped", "reason": "--skip-inductor"}
    json.dumps(rec, allow_nan=False)  # what the bench JSON holds


def test_report_without_matplotlib_is_markdown_with_a_note(tmp_path, monkeypatch):
    # The lent GPU machine may have no matplotlib: the bench still writes its Markdown there.
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    written = report.render_file(FIXTURE, tmp_path)
    assert list(written) == ["markdown"] and not list(tmp_path.glob("*.png"))
    assert "plots not drawn: matplotlib is not installed" in written["markdown"].read_text()


# ------------------------------------------------------------------ interleaved timing rounds
def _fake_entries(table: dict, calls: list, fail: dict | None = None):
    """name -> thunk; round j of ``name`` gives Timing(table[name][j]) (ms, spread)."""
    from gemmtune.bench.timing import Timing

    done = {n: 0 for n in table}

    def thunk(name):
        def run(samples):
            calls.append((name, samples))
            j = done[name]
            done[name] += 1
            if (fail or {}).get(name) == j:
                raise RuntimeError(f"{name} broke in round {j}")
            ms, spread = table[name][j]
            return Timing(ms, 0.5, samples, spread)
        return run

    return {n: thunk(n) for n in table}


def test_rotation_spreads_every_entry_over_early_and_late_places():
    assert benchmark.rotation(["a", "b", "c", "d"], 4) == [
        ["a", "b", "c", "d"], ["b", "c", "d", "a"], ["c", "d", "a", "b"], ["d", "a", "b", "c"]]
    # 7 entries, 4 rounds: round r starts at floor(7r/4) = 0, 1, 3, 5
    assert [r[0] for r in benchmark.rotation(list("abcdefg"), 4)] == ["a", "b", "d", "f"]
    assert benchmark.rotation(list("abcdefg"), 4)[2] == list("defgabc")
    assert benchmark.rotation([], 4) == []


def test_round_robin_order_samples_and_aggregation_exact_values():
    table = {
        # round medians 1.75 2.0 2.0 2.25 -> median 2.0; range 0.5 / 2.0 = 0.25 beats the
        # median within-round spread (0.125 + 0.25) / 2 = 0.1875
        "cublas": [(1.75, 0.125), (2.0, 0.5), (2.0, 0.25), (2.25, 0.0625)],
        # round medians 4 4 4.5 4 -> median 4.0; range 0.5 / 4 = 0.125 < within (0.25 + 0.5) / 2 = 0.375
        "gemmtune": [(4.0, 0.25), (4.0, 0.5), (4.5, 0.25), (4.0, 0.5)],
        # the median of round medians, not their mean: 1 1 1 5 -> 1.0 (the mean would be 2.0)
        "inductor": [(1.0, 0.0), (1.0, 0.0), (1.0, 0.0), (5.0, 0.0)],
        "nvmmh_top1": [(3.0, 0.0), (3.0, 0.0), (3.0, 0.0), (3.0, 0.0)],
    }
    calls = []
    out = benchmark.round_robin(_fake_entries(table, calls), 20, 4)
    # 4 rounds of ceil(20 / 4) = 5 samples, each round one place further along
    assert calls == [(n, 5) for n in ["cublas", "gemmtune", "inductor", "nvmmh_top1",
                                      "gemmtune", "inductor", "nvmmh_top1", "cublas",
                                      "inductor", "nvmmh_top1", "cublas", "gemmtune",
                                      "nvmmh_top1", "cublas", "gemmtune", "inductor"]]
    k = benchmark.aggregate(out["cublas"])
    assert k == {"ms": 2.0, "spread": 0.25, "repeats": 20, "rounds": 4, "round_ms": [1.75, 2.0, 2.0, 2.25],
                 "round_spread": [0.125, 0.5, 0.25, 0.0625], "within_spread": 0.1875, "across_spread": 0.25}
    k = benchmark.aggregate(out["gemmtune"])
    assert (k["ms"], k["spread"], k["within_spread"], k["across_spread"]) == (4.0, 0.375, 0.375, 0.125)
    k = benchmark.aggregate(out["inductor"])
    assert k["ms"] == 1.0 and k["spread"] == 4.0 and k["round_ms"] == [1.0, 1.0, 1.0, 5.0]
    assert benchmark.aggregate(out["nvmmh_top1"])["spread"] == 0.0


def test_round_robin_uneven_repeats_and_a_failing_entry():
    # 10 repeats over 4 rounds: ceil(10 / 4) = 3 samples a round (12 in all); fewer repeats
    # than rounds: one sample a round, as many rounds as repeats
    calls = []
    table = {"a": [(1.0, 0.0)] * 4, "b": [(2.0, 0.0)] * 4, "c": [(3.0, 0.0)] * 4}
    out = benchmark.round_robin(_fake_entries(table, calls, fail={"b": 1}), 10, 4)
    assert {s for _, s in calls} == {3}
    assert isinstance(out["b"], RuntimeError) and "round 1" in str(out["b"])
    assert [n for n, _ in calls].count("b") == 2  # left out of the rounds after it broke
    assert benchmark.aggregate(out["a"])["repeats"] == 12 and len(out["c"]) == 4
    calls.clear()
    out = benchmark.round_robin(_fake_entries(table, calls), 3, 4)
    assert calls == [("a", 1), ("b", 1), ("c", 1), ("b", 1), ("c", 1), ("a", 1), ("c", 1), ("a", 1), ("b", 1)]
    assert benchmark.aggregate(out["a"])["rounds"] == 3


def test_measure_shape_times_every_verified_method_in_the_same_rounds(monkeypatch):
    """cuBLAS, the tuned kernels and Inductor's compiled function take part in the same
    rounds; a method whose output fails the fp64 check is never timed."""
    from gemmtune.bench import measure
    from gemmtune.bench.measure import WorkerState
    from gemmtune.bench.timing import WallTimer

    shape = _shapes()[1]
    key = shape.problem.key
    cfg = "triton_mm:BM16-BN32-BK16-S2-W2-G1"
    tuned = {m: {key: SimpleNamespace(best=c, best_ms=0.01, tune_s=1.5, tried=3, statuses={})}
             for m, c in (("gemmtune", cfg), ("gemmtune_fast", "aten"), ("nvmmh_top1", cfg))}
    skipped = {"gemmtune_top5": "no 'benchmark_space'"}
    errors = {"nvmmh_top5": {key: "nvMatmulHeuristics returned no configuration"}}
    state = WorkerState(timer=WallTimer(repeats=8, warmup=0), device="cpu")

    checks = []
    real_compare = measure.compare

    def compare(out, ref, tol):  # the 4th check (nvMMH top-1's) fails
        checks.append(1)
        r = real_compare(out, ref, tol)
        return r if len(checks) != 4 else type(r)(False, 1.0, 1.0, "made wrong by the test")
    monkeypatch.setattr(measure, "compare", compare)
    monkeypatch.setattr(bench_suite, "compile_inductor", lambda p, st, log: (
        {"status": "ok", "tune_s": 2.5, "choice": "aten", "autotune": [], "rel_err": 0.0},
        lambda i: torch.mm(*st.inputs[i])))
    seen = {}
    real_rr = benchmark.round_robin

    def logged(name, thunk):
        def run(samples):
            seen["calls"].append(name)
            return thunk(samples)
        return run

    def spy(entries, repeats, rounds):
        seen.update(names=list(entries), repeats=repeats, rounds=rounds, calls=[])
        return real_rr({n: logged(n, e) for n, e in entries.items()}, repeats, rounds)
    monkeypatch.setattr(bench_suite, "round_robin", spy)

    rec = benchmark.measure_shape(shape, state, {"copy": {"gbps": 4000.0}, "mm": {"float16": {"tflops": 800.0}}},
                                  tuned, skipped, seed=0, inductor_log=benchmark.AutotuneLog(), errors=errors)
    assert len(checks) == 4  # cuBLAS, default, --fast, nvMMH top-1; each once
    assert seen["names"] == ["cublas", "gemmtune", "gemmtune_fast", "inductor"]
    assert (seen["repeats"], seen["rounds"]) == (8, 4)
    assert seen["calls"] == [n for order in benchmark.rotation(seen["names"], 4) for n in order]
    m = rec["methods"]
    assert m["nvmmh_top1"]["status"] == "wrong" and "kernel" not in m["nvmmh_top1"]
    for r in (rec["cublas"], m["gemmtune"], m["gemmtune_fast"], m["inductor"]):
        k = r["kernel"]
        assert r["status"] == "ok" and list(r)[:3] == ["status", "kernel", "eager"]
        assert (k["rounds"], k["repeats"], len(k["round_ms"])) == (4, 8, 4)
        assert k["ms"] == statistics.median(k["round_ms"])
        assert k["spread"] == max(statistics.median(k["round_spread"]),
                                  (max(k["round_ms"]) - min(k["round_ms"])) / k["ms"])
    assert m["inductor"]["tune_s"] == 2.5 and m["gemmtune"]["tune_s"] == 1.5 and m["gemmtune"]["candidates"] == 3
    assert m["gemmtune_top5"]["status"] == "skipped" and m["nvmmh_top5"]["status"] == "error"
    json.dumps(rec, allow_nan=False)


# ------------------------------------------------------------------ memory ceiling and floors
def test_memory_bandwidth_is_the_higher_of_copy_and_read():
    assert report.memory_gbps({"copy": {"gbps": 2763.0}, "read": {"gbps": 4096.0}}) == 4096.0
    assert report.memory_gbps({"copy": {"gbps": 4096.0}, "read": {"gbps": 2763.0}}) == 4096.0
    assert report.memory_gbps({"copy": {"gbps": 2763.0}}) == 2763.0                    # older JSONs
    assert report.memory_gbps({"copy": {"gbps": 2763.0}, "read": {"gbps": None, "status": "error"}}) == 2763.0
    assert report.memory_gbps({}) is None and report.memory_gbps(None) is None


def test_measure_shape_floor_uses_the_read_bandwidth_when_higher():
    from gemmtune.bench.runner import WorkerState
    from gemmtune.bench.timing import WallTimer

    shape = _shapes()[1]  # 17x33x65 fp16: memory-bound at these ceilings
    p = shape.problem
    for copy_gbps, read_gbps, used in ((2000.0, 4000.0, 4000.0), (4000.0, 2000.0, 4000.0)):
        ceilings = {"copy": {"gbps": copy_gbps}, "read": {"gbps": read_gbps}, "mm": {"float16": {"tflops": 800.0}}}
        rec = benchmark.measure_shape(shape, WorkerState(timer=WallTimer(repeats=1), device="cpu"), ceilings,
                                      {}, {m: "x" for m in (*benchmark.TUNE_MODES, *benchmark.NVMMH_TOPK)},
                                      seed=0, inductor_log=None)
        assert rec["floor_ms"] == p.min_bytes / (used * 1e6) == report.roofline_ms(p.flops, p.min_bytes, 800.0, used)
        assert rec["bound"] == "memory"


def test_read_ceiling_counts_bytes_and_keeps_the_best_kernel():
    from gemmtune.bench.timing import Timing

    class Fake:  # runs each launch once, answers 0.5 ms then 0.25 ms
        def __init__(self):
            self.ms = [0.5, 0.25]

        def measure(self, launch, n_sets):
            launch(0)
            return Timing(self.ms.pop(0), 0.0, 20, 0.01)

    r = benchmark._read_ceiling(Fake(), nbytes=1 << 20, device="cpu")
    rows = (1 << 20) // 2 // benchmark.GEMV_K
    assert r["kernels"]["sum_fp32"]["bytes"] == (1 << 20) + 4
    assert r["kernels"]["gemv_bf16"]["bytes"] == (rows * benchmark.GEMV_K + benchmark.GEMV_K + rows) * 2
    assert r["kernels"]["sum_fp32"]["gbps"] == ((1 << 20) + 4) / (0.5 * 1e6)
    assert r["kernel"] == "gemv_bf16" and r["gbps"] == r["kernels"]["gemv_bf16"]["gbps"] == \
        r["kernels"]["gemv_bf16"]["bytes"] / (0.25 * 1e6)


def test_ceilings_file_is_reused_only_for_the_same_gpu(tmp_path):
    c = {"how": "measured", "copy": {"gbps": 2763.0}, "read": {"gbps": 4100.0}, "mm": {}}
    f = tmp_path / "ceilings.json"
    assert benchmark.load_ceilings(f, "NVIDIA H200") is None  # nothing there yet: measure
    benchmark.save_ceilings(f, "NVIDIA H200", c)
    got = benchmark.load_ceilings(f, "NVIDIA H200")
    assert got["read"] == c["read"] and got["how"].startswith("measured; read from ceilings.json")
    assert benchmark.load_ceilings(f, "NVIDIA H100 80GB HBM3") is None


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

    for mod in (report, benchmark):
        assert doctest.testmod(mod).failed == 0, mod.__name__


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_interleaved_rounds_and_ceilings_on_a_gpu():
    """The CUDA-graph path (not runnable on a CPU): every verified method is captured once and
    replayed in the rounds; cuBLAS's kernel picked by a mode times like cuBLAS itself."""
    from gemmtune.bench.runner import WorkerState
    from gemmtune.bench.timing import CudaGraphTimer
    from gemmtune.shapes import Shape

    shape = Shape("prefill", "gpu_512", Problem.from_sizes(512, 512, 512, "bf16"))
    key = shape.problem.key
    tuned = {m: {key: SimpleNamespace(best="aten", best_ms=0.01, tune_s=0.1, tried=1, statuses={})}
             for m in benchmark.TUNE_MODES}
    state = WorkerState(timer=CudaGraphTimer(replays=20))
    c = benchmark.measure_ceilings(CudaGraphTimer(replays=5))
    assert c["read"]["gbps"] > 0 and c["memory_gbps"] == max(c["copy"]["gbps"], c["read"]["gbps"])
    rec = benchmark.measure_shape(shape, state, c, tuned, {m: "x" for m in benchmark.NVMMH_TOPK}, seed=0,
                                  inductor_log=None)
    for r in (rec["cublas"], *(rec["methods"][m] for m in benchmark.TUNE_MODES)):
        k = r["kernel"]
        assert r["status"] == "ok" and (k["rounds"], k["repeats"]) == (4, 20) and k["ms"] > 0
        assert 0 < r["eager"]["ms"] < 1000
        # the same kernel, interleaved: no 7-14% order bias as in the 2026-11-22 run
        assert abs(k["ms"] / rec["cublas"]["kernel"]["ms"] - 1) < 0.05 or report.is_tie(
            k["ms"], k["spread"], rec["cublas"]["kernel"]["ms"], rec["cublas"]["kernel"]["spread"])
    json.dumps(rec, allow_nan=False)


def test_inductor_choice_falls_back_to_its_autotune_pick():
    # Inductor's DecomposeK subgraph is not a kernel inductor_choice recognises in the
    # generated code; the report then names what its autotuner picked, not nothing.
    assert report._choice({"choice": "aten"}) == "`aten`"
    rec = {"choice": None, "autotune": [{"op": "mm", "choices": 11, "best_ms": 0.0107,
                                         "pick": "decompose_k_mm_112_split_4 k_split=112"}]}
    assert report._choice(rec) == "autotune pick: `decompose_k_mm_112_split_4 k_split=112`"
    assert report._choice({"choice": None}) == "(not recorded)"
    assert report._choice({"choice": None, "autotune": [{"op": "mm", "pick": None}]}) == "(not recorded)"


class _FakeTunable:
    """torch.cuda.tunable's switches, recorded (the real ones need CUDA)."""

    def __init__(self):
        self.on, self.tuning, self.file = False, True, "user.csv"

    def is_enabled(self):
        return self.on

    def tuning_is_enabled(self):
        return self.tuning

    def get_filename(self):
        return self.file

    def enable(self, v):
        self.on = v

    def tuning_enable(self, v):
        self.tuning = v

    def set_filename(self, f):
        self.file = f


def test_tunableop_peer_is_on_only_inside_and_puts_everything_back(tmp_path):
    from gemmtune.benchmark import TunableOp
    fake = _FakeTunable()
    t = TunableOp(tmp_path, tun=fake)
    assert fake.file.startswith(str(tmp_path)) and not fake.on  # results go to scratch, still off
    with t:
        assert fake.on
    assert not fake.on
    fake.tuning = False
    t.close()
    assert (fake.on, fake.tuning, fake.file) == (False, True, "user.csv")
    assert "tunableop" in report.LABELS
