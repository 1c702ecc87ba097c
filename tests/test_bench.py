"""gemmtune bench (gemmtune.bench's suite, modes, ceilings, rounds and peers) on a CPU: its modes
against TuneOptions, Inductor's generated code read back, nvMatmulHeuristics' configs, the tuning
phase, each shape's record, the interleaved rounds, the ceilings, TunableOp, the command's options
and the process-wide settings it puts back (the GPU parts are faked, or gpu-marked)."""

from __future__ import annotations

import contextlib
import json
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
from gemmtune.bench.settings import ProcessSettings, bench_settings
from gemmtune.configs import Choice
from gemmtune.problem import Problem


@pytest.mark.parametrize("fail", [False, True], ids=["returns", "raises"])
def test_bench_settings_are_put_back(tmp_path, monkeypatch, fail):
    import torch._inductor.config as icfg

    monkeypatch.setenv("TRITON_CACHE_DIR", "/before/triton")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    before = torch.backends.cuda.matmul.allow_tf32, icfg.force_disable_caches
    torch.backends.cuda.matmul.allow_tf32, icfg.force_disable_caches = True, False
    seen = {}
    try:
        with pytest.raises(RuntimeError) if fail else contextlib.nullcontext():
            with bench_settings(tmp_path) as s:
                seen.update(triton=os.environ["TRITON_CACHE_DIR"], inductor=os.environ["TORCHINDUCTOR_CACHE_DIR"],
                            tf32=torch.backends.cuda.matmul.allow_tf32, caches=icfg.force_disable_caches)
                s.setenv("GEMMTUNE_TEST_EXTRA", "1")  # the caller's own changes are undone too
                if fail:
                    raise RuntimeError("a GPU fault")
        after = torch.backends.cuda.matmul.allow_tf32, icfg.force_disable_caches
    finally:
        torch.backends.cuda.matmul.allow_tf32, icfg.force_disable_caches = before
    assert seen == {"triton": str(tmp_path / "triton-bench"), "inductor": str(tmp_path / "inductor"),
                    "tf32": False, "caches": True}
    assert after == (True, False)
    assert os.environ["TRITON_CACHE_DIR"] == "/before/triton"
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ and "GEMMTUNE_TEST_EXTRA" not in os.environ


def test_bench_settings_leave_inductor_alone_when_it_is_skipped(tmp_path):
    import torch._inductor.config as icfg

    before = icfg.force_disable_caches
    with bench_settings(tmp_path, inductor=False):
        assert icfg.force_disable_caches == before


def test_process_settings_undo_in_reverse_order():
    class Obj:
        x = 1
    with ProcessSettings() as s:
        s.setattr(Obj, "x", 2)
        s.setattr(Obj, "x", 3)
        assert Obj.x == 3
    assert Obj.x == 1



def test_bench_command_passes_deadline_and_ceilings_file(monkeypatch, tmp_path, capsys):
    """The environment variables GEMMTUNE_BENCH_DEADLINE / _CEILINGS are now options; for this
    release the command still honours them when the option is not given, with a warning."""
    from gemmtune import cli
    from gemmtune.bench import suite

    seen = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(suite, "run", lambda shapes, **kw: seen.update(kw, n=len(shapes)) or tmp_path / "x.json")
    rc = cli.main(["bench", "--groups", "odd", "--deadline", "1700000000", "--ceilings-file", str(tmp_path / "c.json"),
                   "--out", str(tmp_path)])
    assert rc == 0 and seen["deadline"] == 1700000000.0 and seen["ceilings_file"] == str(tmp_path / "c.json")
    cli.main(["bench", "--groups", "odd", "--out", str(tmp_path)])
    assert seen["deadline"] is None and seen["ceilings_file"] is None
    capsys.readouterr()
    monkeypatch.setenv("GEMMTUNE_BENCH_DEADLINE", "12.5")
    cli.main(["bench", "--groups", "odd", "--out", str(tmp_path)])
    assert seen["deadline"] == 12.5 and "GEMMTUNE_BENCH_DEADLINE is deprecated" in capsys.readouterr().err
    cli.main(["bench", "--groups", "odd", "--out", str(tmp_path), "--deadline", "7"])
    assert seen["deadline"] == 7.0  # the option wins
    from gemmtune.bench.suite import run
    import inspect
    assert "GEMMTUNE_BENCH" not in inspect.getsource(run)  # the library reads no environment


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


