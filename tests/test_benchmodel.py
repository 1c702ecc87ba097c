"""bench-model on the CPU with tiny configs: every phase kind, the patched mode with one tuning
call, the checks (logits vs fp32, greedy tokens vs eager) and the report."""

from __future__ import annotations

import importlib
import json

import pytest
import torch

pytest.importorskip("transformers")

import gemmtune  # noqa: E402
from gemmtune import benchmodel  # noqa: E402


def one_layer_tiny(monkeypatch):
    """bench-model's tiny models built with one decoder layer: a compiled mode's Dynamo trace and
    Inductor lowering grow with the layers, and every kind of GEMM (q/k/v, o, gate/up, down,
    lm_head) and fused group is in the one layer as in two."""
    from gemmtune.benchmodel import models

    full = models._config

    def one(name):
        cfg = full(name)
        if name.startswith("tiny-"):
            cfg.num_hidden_layers = 1
            if getattr(cfg, "layer_types", None):
                cfg.layer_types = cfg.layer_types[:1]
        return cfg
    monkeypatch.setattr(models, "_config", one)


def fake_tuner(calls):
    def tune(problems, **kw):
        calls.append(len(problems))
        return {p.key: "aten" for p in problems}
    return tune


# Slow lane: each model is 10-20 s on 2 cores (greedy decoding and interleaved timing of both
# modes); the fast lane keeps the unit tests below.
@pytest.mark.slow
@pytest.mark.parametrize("model", ["tiny-llama", "tiny-gpt2"])
def test_tiny_model_all_checks_and_report(model, tmp_path):
    calls = []
    doc = benchmodel.run([model], phases=["prefill_b8_s128", "decode_b1"], modes=["eager", "eager_patch"],
                         out_dir=tmp_path, dtype="float32", tune_kwargs={"tune_fn": fake_tuner(calls)},
                         log=lambda s: None)
    assert len(calls) == 1 and calls[0] > 0  # one tuning call for the whole model
    m = doc["models"][0]
    assert "error" not in m and m["tuned_layer_shapes"] >= 3
    patched = m["modes"]["eager_patch"]
    assert patched["greedy_match"] is True  # cuBLAS picks: the same function, the same tokens
    pre = patched["phases"]["prefill_b8_s128"]
    assert pre["logits_ok"] and pre["logits_rel_err"] < 1e-5
    assert {"ms", "spread", "calls", "x_eager"} <= set(patched["phases"]["decode_b1"])
    inter = patched["phases"]["decode_b1"]["interleaved"]  # the eager-vs-patch verdict, interleaved
    assert inter["eager_ms"] > 0 and inter["x_eager"] == pytest.approx(inter["eager_ms"] / inter["eager_patch_ms"])
    assert inter["rounds"] == 7 and inter["x_eager_q1"] <= inter["x_eager_paired"] <= inter["x_eager_q3"]
    # Every hint chose cuBLAS: patch left every layer as torch's own, none has an eager path table.
    assert patched["eager_paths"]["counts"] == {} and patched["eager_paths"]["left_as_torch"] >= 3
    md = (tmp_path / "bench-model.md").read_text()
    assert "interleaved" in md
    assert (tmp_path / "bench-model.png").read_bytes()[:4] == b"\x89PNG"
    assert f"## {model}" in md and "| decode_b1 |" in md and "greedy 32 tokens identical to eager" in md
    assert m["greedy_cache"] == "static" and "on a static KV cache" in md
    assert json.loads((tmp_path / "bench-model.json").read_text())["models"][0]["model"] == model


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-gpt2"])
def test_greedy_check_runs_every_step_compiled(model):
    """The greedy check of a compiled mode is the compiled graph's at every step after the prompt:
    on a StaticCache a dynamic=False compile builds the step's graph once (on a DynamicCache the
    KV length grows per step, and past Dynamo's recompile limit of 8 the steps ran eagerly), and
    its tokens are the DynamicCache's (fp32)."""
    from torch._dynamo.utils import counters

    from gemmtune.benchmodel.models import build_model, parse_model
    from gemmtune.benchmodel.phases import greedy, greedy_cache_kind
    torch.manual_seed(0)
    m = build_model(parse_model(model), torch.float32, "cpu")
    vocab = m.config.vocab_size
    prompt = torch.randint(0, vocab, (1, 6))
    steps = 12  # past the recompile limit
    assert greedy_cache_kind(m, prompt, steps) == "static"
    ref, gaps = greedy(m, prompt, steps, cache="dynamic")
    assert len(ref) == len(gaps) == steps and min(gaps) >= 0
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(m, dynamic=False, backend="eager")
    toks, _ = greedy(compiled, prompt, steps, cache="static")
    assert toks == ref
    # one graph: the step's (the prompt runs through the model the wrapper holds, as a decode phase's)
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    torch._dynamo.reset()


def test_the_qwen3_preset_has_qwen3_0_6bs_sizes_and_its_tiny_twin_builds():
    """qwen3-0.6b is built from Qwen3-0.6B's published sizes (not built here: 596M parameters);
    tiny-qwen3 is the same architecture at test sizes."""
    from gemmtune.benchmodel.models import _config, build_model, parse_model
    cfg = _config("qwen3-0.6b")
    assert (cfg.model_type, cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers) == ("qwen3", 1024, 3072, 28)
    assert (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.vocab_size) == (16, 8, 128, 151936)
    assert cfg.tie_word_embeddings and parse_model("qwen3-0.6b").kind == "named"
    m = build_model(parse_model("tiny-qwen3"), torch.float32, "cpu")
    assert type(m).__name__ == "Qwen3ForCausalLM" and m.config.hidden_size == 64
    assert m.model.layers[0].self_attn.q_norm is not None  # the per-head q/k norms Qwen3 adds


def test_greedy_cache_falls_back_without_a_config():
    from gemmtune.benchmodel.phases import greedy_cache_kind, static_cache
    assert static_cache(torch.nn.Linear(2, 2), 8) is None
    assert greedy_cache_kind(torch.nn.Linear(2, 2), torch.zeros(1, 4, dtype=torch.long)) == "dynamic"


def test_time_interleaved_rotates_and_times_each():
    order = []
    t = benchmodel.time_interleaved({"a": lambda: order.append("a"), "b": lambda: order.append("b")},
                                    rounds=4, min_round_ms=0.001, warmup=0)
    assert set(t) == {"a", "b"} and all(v["ms"] >= 0 and v["calls"] >= 4 for v in t.values())
    assert order.count("a") == order.count("b")
    assert len(t["a"]["rounds"]) == 4


def test_paired_ratio_reads_adjacent_rounds():
    """A drift of the host's speed that moves both modes alike leaves the paired ratio alone, where
    each mode's own median and spread move with it."""
    from gemmtune.benchmodel.timing import paired_ratio
    base = [10.0, 20.0, 10.0, 30.0, 10.0]
    r = paired_ratio(base, [b / 1.05 for b in base])
    assert r["median"] == pytest.approx(1.05) and r["q1"] == pytest.approx(1.05) and r["pairs"] == 5
    r = paired_ratio([10.0, 12.0, 14.0], [10.0, 10.0, 10.0])
    assert r["median"] == pytest.approx(1.2) and r["q1"] == pytest.approx(1.1) and r["q3"] == pytest.approx(1.3)
    assert (r["lo"], r["hi"]) == (pytest.approx(1.0), pytest.approx(1.4))  # 3 rounds: the whole range


def test_median_ci_is_the_binomial_order_statistics_interval():
    """The interval's ends are the order statistics whose binomial tail is <= 2.5% each side, and
    it narrows with more rounds: what tells a 1% difference from the method's noise."""
    from gemmtune.benchmodel.timing import median_ci
    # n = 21: P(B <= 5) = 0.0133 <= 0.025 < P(B <= 6) = 0.0392, so x(6)..x(16)
    assert median_ci([float(i) for i in range(21, 0, -1)]) == (6.0, 16.0)
    # n = 100: the textbook interval x(40)..x(61)
    assert median_ci(list(range(1, 101))) == (40, 61)
    # n < 6: no 95% interval, the whole range
    assert median_ci([2.0, 1.0, 5.0, 4.0, 3.0]) == (1.0, 5.0)
    assert all(v != v for v in median_ci([]))  # nan
    import random
    rng = random.Random(3)
    noisy = [1.0 + rng.gauss(0, 0.04) for _ in range(201)]
    lo21, hi21 = median_ci(noisy[:21])
    lo201, hi201 = median_ci(noisy)
    assert hi201 - lo201 < 0.6 * (hi21 - lo21) and lo201 <= 1.0 + 0.01 and hi201 >= 1.0 - 0.01


