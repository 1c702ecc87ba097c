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
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from gemmtune import benchmark, cli, report
from gemmtune.configs import Choice
from gemmtune.problem import Problem

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
                   "| all | 1.04× (10; 2/8/0)", "## Tuning wall time", "Assembled from the recorded run"):
        assert needle in md, needle
    assert "| decode | llama3_8b_qkv_m16 | 16×6144×4096 bf16 | 11.78 | 15.27 | 1.00× tie | 1.00× tie |" in md
    assert "`splitk:BM32-BN32-BK128-S4-W4-G8-SK64-atomic` | 6.30 | 0.6% | 1.24× |" in md
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


@pytest.mark.skipif(torch.cuda.is_available(), reason="the real process would run the benchmark")
def test_bench_without_gpu_in_a_real_process(tmp_path):
    r = subprocess.run([sys.executable, "-m", "gemmtune.cli", "bench", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "bench needs a CUDA GPU; use `gemmtune report` to render recorded results" in r.stderr
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------ bench pieces that run on a CPU
def test_supported_modes_follow_the_tune_signature():
    def old(problems, *, space="default", store="x"): ...

    def new(problems, *, space="default", fast=False, benchmark_space=None): ...

    modes, skipped = benchmark.supported_modes(old)
    assert list(modes) == ["gemmtune"] and sorted(skipped) == ["gemmtune_fast", "gemmtune_top5"]
    assert "'fast'" in skipped["gemmtune_fast"] and "'benchmark_space'" in skipped["gemmtune_top5"]
    modes, skipped = benchmark.supported_modes(new)
    assert modes == benchmark.TUNE_MODES and skipped == {}


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
        return SimpleNamespace(shapes=shapes, wall_s=1.0, measured=len(problems))
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
    top1, top5 = calls[3]["table"], calls[4]["table"]
    assert all(len(v) == 1 for v in top1.entries.values()) and all(1 <= len(v) <= 5 for v in top5.entries.values())
    assert all(top5.entries[k][0] == v[0] for k, v in top1.entries.items())  # top-1 is top-5's first
    assert set(phase["extra_s"]["nvmmh_top1"]) == set(top1.entries)  # the query time is added per shape
    # without the library, nvMMH is skipped with the reason, and gemmtune still runs
    monkeypatch.setattr(benchmark, "_version", lambda dist: None)
    calls.clear()
    phase = benchmark.tune_phase(_shapes(), tune_fn=_fake_tuner(calls), scratch=tmp_path, seed=0, provenance=prov)
    assert len(calls) == 3 and phase["skipped"]["nvmmh_top5"] == "nvidia-matmul-heuristics is not installed"


def test_measure_shape_record_on_cpu():
    from gemmtune.bench.runner import WorkerState
    from gemmtune.bench.timing import WallTimer

    shape = _shapes()[1]
    key = shape.problem.key
    tuned = {"gemmtune": {key: SimpleNamespace(best="triton_mm:BM16-BN32-BK16-S2-W2-G1", best_ms=0.01, tune_s=1.5, tried=3, statuses={})},
             "nvmmh_top1": {key: SimpleNamespace(best=None, best_ms=None, tune_s=0.2, tried=1,
                                                 statuses={"wrong": 1})}}
    skipped = {"gemmtune_fast": "no 'fast'", "gemmtune_top5": "no 'benchmark_space'"}
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