def test_inductor_launch_writes_a_distinct_output_per_input_set_like_the_other_methods():
    """A compiled function allocates its output per call; dropped at once, the caching allocator
    hands the same block back every launch (one L2-resident output for Inductor against rotating
    ones for cuBLAS and ours). The launch keeps each output until a whole pass has run."""
    import weakref

    from gemmtune.bench.inductor import held_launch

    sets = [(torch.randn(3, 4), torch.randn(4, 5)) for _ in range(3)]
    launch = held_launch(torch.mm, sets)
    refs = []
    for i in range(3):
        assert launch(i) is None
        refs.append(weakref.ref(launch.held[-1]))
    assert all(r() is not None for r in refs)                      # one pass: every output alive
    assert len({r().data_ptr() for r in refs}) == 3                 # three distinct buffers
    torch.testing.assert_close(launch.held[1], sets[1][0] @ sets[1][1])
    launch(0)
    assert refs[0]() is None and refs[1]() is not None             # the oldest goes, no more are kept
    assert len(launch.held) == 3


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
    sweeps = {"gemmtune": {key: [{"choice": "triton_mm:BM16-BN32-BK16-S2-W2-G1", "ms": 0.01}, {"choice": "aten", "ms": 0.02}]},
              "nvmmh_top1": {key: [{"choice": "splitk:x", "status": "wrong", "reason": "rel err 0.5"}]}}
    rec = benchmark.measure_shape(shape, WorkerState(timer=WallTimer(), device="cpu"), ceilings, tuned, skipped,
                                  seed=0, inductor_log=None, extra_s={"nvmmh_top1": {key: 0.05}},
                                  errors={"nvmmh_top5": {key: "nvMatmulHeuristics returned no configuration"}},
                                  sweeps=sweeps)
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
    # what each mode timed travels in its record (also where nothing passed), not where it has none
    assert g["sweep"] == sweeps["gemmtune"][key] and m["nvmmh_top1"]["sweep"] == sweeps["nvmmh_top1"][key]
    assert "sweep" not in m["gemmtune_top20"]
    assert m["nvmmh_top5"]["reason"] == "nvMatmulHeuristics returned no configuration"
    assert m["inductor"] == {"status": "skipped", "reason": "--skip-inductor"}
    # each gemmtune choice's eager cost through a dispatcher serving it (bench.eager), next to the
    # eager time of the launch that was verified; cuBLAS has its own eager time only
    for r in (g, m["gemmtune_top20"]):
        assert r["eager_dispatch"]["ms"] > 0 and r["eager_dispatch"]["repeats"] == 20, r["eager_dispatch"]
        assert list(r)[:4] == ["status", "kernel", "eager", "eager_dispatch"]
    assert "eager_dispatch" not in rec["cublas"] and "eager_dispatch" not in m["nvmmh_top1"]
    from gemmtune.report.markdown import render_markdown
    fixture = json.loads((Path(__file__).parent / "data" / "bench_fixture.json").read_text())
    md = render_markdown({**fixture, "shapes": [rec]})
    row = next(line for line in md.splitlines() if line.startswith("| gemmtune default | `triton_mm"))
    assert "eager µs, dispatcher" in md and f"| {g['eager_dispatch']['ms'] * 1e3:.2f} |" in row, row
    json.dumps(rec, allow_nan=False)  # what the bench JSON holds


def test_dispatch_eager_says_why_it_was_not_taken():
    from gemmtune.bench.suite import dispatch_eager

    p = Problem.from_sizes(2, 3, 4, "float32", op="bmm", batch=2)
    got = dispatch_eager(p, "aten", SimpleNamespace(inputs=[]))
    assert got["ms"] is None and "mm with row- or column-major operands" in got["reason"], got


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

    r = benchmark.read_ceiling(Fake(), nbytes=1 << 20, device="cpu")
    rows = (1 << 20) // 2 // benchmark.GEMV_K
    assert r["kernels"]["sum_fp32"]["bytes"] == (1 << 20) + 4
    assert r["kernels"]["gemv_bf16"]["bytes"] == (rows * benchmark.GEMV_K + benchmark.GEMV_K + rows) * 2
    assert r["kernels"]["sum_fp32"]["gbps"] == ((1 << 20) + 4) / (0.5 * 1e6)
    assert r["kernel"] == "gemv_bf16" and r["gbps"] == r["kernels"]["gemv_bf16"]["gbps"] == \
        r["kernels"]["gemv_bf16"]["bytes"] / (0.25 * 1e6)