def test_decode_phase_times_the_same_step_every_call():
    model = benchmodel.build_causal("tiny-llama", torch.float32, "cpu")
    ph = benchmodel.causal_phase("decode_b1", model.config.vocab_size, "cpu")
    with torch.no_grad():
        a, b = ph.run(model), ph.run(model)
    torch.testing.assert_close(a, b)  # the cache is cropped back after each step


def test_unknown_names_and_missing_minilm_are_clear(tmp_path, monkeypatch):
    import importlib

    with pytest.raises(ValueError, match="unknown mode"):
        benchmodel.run(["tiny-gpt2"], modes=["fastest"], out_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown phase"):
        benchmodel.run(["tiny-gpt2"], phases=["prefill_b99"], out_dir=tmp_path)
    # A folder given that does not exist is a typo: refused before any model runs (it was found
    # at minilm's turn, after the models before it).
    with pytest.raises(ValueError, match="--minilm-dir .*nowhere: no such folder"):
        benchmodel.run(["tiny-gpt2", "minilm"], modes=["eager"], out_dir=tmp_path,
                       minilm_folder=str(tmp_path / "nowhere"))
    # Weights that cannot be loaded (no package, a folder without the model): reported, the run goes on.
    def unloadable(dtype, device, folder=None):
        raise OSError(f"no sentence-transformers model in {folder}")

    monkeypatch.setattr(importlib.import_module("gemmtune.benchmodel.run"), "build_minilm", unloadable)
    doc = benchmodel.run(["minilm"], modes=["eager"], out_dir=tmp_path, minilm_folder=str(tmp_path),
                         log=lambda s: None)
    assert "error" in doc["models"][0]  # reported, the run goes on
    assert "Not run:" in (tmp_path / "bench-model.md").read_text()


# ------------------------------------------------------------------ CUDA-graph modes
def test_graph_mode_names_and_defaults():
    assert benchmodel.DEFAULT_MODES == ("eager", "eager_patch", "compile", "max_autotune", "patch_compile")
    graphs = [m for m in benchmodel.MODES if benchmodel.is_graph(m)]
    # Every mode has a graph twin, the opt-in lut_compile included; the defaults stay as they were.
    assert [benchmodel.base_mode(m) for m in graphs] == [*benchmodel.DEFAULT_MODES, "eager_copy", "lut_compile", "compile_cdt",
                                                         "patch_compile_cdt", "eager_fuse", "eager_fuse_patch",
                                                         "fuse_patch_compile", "fuse_patch_compile_cdt",
                                                         "fuse_patch_max_autotune", "fuse_patch_compile_pdl",
                                                         "max_autotune_pdl"]
    assert "lut_compile" in benchmodel.MODES and "lut_compile" not in benchmodel.DEFAULT_MODES
    assert benchmodel.base_mode("eager") == "eager" and not benchmodel.is_graph("patch_compile")


def test_tensors_of_finds_a_caches_tensors():
    """What a decode step's capture keeps alive: every tensor reachable from the cache object,
    whatever its classes call their fields."""
    from transformers import DynamicCache

    model = benchmodel.build_causal("tiny-llama", torch.float32, "cpu")
    ph = benchmodel.causal_phase("decode_b1", model.config.vocab_size, "cpu")
    with torch.no_grad():
        ph.run(model)
    cache = ph.state(model)
    assert isinstance(cache, DynamicCache)
    found = benchmodel.tensors_of(cache)
    # two layers, a key and a value tensor each, of the prompt's 128 tokens
    kv = [t for t in found if t.dim() == 4 and t.shape[-2] == 128]
    assert len(kv) >= 2 * model.config.num_hidden_layers
    assert benchmodel.tensors_of({"a": [torch.ones(1), (torch.zeros(2), "x")], "b": 3}) and \
        len(benchmodel.tensors_of({"a": [torch.ones(1), (torch.zeros(2), "x")]})) == 2


def test_graph_variants_share_their_base_models_object():
    calls = []
    model = benchmodel.build_causal("tiny-gpt2", torch.float32, "cpu")
    out = {"modes": {}}
    v = benchmodel.make_variants(model, ["eager_graph", "eager_patch", "eager_patch_graph"],
                                 lambda m: m(torch.ones(1, 4, dtype=torch.long)), out,
                                 {"tune_fn": fake_tuner(calls), "progress": False})
    # eager_patch_graph: its own copy on the same dispatchers (one tuning), always the tuned path
    assert v["eager_graph"] is model and len(calls) == 1
    assert v["eager_patch_graph"] is not v["eager_patch"] and v["eager_patch_graph"] is not model
    assert gemmtune.nn.dispatchers(v["eager_patch_graph"]).keys() == gemmtune.nn.dispatchers(v["eager_patch"]).keys()
    assert set(out["modes"]) == {"eager_graph", "eager_patch", "eager_patch_graph"}
    with pytest.raises(ValueError, match="unknown mode"):
        benchmodel.make_variants(model, ["fastest_graph"], lambda m: None, {"modes": {}}, {})


def test_graph_twins_of_patched_compiled_modes_compile_under_a_backend_of_their_own():
    """patch_compile and its graph twin share the patched model but not the compiled code: the twin
    compiles under graphed() (graph_phase) and routes retired layers' GEMMs, where dynamo would
    otherwise hand it the un-graphed mode's graph, compiled without routes. Plain compile's twin
    shares its base's compiled object, as before."""
    from gemmtune import compile_route
    from gemmtune import nn as gnn
    from gemmtune.benchmodel.run import _own_backend
    from test_retire import _model, _on_cublas, _ref

    calls = []
    model = benchmodel.build_causal("tiny-gpt2", torch.float32, "cpu")
    v = benchmodel.make_variants(model, ["compile", "compile_graph", "patch_compile", "patch_compile_graph"],
                                 lambda m: m(torch.ones(1, 4, dtype=torch.long)), {"modes": {}},
                                 {"tune_fn": fake_tuner(calls), "progress": False})
    assert v["compile_graph"] is v["compile"] and len(calls) == 1
    assert v["patch_compile_graph"] is not v["patch_compile"]
    assert v["patch_compile_graph"]._orig_mod is v["patch_compile"]._orig_mod is v["patched"]
    # What the twin's own backend buys: a retired model compiled un-graphed (no routes), then again
    # under graphed() with _own_backend's keywords, recompiles and routes.
    torch._dynamo.reset()
    net = _model()
    _on_cublas(net, 5)
    gnn.retire(net)
    x = torch.randn(5, 32)
    routed = compile_route.STATS["routed"]
    with torch.no_grad():
        torch.compile(net, dynamic=False)(x)
        assert compile_route.STATS["routed"] == routed
        with compile_route.graphed():
            out = torch.compile(net, **_own_backend({"dynamic": False}))(x)
    assert compile_route.STATS["routed"] - routed == 2
    torch.testing.assert_close(out.double(), _ref(net, x), rtol=1e-4, atol=1e-4)
    torch._dynamo.reset()
    assert _own_backend({"dynamic": False, "mode": "max-autotune-no-cudagraphs"})["options"] == {
        "max_autotune": True, "coordinate_descent_tuning": True, "triton.cudagraphs": False}


def test_the_patched_modes_tune_nothing_beyond_the_one_call(monkeypatch):
    """A layer the example never ran (an unused head; Mamba's dt_proj, whose weight is multiplied
    directly) has no dispatcher from tune_model: patch tuned it anew at default M values, a second
    tuning run counted in tune_s as if it were the one call, and a third for eager_patch_graph's
    copy. Both leave it as it is now, with a warning."""
    model = torch.nn.ModuleDict({"used": torch.nn.Linear(16, 24), "unused": torch.nn.Linear(8, 8)})

    def no_second_tune(**kw):
        raise AssertionError(f"patch tuned a layer outside the one tuning call: {kw}")
    monkeypatch.setattr(gemmtune.nn, "compile_mm", no_second_tune)
    calls = []
    with pytest.warns(RuntimeWarning, match="had no dispatcher given, left as they were: unused"):
        v = benchmodel.make_variants(model, ["eager_patch", "eager_patch_graph"],
                                     lambda m: m["used"](torch.randn(3, 16)), {"modes": {}},
                                     {"tune_fn": fake_tuner(calls), "progress": False})
    assert calls == [1]
    assert all(type(m["unused"]) is torch.nn.Linear and not hasattr(m["unused"], "_gemmtune_dispatcher")
               for m in (v["eager_patch"], v["eager_patch_graph"]))


def test_graph_modes_are_skipped_with_a_reason_on_the_cpu(tmp_path):
    doc = benchmodel.run(["tiny-llama"], phases=["decode_b1"], modes=["eager", "eager_graph"], out_dir=tmp_path,
                         dtype="float32", log=lambda s: None, device="cpu")
    rec = doc["models"][0]["modes"]["eager_graph"]
    assert rec["skipped"] == "CUDA graphs need a CUDA device" and rec["phases"] == {}
    md = (tmp_path / "bench-model.md").read_text()
    assert "| decode_b1 |" in md and "Skipped: eager_graph (CUDA graphs need a CUDA device)" in md
    only = benchmodel.run(["tiny-llama"], phases=["decode_b1"], modes=["eager_graph"], out_dir=tmp_path / "only",
                          dtype="float32", log=lambda s: None, device="cpu")
    assert only["models"][0]["modes"]["eager_graph"]["skipped"]
    assert "Skipped: eager_graph" in (tmp_path / "only" / "bench-model.md").read_text()
    with pytest.raises(RuntimeError, match="CUDA graphs need a CUDA device"):
        if not torch.cuda.is_available():
            benchmodel.capture(lambda: torch.ones(1))
        else:
            raise RuntimeError("CUDA graphs need a CUDA device")  # the GPU test below covers capture


@pytest.mark.gpu  # (the GPU lane selects -m gpu: without the mark this never ran there)
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_graph_capture_of_a_decode_step_matches_the_plain_call():
    model = benchmodel.build_causal("tiny-llama", torch.float16, "cuda")
    ph = benchmodel.causal_phase("decode_b1", model.config.vocab_size, "cuda")
    with torch.no_grad():
        replay, info = benchmodel.capture(lambda: ph.run(model), keep=lambda: ph.state(model))
        plain = ph.run(model)
        for _ in range(3):
            out = replay()
    assert info["replay_ok"], info
    torch.testing.assert_close(out, plain, rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_profile_covers_the_eager_and_graph_modes_with_the_decode_floor(tmp_path):
    """--profile on a GPU: an un-graphed mode's call is profiled as a graph mode's replay is, and
    a decode phase carries the GEMMs' % of the floor (read bandwidth measured first), in the JSON
    and the report."""
    doc = benchmodel.run(["tiny-llama"], phases=["decode_b1"], modes=["eager", "eager_graph"], out_dir=tmp_path,
                         dtype="float16", log=lambda s: None, profile=True)
    assert doc["header"]["read_gbps"] > 100
    gp = doc["models"][0]["graph_profile"]["decode_b1"]
    assert set(gp) == {"eager", "eager_graph"}
    for r in gp.values():
        assert r["kernels"] > 0 and r["gemm_us"] > 0 and 0 < r["gemm_pct_floor"] < 1000
    assert "gemm % of floor" in (tmp_path / "bench-model.md").read_text()


def test_a_compiled_mode_that_hits_the_recompile_limit_fails_instead_of_timing_eager():
    # Until 2026-11-25 max_autotune_graph hit dynamo's limit after two other compiled graph modes
    # and replayed the eager model under max-autotune's name. Now the limit hit is an error that
    # the mode records, with its reason, and nothing is timed.
    bm_run = importlib.import_module("gemmtune.benchmodel.run")  # the package exports a run() function

    if not bm_run._limit_hit():
        pytest.skip("this torch has no FailOnRecompileLimitHit")
    cfg = torch._dynamo.config
    saved = {n: getattr(cfg, n) for n in ("recompile_limit", "fail_on_recompile_limit_hit")}
    torch._dynamo.reset()
    try:
        bm_run._roomy_dynamo()
        assert cfg.recompile_limit >= 64 and cfg.fail_on_recompile_limit_hit
        cfg.recompile_limit = 1  # a limit that the second shape exceeds
        f = torch.compile(lambda x: x * 2 + 1, backend="eager", dynamic=False)
        timed = []

        def one_mode(mode):
            for n in (3, 5, 7):
                timed.append(f(torch.randn(n)).shape[0])

        rec, lines = {"phases": {"decode_b1": {"ms": 1.0}}}, []
        bm_run._guarded(one_mode, "max_autotune_graph", rec, lines.append)
        assert timed == [3], timed  # stopped at the first recompile past the limit
        assert "recompile limit" in rec["failed"] and "not timed" in rec["failed"] and rec["phases"] == {}
        assert lines and "FAILED" in lines[0]
    finally:
        for n, v in saved.items():
            setattr(cfg, n, v)
        torch._dynamo.reset()


def test_graph_modes_of_compiled_models_get_dynamo_room_but_no_reset(monkeypatch):
    bm_run = importlib.import_module("gemmtune.benchmodel.run")  # the package exports a run() function

    calls = []
    monkeypatch.setattr(bm_run, "_fresh_dynamo", lambda: calls.append("reset"))
    monkeypatch.setattr(bm_run, "_roomy_dynamo", lambda: calls.append("room"))
    for mode, replays in (("compile", {}), ("eager_graph", {}), ("max_autotune_graph", {}),
                          ("compile", {("compile_graph", "decode_b1"): object()}), ("eager", {1: 2})):
        bm_run._dynamo_for(mode, replays)
    # A reset after a capture would unload kernels the captured graph still replays.
    assert calls == ["reset", "room", "room"], calls


def test_pdl_modes_compile_with_inductors_pdl_and_no_other_mode_does():
    """Inductor's PDL flag is read when a graph's kernels are generated: _dynamo_for sets it for
    each mode before its first call, on for the _pdl modes (and their graph twins) only, and the
    runners' end (_no_lut) turns it off."""
    from torch._inductor import config as iconfig

    bm_run = importlib.import_module("gemmtune.benchmodel.run")
    seen = []
    try:
        for mode in ("max_autotune_pdl", "compile", "fuse_patch_compile_pdl_graph", "max_autotune_graph",
                     "max_autotune_pdl_graph"):
            bm_run._dynamo_for(mode, {"x": 1})
            seen.append(iconfig.triton.enable_pdl)
        bm_run._no_lut()
        assert seen == [True, False, True, False, True] and iconfig.triton.enable_pdl is False
    finally:
        iconfig.triton.enable_pdl = False


def test_fuse_patch_compile_pdl_serves_twins_of_the_fused_tuning_without_a_second_call(monkeypatch):
    """fuse_patch_compile_pdl: a fused copy of its own, patched with eager_fuse_patch's winners whose
    GEMV strips are -pdl twins (no second tuning call), compiled; its logits as eager's."""
    from torch._inductor import config

    one_layer_tiny(monkeypatch)
    strip = "skinny:BM1-BN16-BK64-SK1-S1-W4-core-det"  # 16 columns a program: few for the interpreter
    calls = []

    def tune(problems, **kw):
        calls.append(len(problems))
        return {p.key: strip if p.m == 1 and p.layout_b == "col" else "aten" for p in problems}

    out = {"modes": {}}
    model = benchmodel.build_model(benchmodel.parse_model("tiny-llama"), torch.float32, "cpu")
    ids = torch.randint(0, 500, (1, 1))
    v = benchmodel.make_variants(model, ["eager", "fuse_patch_compile_pdl"], lambda m: m(ids), out,
                                 {"tune_fn": tune, "progress": False})
    assert len(calls) == 1
    assert strip + "-pdl" in out["pdl_winners"] and strip not in out["pdl_winners"]
    assert v["fuse_patch_compile_pdl"]._orig_mod is not v["eager_fuse_patch"]
    with torch.no_grad(), config.patch(fx_graph_cache=False):
        torch._dynamo.reset()
        got = v["fuse_patch_compile_pdl"](ids).logits
        torch.testing.assert_close(got, model(ids).logits, rtol=1e-4, atol=1e-4)
    torch._dynamo.reset()


def test_the_fused_tuning_credits_the_twins_when_a_pdl_mode_runs_on_hopper(monkeypatch):
    """bench-model's one fused tuning call serves fuse_patch_compile_pdl too: on a Hopper it passes
    pdl.PDL_CREDIT to gemmtune.tune (as tune_model(pdl=True) would) and records it; without a
    _pdl mode, or before Hopper, it passes none."""
    import gemmtune
    import gemmtune.pdl as pdl

    strip = "skinny:BM1-BN2-BK128-SK1-S1-W4-core-det"
    seen = []

    def fake_tune(problems, **kw):
        seen.append(kw.get("pdl_credit"))
        return {p.key: strip if p.m == 1 and p.layout_b == "col" else "aten" for p in problems}

    monkeypatch.setattr(gemmtune, "tune", fake_tune)
    model = benchmodel.build_model(benchmodel.parse_model("tiny-llama"), torch.float32, "cpu")
    ids = torch.randint(0, 500, (1, 1))
    for cap, modes, want in [((9, 0), ["fuse_patch_compile_pdl"], pdl.PDL_CREDIT), ((8, 9), ["fuse_patch_compile_pdl"], None),
                             ((9, 0), ["eager_fuse_patch"], None)]:
        monkeypatch.setattr(pdl, "_capability", lambda cap=cap: cap)
        out = {"modes": {}}
        benchmodel.make_variants(model, modes, lambda m: m(ids), out, {"progress": False})
        assert seen[-1] == want and out.get("fuse_tune_pdl_credit") == want
    torch._dynamo.reset()


def test_lut_compile_without_a_table_fails_with_the_reason():
    bm_run = importlib.import_module("gemmtune.benchmodel.run")
    rec, lines = {"phases": {}}, []
    bm_run._guarded(lambda mode: bm_run._dynamo_for(mode, {"x": 1}, {"table": None}, rec),
                    "lut_compile_graph", rec, lines.append)
    assert "table of gemmtune's tuning call" in rec["failed"] and "FAILED" in lines[0]


@pytest.mark.slow
def test_lut_compile_steers_max_autotune_with_the_tuning_calls_table(tmp_path, monkeypatch):
    # lut_compile: torch.compile max-autotune with gemmtune's table of the same (one) tuning call
    # installed as Inductor's lookup table while it compiles, and removed for every other mode.
    one_layer_tiny(monkeypatch)  # the prefill and step graphs max-autotune compiles: one layer
    from torch._inductor import config as icfg

    import gemmtune.inductor_export as ie
    from gemmtune.configs import Choice
    from gemmtune.table import LookupTable, TableChoice, provenance

    if ie.unavailable_reason():
        pytest.skip(ie.unavailable_reason())
    calls = []

    def tuner(problems, **kw):
        calls.append(len(problems))
        table = LookupTable(provenance("test", "interp", "x", "x", "x", "by-hand"),
                            {p.key: [TableChoice(Choice.parse("aten"))] for p in problems})
        class Result(dict):  # problem key -> choice, with the run's table as a TuneResult has
            pass
        res = Result({p.key: "aten" for p in problems})
        res.table = table
        return res

    bm_run = importlib.import_module("gemmtune.benchmodel.run")
    full = bm_run.greedy
    # 4 greedy steps, not 32: each is a max-autotune-sized step on 2 cores (on a StaticCache the
    # prompt and the step compile once each).
    monkeypatch.setattr(bm_run, "greedy", lambda model, prompt, **kw: full(model, prompt, steps=4, **kw))
    doc = benchmodel.run(["tiny-llama"], phases=["prefill_b8_s128"], modes=["eager", "lut_compile"],
                         out_dir=tmp_path, dtype="float32", tune_kwargs={"tune_fn": tuner}, log=lambda s: None)
    m = doc["models"][0]
    assert len(calls) == 1 and "error" not in m
    rec = m["modes"]["lut_compile"]
    assert "failed" not in rec, rec.get("failed")
    assert rec["lut_entries"] >= 3  # one key per tuned (M, N, K) problem at least
    pre = rec["phases"]["prefill_b8_s128"]
    assert pre["logits_ok"] and rec["greedy_match"] is True
    assert icfg.lookup_table.table is None  # uninstalled after the modes
    assert "lut_compile" in (tmp_path / "bench-model.md").read_text()


def test_cdt_modes_compile_with_coordinate_descent_only(monkeypatch):
    # compile_cdt / patch_compile_cdt: the default compile plus coordinate-descent tuning, no GEMM
    # search; patch_compile_cdt compiles the patched copy of the one tuning call.
    bm_run = importlib.import_module("gemmtune.benchmodel.run")
    seen = []
    monkeypatch.setattr(torch, "compile", lambda m, **kw: seen.append((m, kw)) or m)
    model = benchmodel.build_causal("tiny-llama", torch.float32, "cpu")
    calls, out = [], {"modes": {}}
    v = bm_run.make_variants(model, ["compile_cdt", "patch_compile_cdt", "compile_cdt_graph"],
                             lambda m: m(torch.randint(0, 500, (1, 8))), out, {"tune_fn": fake_tuner(calls)})
    assert [kw for _, kw in seen] == [{"dynamic": False, "options": {"coordinate_descent_tuning": True}}] * 2
    assert seen[0][0] is model and seen[1][0] is v["patched"] is not model and len(calls) == 1
    assert v["compile_cdt_graph"] is v["compile_cdt"]


def test_kernel_profile_aggregates_per_replay_and_splits_gemm_from_the_rest():
    from gemmtune.benchmodel import profile as prof
    events = [("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_cublas", 400.0, 20),
              ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", 90.0, 40),
              ("_skinny_kernel", 100.0, 10), ("triton_tem_fused_mm_0", 50.0, 10),
              ("Memset (Device)", 10.0, 10), ("never_ran", 5.0, 0)]
    # gemmtune's own kernels by their jit names (the H100 profile of 2026-11-25 showed _tiled_mm_kernel)
    assert all(prof.kernel_class(n) == "gemm" for n in ("_tiled_mm_kernel", "_tiled_mm_static", "_persistent_kernel",
                                                        "_sum_splits_kernel", "nvjet_sm90_tst_64x8_64x16_2x1_v_bz_TNT"))
    # Inductor's M=1 mm lowered to a reduction (names from the H200's Llama decode profile,
    # 2026-11-29), and the pointwise kernels that merely carry mm among their origins
    assert all(prof.kernel_class(n) == "gemm" for n in ("triton_red_fused__unsafe_view_mm_mul_silu_slice_t_view_11",
                                                        "triton_red_fused_mm_t_transpose_view_8"))
    assert all(prof.kernel_class(n) == "other" for n in (
        "triton_poi_fused__to_copy_add_arange_bmm_cat_cos_expand_mm_mul_neg_sin_slice_transpose_0",
        "triton_red_fused__to_copy_mean_pow_15", "triton_poi_fused_cat_mm_slice_transpose_view_5"))
    r = prof.aggregate(events, replays=10, top=3)
    assert r["us"] == pytest.approx(65.0) and r["gemm_us"] == pytest.approx(55.0)
    assert r["other_us"] == pytest.approx(10.0) and r["kernels"] == pytest.approx(9.0)
    assert [k["name"] for k in r["top"]] == [events[0][0], "_skinny_kernel", events[1][0]]
    assert r["top"][2]["class"] == "other" and r["top"][2]["per_replay"] == 4.0
    with pytest.raises(ValueError, match="replays"):
        prof.aggregate(events, replays=0)
    rows = prof.markdown_rows({"decode_b1": {"compile_graph": r}})
    assert any("| compile_graph | 65.0 | 55.0 | — | 10.0 | 9 |" in line for line in rows)  # no floor given
    assert prof.PDL_NOTE not in rows  # said only where a PDL mode is profiled
    assert prof.PDL_NOTE in prof.markdown_rows({"decode_b1": {"compile_graph": r, "fuse_patch_compile_pdl_graph": r}})


def test_profile_graphs_records_each_mode_and_survives_a_profiler_failure(monkeypatch):
    from gemmtune.benchmodel import profile as prof
    fake = {"us": 1.0, "gemm_us": 0.5, "other_us": 0.5, "kernels": 2.0, "top": []}

    def fake_profile(fn, n):
        if fn == "bad":
            raise RuntimeError("CUPTI busy")
        return fake
    monkeypatch.setattr(prof, "profile_replay", fake_profile)
    out, lines = {}, []
    prof.profile_graphs(out, {("compile_graph", "decode_b1"): "ok", ("max_autotune_graph", "decode_b1"): "bad",
                              ("compile_graph", "prefill_b1_s512"): "ok"}, ["decode_b1"], "llama", lines.append)
    assert out["graph_profile"] == {"decode_b1": {"compile_graph": fake}}
    assert any("not profiled" in s and "CUPTI busy" in s for s in lines)


def test_a_decode_profile_reports_its_gemms_against_the_weights_read_floor(monkeypatch):
    """A decode phase's profile gives its GEMM time as a % of the floor: the weights read once at
    the measured read bandwidth (profile.decode_floor), in the log line, the JSON and the report's
    table. The weights are counted once: a fused group's members (views of the fused layer's
    weight) and a tied layer add no bytes."""
    import copy

    import gemmtune
    from gemmtune.benchmodel import profile as prof

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.o = torch.nn.Linear(32, 32), torch.nn.Linear(32, 16), torch.nn.Linear(32, 32)

        def forward(self, x):
            return self.o(self.q(x) * self.k(x).sum(-1, keepdim=True))

    m = Block()
    want = (32 * 32 + 16 * 32 + 32 * 32) * 4
    assert prof.weight_bytes(m) == want
    f = copy.deepcopy(m)
    with torch.no_grad():
        assert gemmtune.fuse_linears(f, torch.randn(3, 32))
    assert prof.weight_bytes(f) == want  # the fused layer and its members: one range of one storage
    fake = {"us": 100.0, "gemm_us": 80.0, "other_us": 20.0, "kernels": 9.0, "top": []}
    monkeypatch.setattr(prof, "profile_replay", lambda fn, n: dict(fake))
    floor = prof.decode_floor(want, 1.0)  # 1 GB/s: 10.24 us for these 10,240 bytes
    assert floor["us"] == pytest.approx(10.24)
    out, lines = {}, []
    prof.profile_graphs(out, {("compile_graph", "decode_b1"): "ok", ("compile_graph", "prefill_b1_s512"): "ok"},
                        ["decode_b1", "prefill_b1_s512"], "m", lines.append, floors={"decode_b1": floor})
    r = out["graph_profile"]["decode_b1"]["compile_graph"]
    assert r["gemm_pct_floor"] == pytest.approx(12.8) and r["floor"] == floor
    assert "gemm_pct_floor" not in out["graph_profile"]["prefill_b1_s512"]["compile_graph"]
    assert any("GEMMs at 13% of the HBM floor (10.2 us" in s for s in lines)
    rows = prof.markdown_rows(out["graph_profile"])
    assert any("| compile_graph | 100.0 | 80.0 | 13% | 20.0 | 9 |" in line for line in rows)
    assert any("the GEMMs' HBM floor 10.2 µs" in line for line in rows)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_read_bandwidth_for_the_decode_floor_is_measured():
    """bench-model --profile measures the read bandwidth once (bench.ceilings.read_ceiling) for
    the decode profiles' GEMM floor: a plausible HBM rate, and one log line."""
    from gemmtune.benchmodel.run import _read_bandwidth
    lines = []
    gbps = _read_bandwidth(lines.append)
    assert gbps is not None and 300 < gbps < 20000, lines
    assert len(lines) == 1 and "GB/s" in lines[0]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_gpu_profile_of_a_replayed_graph_sees_its_kernels():
    from gemmtune.benchmodel import profile as prof
    a, b = torch.randn(64, 256, device="cuda", dtype=torch.float16), torch.randn(256, 128, device="cuda",
                                                                                 dtype=torch.float16)
    replay, _ = benchmodel.capture(lambda: (a @ b).relu())
    r = prof.profile_replay(replay, replays=5)
    assert r["kernels"] >= 2 and r["gemm_us"] > 0 and r["us"] >= r["gemm_us"], [k["name"] for k in r["top"]]


def test_report_splits_the_tuning_time():
    """bench-model records where tune_s went (the tune call, its workers' start-up) and the report
    says so: MiniLM's 9.4 s on an H100 (2026-11-26) could not be split from the JSON alone."""
    from gemmtune.benchmodel.report import markdown
    m = {"model": "minilm", "params": 22.7e6, "tune_s": 9.4, "tune_call_s": 6.1, "tune_startup_s": 3.5,
         "tuned_problems": 4, "tuned_layer_shapes": 3, "winners": ["aten"],
         "modes": {"eager": {"phases": {"embed_64": {"ms": 1.0, "spread": 0.01, "calls": 10}}}}}
    head = {"device": "GPU", "torch": "t", "triton": "t", "gemmtune": "g", "date": "d", "dtype": "bf16", "tune": "fast"}
    md = markdown({"header": head, "models": [m]})
    assert "gemmtune tuning: 9.4 s (the tune call 6.1 s, of it 3.5 s workers' start-up" in md
    del m["tune_call_s"], m["tune_startup_s"]
    assert "gemmtune tuning: 9.4 s for 4 problems" in markdown({"header": head, "models": [m]})


# ------------------------------------------------------------------ a user's own model: config:, dir:, hf:
TINY_MISTRAL = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)


def save_config(folder, model_type="mistral", **kw):
    """A HF config.json of ``model_type`` (tiny Mistral sizes unless ``kw`` says otherwise) in ``folder``."""
    import transformers as tf
    cfg = tf.AutoConfig.for_model(model_type, **(kw or TINY_MISTRAL))
    cfg.save_pretrained(folder)
    return folder


def test_user_model_entries_and_their_errors(tmp_path, monkeypatch):
    from gemmtune.benchmodel import ModelError, causal_config, parse_model

    folder = save_config(tmp_path / "mine")
    for entry in (f"config:{folder}", f"config:{folder / 'config.json'}"):
        spec = parse_model(entry)
        assert spec.kind == "config" and spec.user and causal_config(spec).model_type == "mistral"
    assert causal_config(parse_model("hf:gpt2")).n_embd == 768  # transformers' defaults: GPT-2 124M
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "nomt.json").write_text('{"hidden_size": 64}')
    for entry, msg in [
        (f"config:{tmp_path / 'nowhere'}", "nowhere does not exist"),
        (f"config:{tmp_path / 'empty'}", "no config.json in the folder"),
        (f"dir:{tmp_path / 'empty'}", "no config.json in the folder"),
        (f"dir:{folder}", f"no weights in {folder} (none of model.safetensors"),
        (f"dir:{folder / 'config.json'}", "is not a folder"),
        ("config:", "give a path after config:"),
        ("hf:", "give a model_type after hf:"),
        ("mistral-7b", "unknown model 'mistral-7b'; known: llama-1b"),
    ]:
        with pytest.raises(ModelError, match=msg.replace("(", r"\(")):
            parse_model(entry)
    assert "config:PATH" in str(pytest.raises(ModelError, parse_model, "gpt3").value)  # the forms are listed
    for entry, msg in [
        (f"config:{tmp_path / 'bad.json'}", "cannot read"),
        (f"config:{tmp_path / 'nomt.json'}", 'has no "model_type"'),
        (f"config:{save_config(tmp_path / 'bert', 'bert', **TINY_MISTRAL)}", "is an encoder"),
        (f"config:{save_config(tmp_path / 't5', 't5')}", "model_type t5 is not a causal LM"),
        (f"config:{save_config(tmp_path / 'short', max_position_embeddings=32)}", "under the 48 positions"),
        ("hf:mistrall", "knows no model_type 'mistrall' (did you mean mistral"),
    ]:
        with pytest.raises(ModelError, match=msg.replace("(", r"\(")) as e:
            causal_config(parse_model(entry))
        assert str(e.value).startswith(entry + ": ") and "\n" not in str(e.value)
    # An encoder's decoder variant runs when its config asks for it.
    dec = save_config(tmp_path / "bertdec", "bert", is_decoder=True, **TINY_MISTRAL)
    assert causal_config(parse_model(f"config:{dec}")).is_decoder
    # Every entry is checked before anything runs or is written.
    with pytest.raises(ModelError, match="nowhere does not exist"):
        benchmodel.run(["tiny-gpt2", f"config:{tmp_path / 'nowhere'}"], out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()
    monkeypatch.setitem(__import__("sys").modules, "transformers", None)  # not installed
    with pytest.raises(ModelError, match=r"pip install 'gemmtune\[models\]'"):
        causal_config(parse_model(f"config:{folder}"))
    with pytest.raises(ModelError, match=r"pip install 'gemmtune\[models\]'"):
        benchmodel.run([f"config:{folder}"], out_dir=tmp_path / "out")


def test_cli_bench_model_bad_entry_is_one_line(tmp_path, capsys):
    from gemmtune.cli import main

    save_config(tmp_path / "t5", "t5")
    for entry, msg in [(f"config:{tmp_path / 'nope'}", "does not exist"),
                       (f"config:{tmp_path / 't5'}", "neither a causal LM")]:
        rc = main(["bench-model", "--models", f"tiny-gpt2,{entry}", "--out", str(tmp_path / "out")])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and err.startswith(f"gemmtune bench-model: error: {entry}: "), err
        assert msg in err


TINY_BERT = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 max_position_embeddings=64)


