"""bench-model on the CPU with tiny configs: every phase kind, the patched mode with one tuning
call, the checks (logits vs fp32, greedy tokens vs eager) and the report."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers")

from gemmtune import benchmodel  # noqa: E402


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
    # Every hint chose cuBLAS: patch left every layer as torch's own, none has an eager path table.
    assert patched["eager_paths"]["counts"] == {} and patched["eager_paths"]["left_as_torch"] >= 3
    md = (tmp_path / "bench-model.md").read_text()
    assert "interleaved" in md
    assert (tmp_path / "bench-model.png").read_bytes()[:4] == b"\x89PNG"
    assert f"## {model}" in md and "| decode_b1 |" in md and "greedy 32 tokens identical to eager" in md
    assert json.loads((tmp_path / "bench-model.json").read_text())["models"][0]["model"] == model


def test_time_interleaved_rotates_and_times_each():
    order = []
    t = benchmodel.time_interleaved({"a": lambda: order.append("a"), "b": lambda: order.append("b")},
                                    rounds=4, min_round_ms=0.001, warmup=0)
    assert set(t) == {"a", "b"} and all(v["ms"] >= 0 and v["calls"] >= 4 for v in t.values())
    assert order.count("a") == order.count("b")


def test_decode_phase_times_the_same_step_every_call():
    model = benchmodel.build_causal("tiny-llama", torch.float32, "cpu")
    ph = benchmodel.causal_phase("decode_b1", model.config.vocab_size, "cpu")
    with torch.no_grad():
        a, b = ph.run(model), ph.run(model)
    torch.testing.assert_close(a, b)  # the cache is cropped back after each step


def test_unknown_names_and_missing_minilm_are_clear(tmp_path):
    with pytest.raises(ValueError, match="unknown mode"):
        benchmodel.run(["tiny-gpt2"], modes=["fastest"], out_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown phase"):
        benchmodel.run(["tiny-gpt2"], phases=["prefill_b99"], out_dir=tmp_path)
    doc = benchmodel.run(["minilm"], modes=["eager"], out_dir=tmp_path, minilm_folder=str(tmp_path / "nowhere"),
                         log=lambda s: None)
    assert "error" in doc["models"][0]  # reported, the run goes on
    assert "Not run:" in (tmp_path / "bench-model.md").read_text()