def test_write_ceiling_counts_the_bytes_written_by_its_fill():
    from gemmtune.bench.timing import Timing

    seen = []

    class Fake:  # runs the launch once and keeps what it wrote, answers 0.5 ms
        def measure(self, launch, n_sets):
            seen.append(launch(0))
            return Timing(0.5, 0.01, 20, 0.01)

    r = benchmark.write_ceiling(Fake(), nbytes=1 << 20, device="cpu")
    assert list(r["kernels"]) == ["fill_fp32"] and r["kernel"] == "fill_fp32"
    assert r["bytes"] == 1 << 20 and r["gbps"] == (1 << 20) / (0.5 * 1e6)
    assert (r["ms"], r["spread"], r["repeats"]) == (0.5, 0.01, 20)
    [buf] = seen  # the launch wrote every byte of the buffer it counts
    assert buf.dtype == torch.float32 and buf.numel() * 4 == r["bytes"] and bool((buf == 1.5).all())


def test_measure_ceilings_records_the_write_ceiling_and_its_failure(monkeypatch):
    from gemmtune.bench import ceilings as bench_ceilings

    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(bench_ceilings, "_copy_ceiling", lambda timer: {"gbps": 2700.0})
    monkeypatch.setattr(bench_ceilings, "read_ceiling", lambda timer: {"gbps": 4400.0})
    monkeypatch.setattr(bench_ceilings, "write_ceiling", lambda timer: {"gbps": 2000.0, "kernel": "fill_fp32"})
    monkeypatch.setattr(bench_ceilings, "_mm_ceiling", lambda timer, dtype: {"tflops": 700.0})
    c = benchmark.measure_ceilings(object())
    assert c["write"] == {"gbps": 2000.0, "kernel": "fill_fp32"} and c["write_gbps"] == 2000.0
    assert c["memory_gbps"] == 4400.0 and "GiB fp32 fill (bytes written" in c["how"]

    def broken(timer):
        raise RuntimeError("out of memory")
    monkeypatch.setattr(bench_ceilings, "write_ceiling", broken)
    c = benchmark.measure_ceilings(object())
    assert c["write"]["gbps"] is None and c["write"]["reason"] == "RuntimeError: out of memory"
    assert c["write_gbps"] is None and c["memory_gbps"] == 4400.0 and c["mm"]["bfloat16"]["tflops"] == 700.0


def test_measure_shape_floor_counts_c_at_the_write_bandwidth():
    from gemmtune.bench.runner import WorkerState
    from gemmtune.bench.timing import WallTimer

    shape = _shapes()[1]  # 17x33x65 fp16: memory-bound at these ceilings
    p = shape.problem
    assert p.write_bytes == 17 * 33 * 2 and p.read_bytes + p.write_bytes == p.min_bytes
    skip = {m: "x" for m in (*benchmark.TUNE_MODES, *benchmark.NVMMH_TOPK)}
    ceilings = {"copy": {"gbps": 2700.0}, "read": {"gbps": 4400.0}, "write": {"gbps": 2000.0},
                "mm": {"float16": {"tflops": 800.0}}}
    rec = benchmark.measure_shape(shape, WorkerState(timer=WallTimer(repeats=1), device="cpu"), ceilings, {}, skip,
                                  seed=0, inductor_log=None)
    assert rec["write_bytes"] == p.write_bytes
    assert rec["floor_ms"] == pytest.approx(p.read_bytes / 4400e6 + p.write_bytes / 2000e6, rel=1e-12)
    assert rec["floor_ms"] > p.min_bytes / 4400e6 and rec["bound"] == "memory"


def test_a_ceilings_file_without_the_write_ceiling_gives_the_old_floor(tmp_path):
    old = {"how": "measured", "copy": {"gbps": 2700.0}, "read": {"gbps": 4400.0}, "memory_gbps": 4400.0,
           "mm": {"bfloat16": {"tflops": 750.0}}}
    f = tmp_path / "ceilings.json"
    benchmark.save_ceilings(f, "NVIDIA H200", old)
    bench_suite.check_ceilings_file(f)  # a ceilings file of before the write ceiling is one
    got = benchmark.load_ceilings(f, "NVIDIA H200")
    assert "write" not in got and report.write_gbps(got) is None
    p = Problem.from_sizes(8192, 8192, 16, "bf16")
    floor = report.roofline_ms(p.flops, p.min_bytes, 750.0, report.memory_gbps(got), p.write_bytes,
                               report.write_gbps(got))
    assert floor == p.min_bytes / (4400.0 * 1e6)
    # with it, saved and read back: the write entry comes back and the floor counts C at its rate
    benchmark.save_ceilings(f, "NVIDIA H200", {**old, "write": {"gbps": 2000.0, "kernel": "fill_fp32"}})
    got = benchmark.load_ceilings(f, "NVIDIA H200")
    assert got["write"]["gbps"] == 2000.0 and report.write_gbps(got) == 2000.0
    # a write entry that is not one (a file edited by hand): read as a file without it
    benchmark.save_ceilings(f, "NVIDIA H200", {**old, "write": 2000.0, "write_gbps": 2000.0})
    got = benchmark.load_ceilings(f, "NVIDIA H200")
    assert "write" not in got and "write_gbps" not in got and report.write_gbps(got) is None