def test_user_entries_are_causal_lms_or_text_encoders(tmp_path):
    """bench-model's roles: a masked-LM encoder (BERT, RoBERTa) is an encoder, its decoder variant
    and a Mistral causal, an encoder-decoder (T5) neither, in one line naming both."""
    from gemmtune.benchmodel import ModelError, parse_model, user_config

    for mt, kw, role in [("bert", TINY_BERT, "encoder"), ("roberta", TINY_BERT, "encoder"),
                         ("bert", {**TINY_BERT, "is_decoder": True}, "causal"), ("mistral", TINY_MISTRAL, "causal")]:
        cfg, got = user_config(parse_model(f"config:{save_config(tmp_path / (mt + str(len(kw))), mt, **kw)}"))
        assert (cfg.model_type, got) == (mt, role)
    assert user_config(parse_model("hf:bert"))[1] == "encoder"
    for entry, msg in [(f"config:{save_config(tmp_path / 't5', 't5')}", "neither a causal LM .* nor a text encoder"),
                       (f"config:{save_config(tmp_path / 'short', 'bert', **{**TINY_BERT, 'max_position_embeddings': 8})}",
                        "max_position_embeddings 8 is under the 14 tokens")]:
        with pytest.raises(ModelError, match=msg) as e:
            user_config(parse_model(entry))
        assert str(e.value).startswith(entry + ": ") and "\n" not in str(e.value)


def test_embed_batch_pads_random_ids_to_the_longest_sequence():
    from gemmtune.benchmodel import embed_batch

    ids, mask = embed_batch(512, 3, "cpu", n=64, seed=1)
    lengths = mask.sum(1)
    assert ids.shape == (64, 14) and int(lengths.max()) == 14 and int(lengths.min()) >= 8
    assert bool((mask[:, :8] == 1).all()) and bool((ids[mask == 0] == 3).all())
    assert len(set(lengths.tolist())) > 1  # a padded batch: the mask is exercised
    again, _ = embed_batch(512, 3, "cpu", n=64, seed=1)
    assert torch.equal(ids, again)  # seeded: every mode and run embeds the same batch


def test_an_encoder_config_runs_through_bench_model(tmp_path):
    """config:PATH of a BERT on the CPU: the embed_64 phase only (the causal phases asked for do
    not apply), one tuning call, every mode's embeddings against the fp32 copy's, and the
    interleaved eager verdict, as MiniLM's; dir: loads a saved encoder's own weights."""
    import transformers as tf

    entry = f"config:{save_config(tmp_path / 'bert', 'bert', **TINY_BERT)}"
    calls = []
    doc = benchmodel.run([entry], phases=["decode_b1"], modes=["eager", "eager_patch"], out_dir=tmp_path / "out",
                         dtype="float32", tune_kwargs={"tune_fn": fake_tuner(calls)}, log=lambda s: None)
    m = doc["models"][0]
    assert "error" not in m, m.get("error")
    assert (m["model"], m["model_type"], m["encoder"]) == (entry, "bert", True)
    assert m["embed_tokens"]["sequences"] == 64 and m["embed_tokens"]["padded_to"] == 14
    assert len(calls) == 1 and calls[0] >= 4  # q/k/v (or their fusion), o, intermediate, output: one call
    for mode in ("eager", "eager_patch"):
        r = m["modes"][mode]["phases"]["embed_64"]
        assert r["cosine_ok"] and r["min_cosine"] > 0.9999 and r["ms"] > 0
    assert m["modes"]["eager_patch"]["phases"]["embed_64"]["interleaved"]["eager_ms"] > 0
    md = (tmp_path / "out" / "bench-model.md").read_text()
    assert f"## {entry} (bert, " in md and "| embed_64 |" in md
    # dir: an encoder folder's weights, not seeded ones: its embeddings are the saved model's
    torch.manual_seed(5)
    saved = tf.AutoModel.from_config(tf.AutoConfig.for_model("bert", **TINY_BERT)).eval()
    saved.save_pretrained(tmp_path / "bertdir")
    spec = benchmodel.parse_model(f"dir:{tmp_path / 'bertdir'}")
    built = benchmodel.build_encoder(spec, torch.float32, "cpu")
    ids, mask = benchmodel.embed_batch(512, 0, "cpu")
    with torch.no_grad():
        torch.testing.assert_close(built(input_ids=ids, attention_mask=mask).last_hidden_state,
                                   saved(input_ids=ids, attention_mask=mask).last_hidden_state)