def test_ceilings_file_is_reused_only_for_the_same_gpu(tmp_path):
    c = {"how": "measured", "copy": {"gbps": 2763.0}, "read": {"gbps": 4100.0}, "mm": {}}
    f = tmp_path / "ceilings.json"
    assert benchmark.load_ceilings(f, "NVIDIA H200") is None  # nothing there yet: measure
    benchmark.save_ceilings(f, "NVIDIA H200", c)
    got = benchmark.load_ceilings(f, "NVIDIA H200")
    assert got["read"] == c["read"] and got["how"].startswith("measured; read from ceilings.json")
    assert benchmark.load_ceilings(f, "NVIDIA H100 80GB HBM3") is None


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
    assert c["write"]["gbps"] > 0 and c["write_gbps"] == report.write_gbps(c) >= c["write"]["gbps"]
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


def test_bench_benchmarks_addmm_rows_as_mm_and_leaves_bmm_rows_whole(tmp_path):
    """A suite with an addmm row and a bmm row: only the addmm row becomes mm (its peers are set up
    for the plain product); the bmm row keeps its op and batch. Before, every row became mm and
    the bmm row's batch made `gemmtune bench` stop with an error."""
    from gemmtune.cli.bench import plain_products
    from gemmtune.shapes import load_csv

    csv = tmp_path / "s.csv"
    csv.write_text("group,name,M,N,K,dtype,layout_a,layout_b,op,batch\n"
                   "edge,a,300,2001,512,bfloat16,row,row,addmm,\n"
                   "edge,b,33,65,129,bfloat16,row,row,bmm,7\n"
                   "edge,c,8,8,8,float16,row,row,mm,\n")
    rows, note = plain_products(load_csv(csv))
    assert [(r.problem.op, r.problem.batch) for r in rows] == [("mm", 1), ("bmm", 7), ("mm", 1)]
    assert "1 addmm row(s)" in note
    assert plain_products(rows[1:]) == (rows[1:], None)


def test_read_sweeps_lists_what_a_mode_timed_fastest_first(tmp_path):
    from gemmtune.bench.modes import read_sweeps
    from gemmtune.store import ResultRow, ResultStore, RunContext

    ctx = RunContext.current("NVIDIA H200", "9.0")
    key = Problem.from_sizes(1, 30522, 768, "bf16").key

    def row(choice, ms, status="ok", reason=""):
        return ResultRow(problem_key=key, choice_id=choice, family=choice.split(":")[0], status=status, device_ms=ms,
                         eager_ms=None, rel_err=None, m=1, n=30522, k=768, dtype="bfloat16", out_dtype="bfloat16",
                         layout="row/row", aligned=False, reason=reason)
    with ResultStore(tmp_path / "gemmtune_fast.sqlite") as store:
        store.record_many(ctx, [row("aten", 0.0306), row("skinny:BM1-BN32-BK64-SK1-S1-W4-core-det", 0.041),
                                row("triton_static:BM16-BN64-BK64-S5-W2-G8", None, "compile_error", "out of resources")])
    notes = []
    got = read_sweeps(tmp_path / "gemmtune_fast.sqlite", ctx, [key], notes, "gemmtune --fast")
    assert [r["choice"] for r in got[key]] == ["aten", "skinny:BM1-BN32-BK64-SK1-S1-W4-core-det",
                                             "triton_static:BM16-BN64-BK64-S5-W2-G8"]
    assert got[key][0]["ms"] == 0.0306 and got[key][2] == {"choice": "triton_static:BM16-BN64-BK64-S5-W2-G8",
                                                           "status": "compile_error", "reason": "out of resources"}
    assert notes == []
    # a store that cannot be read: a note, and no sweep, never a failed bench
    bad = tmp_path / "bad.sqlite"
    bad.write_text("not a database")
    assert read_sweeps(bad, ctx, [key], notes, "gemmtune --fast") == {}
    assert len(notes) == 1 and "could not be read back" in notes[0]