def test_a_config_json_runs_through_bench_model(tmp_path):
    """config:PATH end to end on the CPU: built with random weights, the phases that fit its 256
    positions run (prefill_b1_s512 is left out, with the reason), one tuning call, the checks, and
    results named by the entry with the config's model_type and parameter count."""
    entry = f"config:{save_config(tmp_path / 'mine') / 'config.json'}"
    calls = []
    doc = benchmodel.run([entry], phases=["decode_b1", "prefill_b1_s512"], modes=["eager", "eager_patch"],
                         out_dir=tmp_path / "out", dtype="float32", tune_kwargs={"tune_fn": fake_tuner(calls)},
                         log=lambda s: None)
    m = doc["models"][0]
    assert "error" not in m, m.get("error")
    assert (m["model"], m["model_type"], m["attn_implementation"]) == (entry, "mistral", "sdpa")
    built = benchmodel.build_model(benchmodel.parse_model(entry), torch.float32, "cpu")
    assert m["params"] == sum(p.numel() for p in built.parameters())
    assert m["phases_not_run"] == {"prefill_b1_s512": "needs 512 positions, the config declares 256"}
    assert len(calls) == 1 and m["tuned_layer_shapes"] >= 4
    assert set(m["modes"]["eager_patch"]["phases"]) == {"decode_b1"}
    assert m["modes"]["eager_patch"]["greedy_match"] is True
    md = (tmp_path / "out" / "bench-model.md").read_text()
    assert f"## {entry} (mistral, 0.1M parameters)" in md and "| decode_b1 |" in md
    assert "Phases not run: prefill_b1_s512 (needs 512 positions, the config declares 256)." in md
    assert json.loads((tmp_path / "out" / "bench-model.json").read_text())["models"][0]["model"] == entry



def test_a_mixture_of_experts_is_checked_on_its_median_tokens_logits(tmp_path):
    """A mixture of experts' logits pass or fail on the median token's error (a router's near tie
    sends a token to other experts in bf16, in any mode): a mode whose whole-logits error is 3x
    eager's passes when its median token is as close as eager's; a dense model's does not."""
    from gemmtune.benchmodel.report import markdown
    from gemmtune.benchmodel.run import _verdicts

    def doc(moe: bool) -> dict:
        ph = lambda whole, med: {"ms": 1.0, "logits_rel_err": whole, "logits_token_median_err": med}  # noqa: E731
        out = {"model": "m", "params": 1e6, "modes": {"eager": {"phases": {"prefill_b1_s512": ph(0.02, 0.004)}},
                                                       "compile": {"phases": {"prefill_b1_s512": ph(0.06, 0.005)}},
                                                       "patch_compile": {"phases": {"prefill_b1_s512": ph(0.02, 0.02)}}}}
        if moe:
            out["routed_experts"] = 4
        _verdicts(out)
        return out
    dense, moe = doc(False), doc(True)
    ok = lambda out, mode: out["modes"][mode]["phases"]["prefill_b1_s512"]["logits_ok"]  # noqa: E731
    assert not ok(dense, "compile") and ok(dense, "patch_compile")
    assert ok(moe, "compile") and not ok(moe, "patch_compile")
    head = {"device": "CPU", "torch": "t", "triton": "t", "gemmtune": "g", "date": "d", "dtype": "bf16", "tune": "fast"}
    md = markdown({"header": head, "models": [moe]})
    assert "compile/prefill_b1_s512: logits err 6.00e-02, median token 5.00e-03 ok" in md
    assert "A mixture of experts (4 routed)" in md
    assert "A mixture of experts" not in markdown({"header": head, "models": [dense]})


def test_a_mixture_of_experts_config_runs_through_bench_model(tmp_path):
    """Mixtral's config end to end on the CPU (fp32): its experts are counted, and each checked
    phase records the median token's logits error beside the whole's."""
    sizes = {**TINY_MISTRAL, "max_position_embeddings": 1024}
    entry = f"config:{save_config(tmp_path / 'moe', 'mixtral', **sizes, num_local_experts=4, num_experts_per_tok=2)}"
    calls = []
    doc = benchmodel.run([entry], phases=["prefill_b1_s512"], modes=["eager", "eager_patch"], out_dir=tmp_path / "out",
                         dtype="float32", tune_kwargs={"tune_fn": fake_tuner(calls)}, log=lambda s: None)
    m = doc["models"][0]
    assert "error" not in m, m.get("error")
    assert m["model_type"] == "mixtral" and m["routed_experts"] == 4
    r = m["modes"]["eager_patch"]["phases"]["prefill_b1_s512"]
    assert r["logits_ok"] and 0 <= r["logits_token_median_err"] < 1e-3  # fp32 against fp32
    assert m["modes"]["eager_patch"]["greedy_match"] is True
    assert "A mixture of experts (4 routed)" in (tmp_path / "out" / "bench-model.md").read_text()

def test_dir_loads_the_folders_weights_and_config_seeds_its_own(tmp_path):
    import transformers as tf

    torch.manual_seed(3)
    saved = tf.AutoModelForCausalLM.from_config(tf.MistralConfig(**TINY_MISTRAL)).eval()
    saved.save_pretrained(tmp_path / "m")
    ids = torch.randint(0, 512, (1, 6))
    loaded = benchmodel.build_model(benchmodel.parse_model(f"dir:{tmp_path / 'm'}"), torch.float32, "cpu")
    random = benchmodel.build_model(benchmodel.parse_model(f"config:{tmp_path / 'm'}"), torch.float32, "cpu")
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=ids).logits, saved(input_ids=ids).logits)
        assert not torch.allclose(random(input_ids=ids).logits, saved(input_ids=ids).logits)
    half = benchmodel.build_model(benchmodel.parse_model(f"config:{tmp_path / 'm'}"), torch.float16, "cpu")
    assert half.dtype == torch.float16  # the same seeded weights in the run's dtype
    torch.testing.assert_close(half.lm_head.weight.float(), random.lm_head.weight, rtol=1e-3, atol=1e-3)


def test_a_model_without_sdpa_builds_with_its_default_attention(tmp_path):
    # transformers' Bloom refuses sdpa: the builder asks for it only where the class supports it.
    entry = f"config:{save_config(tmp_path / 'bloom', 'bloom', vocab_size=512, hidden_size=64, n_layer=2, n_head=4)}"
    model = benchmodel.build_model(benchmodel.parse_model(entry), torch.float32, "cpu")
    assert model.config.model_type == "bloom" and model.config._attn_implementation != "sdpa"
    with torch.no_grad():
        assert model(input_ids=torch.randint(0, 512, (1, 5))).logits.shape == (1, 5, 512)


def test_fuse_modes_fuse_a_copy_and_tune_it_once(tmp_path):
    """eager_fuse and eager_fuse_patch: fused deep copies (the model itself untouched), the fused
    shapes tuned in one call of their own shared with the graph twin; checks and report lines."""
    calls = []
    out = {"modes": {}}
    model = benchmodel.build_model(benchmodel.parse_model("tiny-llama"), torch.float32, "cpu")
    ids = torch.randint(0, 500, (1, 8))
    v = benchmodel.make_variants(model, ["eager", "eager_fuse", "eager_fuse_patch", "eager_fuse_patch_graph"],
                                 lambda m: m(ids), out, {"tune_fn": fake_tuner(calls), "progress": False})
    assert calls and len(calls) == 1  # one tuning call, for both patched fused copies
    assert not any("gemmtune_fused" in n for n, _ in model.named_modules())
    layers = model.config.num_hidden_layers
    assert len(out["fused_groups"]) == 2 * layers and out["fuse_tune_s"] >= 0
    with torch.no_grad():
        want = model(ids).logits
        for mode in ("eager_fuse", "eager_fuse_patch", "eager_fuse_patch_graph"):
            assert any("gemmtune_fused" in n for n, _ in v[mode].named_modules())
            torch.testing.assert_close(v[mode](ids).logits, want, rtol=1e-5, atol=1e-5)
    doc = benchmodel.run(["tiny-llama"], phases=["decode_b1"], modes=["eager", "eager_copy", "eager_fuse"],
                         out_dir=tmp_path, dtype="float32", tune_kwargs={"tune_fn": fake_tuner([])}, log=lambda s: None)
    rec = doc["models"][0]["modes"]["eager_fuse"]
    # the deep-copy control: timed in the same rounds, and each deep-copied mode's ratio against it
    cp = doc["models"][0]["modes"]["eager_copy"]
    assert cp["greedy_match"] is True and cp["phases"]["decode_b1"]["interleaved"]["rounds"] == 7
    fi = rec["phases"]["decode_b1"]["interleaved"]
    assert fi["x_copy_lo"] <= fi["x_copy_paired"] <= fi["x_copy_hi"]
    assert "x_copy_paired" not in cp["phases"]["decode_b1"]["interleaved"]  # not against itself
    assert rec["greedy_match"] is True and rec["phases"]["decode_b1"]["interleaved"]["rounds"] == 7
    md = (tmp_path / "bench-model.md").read_text()
    assert "Fused sibling layers" in md and "q_proj + k_proj + v_proj ×2" in md and "eager vs eager_fuse" in md
    assert "eager vs eager_copy" in md and "against eager_copy" in md
    # the A/A control: eager timed twice in the same rounds, its paired ratio the method's resolution
    aa = doc["models"][0]["modes"]["eager"]["phases"]["decode_b1"]["interleaved_aa"]
    assert aa["rounds"] == 7 and aa["q1"] <= aa["x_paired"] <= aa["q3"]
    assert aa["lo"] <= aa["x_paired"] <= aa["hi"]
    assert "eager against itself, interleaved (the resolution)" in md and "95% CI" in md
    inter = rec["phases"]["decode_b1"]["interleaved"]
    assert inter["x_eager_lo"] <= inter["x_eager_paired"] <= inter["x_eager_hi"]
    # more rounds on request (bench-model --eager-rounds)
    doc = benchmodel.run(["tiny-llama"], phases=["decode_b1"], modes=["eager", "eager_fuse"], out_dir=tmp_path,
                         dtype="float32", tune_kwargs={"tune_fn": fake_tuner([])}, log=lambda s: None,
                         eager_rounds=9)
    assert doc["models"][0]["modes"]["eager_fuse"]["phases"]["decode_b1"]["interleaved"]["rounds"] == 9
    with pytest.raises(ValueError, match="eager_rounds"):
        benchmodel.run(["tiny-llama"], phases=["decode_b1"], modes=["eager"], out_dir=tmp_path, eager_rounds=0)


def test_fuse_patch_compile_merges_each_group_in_the_compiled_graph(monkeypatch):
    """fuse_patch_compile(_cdt): eager_fuse_patch's model compiled; each fused group one GEMM in the
    graph (gemmtune.fuse_compile's pass), the logits as the unfused eager model's."""
    from torch._inductor import config

    from gemmtune import fuse_compile

    one_layer_tiny(monkeypatch)  # its two groups (q/k/v, gate/up) merge as in every layer
    out = {"modes": {}}
    model = benchmodel.build_model(benchmodel.parse_model("tiny-llama"), torch.float32, "cpu")
    ids = torch.randint(0, 500, (1, 8))
    v = benchmodel.make_variants(model, ["eager", "fuse_patch_compile_cdt"], lambda m: m(ids), out,
                                 {"tune_fn": fake_tuner([]), "progress": False})
    assert v["fuse_patch_compile_cdt"]._orig_mod is v["eager_fuse_patch"]
    before = fuse_compile.STATS["merged"]
    with torch.no_grad(), config.patch(fx_graph_cache=False):
        torch._dynamo.reset()
        got = v["fuse_patch_compile_cdt"](ids).logits
        torch.testing.assert_close(got, model(ids).logits, rtol=1e-4, atol=1e-4)
    torch._dynamo.reset()
    assert fuse_compile.STATS["merged"] - before == 2 * model.config.num_hidden_layers  # q/k/v and gate/up
    doc = {"header": {k: "?" for k in ("device", "torch", "triton", "gemmtune", "date", "dtype", "tune")},
           "models": [{"model": "tiny-llama", "params": 1e6, "modes": {"fuse_patch_compile_cdt": {"fused_merged": 4, "phases": {}}},
                       "fused_groups": out["fused_groups"]}]}
    assert "`fuse_patch_compile_cdt`: 4 groups one GEMM in its compiled graphs" in benchmodel.report.markdown(doc)


def test_every_mode_records_the_fused_groups_its_graphs_merged(monkeypatch):
    """_guarded, which both runners (causal LMs and MiniLM) run each mode through, records how many
    fused groups the mode's compiled graphs merged; a mode that merged none gets no count."""
    import sys

    from gemmtune import fuse_compile

    guarded = sys.modules["gemmtune.benchmodel.run"]._guarded
    monkeypatch.setitem(fuse_compile.STATS, "merged", 10)
    rec, none = {}, {}
    guarded(lambda mode: fuse_compile.STATS.__setitem__("merged", 13), "fuse_patch_compile", rec, lambda s: None)
    guarded(lambda mode: None, "compile", none, lambda s: None)
    assert rec == {"fused_merged": 3} and none == {}


def test_interleave_graphs_pairs_and_partial_runs():
    """The graph modes' interleaved verdict: every mode that captured all phases, timed together,
    and the × of each listed pair that ran; called after each graph mode (run.bench_causal), so a
    run cut later keeps it. A mode missing a phase is left out; one mode alone gives no verdict."""
    from gemmtune.benchmodel.timing import interleave_graphs
    import time as _time

    def sleeper(ms):
        return lambda: _time.sleep(ms / 1e3)
    out, logs = {}, []
    replays = {("fuse_patch_compile_graph", "decode_b1"): sleeper(2.0)}
    interleave_graphs(out, replays, ["decode_b1"], "m", logs.append)
    assert "graph_interleaved" not in out and not logs  # one mode: nothing to interleave
    replays[("fuse_patch_compile_pdl_graph", "decode_b1")] = sleeper(1.0)
    replays[("max_autotune_pdl_graph", "prefill_b1_s512")] = sleeper(1.0)  # not every phase: left out
    interleave_graphs(out, replays, ["decode_b1"], "m", logs.append)
    rec = out["graph_interleaved"]["decode_b1"]
    assert set(rec) == {"fuse_patch_compile_graph", "fuse_patch_compile_pdl_graph", "spread",
                        "fuse_patch_compile_pdl_graph_x_fuse_patch_compile_graph"}
    assert rec["fuse_patch_compile_pdl_graph_x_fuse_patch_compile_graph"] == pytest.approx(
        rec["fuse_patch_compile_graph"] / rec["fuse_patch_compile_pdl_graph"])
    assert rec["fuse_patch_compile_pdl_graph_x_fuse_patch_compile_graph"] > 1.3  # 2 ms against 1 ms
    assert len(logs) == 1 and "graphs interleaved" in logs[0]


def test_a_user_models_own_failure_is_one_line_and_the_run_goes_on(tmp_path, monkeypatch):
    """A config:/dir:/hf: model whose forward raises (a Mamba fed a KV cache raised IndexError in
    transformers' code) is recorded as not run, with the exception and where it was raised, and
    the next model runs; a named model's failure is gemmtune's bug and keeps its traceback."""
    bm_run = importlib.import_module("gemmtune.benchmodel.run")
    save_config(tmp_path / "mine")
    real = bm_run.bench_causal

    def failing(name, *a, **kw):
        if name.startswith("config:") or name == "tiny-gpt2":
            raise IndexError("list index out of range")
        return real(name, *a, **kw)
    monkeypatch.setattr(bm_run, "bench_causal", failing)
    logs = []
    doc = benchmodel.run([f"config:{tmp_path / 'mine'}", "tiny-llama"], phases=["decode_b1"], modes=["eager"],
                         out_dir=tmp_path / "out", dtype="float32", log=logs.append)
    mine, llama = doc["models"]
    assert mine["error"].startswith("IndexError: list index out of range (raised at tests/test_benchmodel.py:")
    assert "error" not in llama and llama["modes"]["eager"]["phases"]["decode_b1"]["ms"] > 0
    assert any("not run: IndexError" in line for line in logs)
    with pytest.raises(IndexError):
        benchmodel.run(["tiny-gpt2"], phases=["decode_b1"], modes=["eager"], out_dir=tmp_path / "out2",
                       dtype="float32", log=lambda s: None)


def test_decode_phase_compiles_the_step_only():
    """A decode phase's prompt fills the KV cache through the model a torch.compile wrapper holds:
    one compiled graph (the step), not a second one for the prompt, whose prefill-sized GEMMs
    max-autotune tuned too (minutes on the H200). The step's output is the eager model's."""
    from torch._dynamo.utils import counters

    from gemmtune.benchmodel.models import build_model, parse_model
    from gemmtune.benchmodel.phases import causal_phase
    m = build_model(parse_model("tiny-llama"), torch.float32, "cpu")
    p = causal_phase("decode_b1", m.config.vocab_size, "cpu")
    with torch.no_grad():
        want = p.run(m)
        torch._dynamo.reset()
        counters.clear()
        got = p.run(torch.compile(m, dynamic=False, backend="eager"))
        again = p.run(torch.compile(m, dynamic=False, backend="eager"))  # a new wrapper: its own cache
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(again, want, rtol=1e-5, atol=1e-5)
    torch._dynamo.reset()


def test_a_decode_phase_a_user_model_refuses_is_left_out(tmp_path, monkeypatch):
    """A user's model whose forward fails on the decode phase's KV cache (a Mamba's state in a
    plain DynamicCache: IndexError in transformers) loses that phase only, with the reason; its
    prefill phase still runs. A named model's failure there raises (gemmtune's bug)."""
    from gemmtune.benchmodel.phases import Phase
    bm_run = importlib.import_module("gemmtune.benchmodel.run")
    save_config(tmp_path / "mine")
    real = bm_run.causal_phase

    def phase(name, *a, **kw):
        p = real(name, *a, **kw)
        if not name.startswith("decode"):
            return p

        def refuse(model):
            raise IndexError("list index out of range")
        return Phase(p.name, refuse, refuse, p.state)
    monkeypatch.setattr(bm_run, "causal_phase", phase)
    doc = benchmodel.run([f"config:{tmp_path / 'mine'}"], phases=["decode_b1", "prefill_b8_s128"], modes=["eager"],
                         out_dir=tmp_path / "out", dtype="float32", log=lambda s: None)
    m = doc["models"][0]
    assert "error" not in m, m.get("error")
    why = m["phases_not_run"]["decode_b1"]
    assert why.startswith("the model's forward fails on the decode phase's KV cache (IndexError: list index out of range")
    assert "tests/test_benchmodel.py:" in why
    assert set(m["modes"]["eager"]["phases"]) == {"prefill_b8_s128"}
    with pytest.raises(IndexError):
        benchmodel.run(["tiny-llama"], phases=["decode_b1"], modes=["eager"], out_dir=tmp_path / "out2",
                       dtype="float32", log=lambda s: None)


def test_the_patched_eager_copy_goes_through_the_step_gate(monkeypatch):
    """make_variants(steps=...) gates eager_patch's copy as patch(example_inputs=...) would
    (gemmtune.gate_eager, made here to think it is on a GPU and to see the tuned step as slower),
    records the verdicts, and the report says what was kept."""
    from gemmtune import eager_gate
    from gemmtune.benchmodel.report import markdown

    gated = []  # the copy the gate runs (steps(m) below records it)

    def tuned_paths():
        return sum(p == "tuned" for m in gated[-1].modules() for p in getattr(m, "eager_paths", {}).values())

    def one_more_second_per_tuned_path(fn, reps, sync=None):
        fn()
        return 1.0 + tuned_paths()
    monkeypatch.setattr(eager_gate, "_on_gpu", lambda model: True)
    monkeypatch.setattr(eager_gate, "step_seconds", one_more_second_per_tuned_path)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 24), torch.nn.ReLU(), torch.nn.Linear(24, 8)).half()
    x = torch.randn(3, 16, dtype=torch.float16)
    out = {"modes": {}}

    def tune(problems, **kw):
        return {p.key: "triton_mm:BM16-BN16-BK16-S1-W2-G8" for p in problems}
    v = benchmodel.make_variants(model, ["eager_patch"], lambda m: m(x), out, {"tune_fn": tune, "progress": False},
                                 steps=lambda m: gated.append(m) or {"prefill": lambda: m(x)}, log=lambda s: None)
    assert gated == [v["eager_patch"]]
    gate = out["eager_gate"]
    assert [(g["step"], g["kept"], g["tuned_shapes"], g["kept_shapes"]) for g in gate] == [("prefill", "aten", 2, 0)]
    assert tuned_paths() == 0
    m = {"model": "tiny", "params": 1e3, "tune_s": 1.0, "eager_gate": gate, "eager_gate_s": 0.5,
         "modes": {"eager": {"phases": {"prefill": {"ms": 1.0, "spread": 0.01, "calls": 10}}}}}
    head = {"device": "GPU", "torch": "t", "triton": "t", "gemmtune": "g", "date": "d", "dtype": "bf16", "tune": "fast"}
    md = markdown({"header": head, "models": [m]})
    assert "Step gate (`eager_patch`, `gemmtune.gate_eager`, 0.5 s): prefill: kept **aten** (0 of 2 tuned" in md
