"""capture and patch on tiny random-weight HF causal LMs of several architectures (CPU, fp32, the
Triton interpreter): capture finds each one's GEMMs, patch converts its nn.Linear / Conv1D layers
onto Triton kernels, and the patched model's logits (a prefill and a decode step on the KV cache)
match eager's. Layers patch cannot convert are left as they were, with the reason."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

tf = pytest.importorskip("transformers")

import gemmtune  # noqa: E402
from gemmtune.modeltune import is_conv1d  # noqa: E402

TRITON = "triton_mm:BM16-BN64-BK64-S1-W4-G8"  # few programs per launch: the interpreter runs each one
TINY = dict(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
            max_position_embeddings=256)
# model_type -> (its config's own names for the tiny sizes, the nn.Linear subclass patch leaves alone)
ARCHS = {
    "llama": (dict(num_key_value_heads=2), None),
    "qwen2": (dict(num_key_value_heads=2), None),
    "mistral": (dict(num_key_value_heads=2), None),
    "phi3": (dict(num_key_value_heads=2, pad_token_id=0), None),
    "gpt_neox": ({}, None),
    "opt": (dict(ffn_dim=128, word_embed_proj_dim=64, pad_token_id=1), None),
    "gpt2": (dict(n_embd=64, n_layer=2, n_head=4, n_positions=256), None),
    # FalconLinear overrides forward (x @ W.T, then + b): patch leaves it, and says so
    "falcon": ({}, "FalconLinear"),
    # no sdpa in transformers' Bloom: bench-model's builder falls back to its default attention
    "bloom": (dict(n_layer=2, n_head=4), None),
    # experts as one grouped GEMM per layer (not tuned): recorded by capture, left alone by patch
    "mixtral": (dict(num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2), None),
}
# The fast lane: a plain Llama-like stack, GPT-2's Conv1D, a layer class left alone, an MoE.
FAST = ("mistral", "gpt2", "falcon", "mixtral")


def tiny(model_type: str):
    kw, _ = ARCHS[model_type]
    cfg = tf.AutoConfig.for_model(model_type, **{**TINY, **kw})
    torch.manual_seed(0)
    attn = "sdpa" if model_type != "bloom" else "eager"
    return tf.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation=attn).eval()


def all_triton(problems, **kw):
    return {p.key: TRITON for p in problems}


def prefill_then_step(model, ids, step):
    """Logits of a prefill of ``ids`` and of one decode step of ``step`` on its KV cache."""
    cache = tf.DynamicCache()
    pre = model(input_ids=ids, past_key_values=cache, use_cache=True).logits
    return pre, model(input_ids=step, past_key_values=cache, use_cache=True).logits


def patchable(model) -> int:
    return sum(type(m) is torch.nn.Linear or is_conv1d(m) for m in model.modules())


@pytest.mark.parametrize("model_type", [pytest.param(a, marks=() if a in FAST else pytest.mark.slow) for a in ARCHS])
def test_capture_and_patch_match_eager(model_type):
    model = tiny(model_type)
    ids, step = torch.randint(0, 512, (2, 8)), torch.randint(0, 512, (2, 1))
    with torch.no_grad():
        want = prefill_then_step(model, ids, step)

    cap = gemmtune.capture(model, fn=lambda: prefill_then_step(model, ids, step))
    layers = model.config.num_hidden_layers
    # Every layer's projections ran as GEMMs, at the prefill's M (2 x 8) and the step's (2).
    assert sum(r.count for r in cap.records if r.tunable) >= 2 * (3 * layers + 1), cap.summary()
    assert {r.m for r in cap.records if r.op != "bmm"} >= {16, 2}
    assert any("lm_head" in r.modules for r in cap.records)

    patched = copy.deepcopy(model)
    n_layers = patchable(patched)
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = gemmtune.tune_model(patched, fn=lambda: prefill_then_step(patched, ids, step), tune_fn=all_triton)
        gemmtune.patch(patched, dispatchers=ds)
    converted = [m for m in patched.modules() if hasattr(m, "_gemmtune_handle")]
    assert len(converted) == n_layers >= 1  # every nn.Linear / Conv1D, on a Triton kernel
    assert all(d.hint_choices[0].choice.id == TRITON for d in ds.values())
    with torch.no_grad():
        got = prefill_then_step(patched, ids, step)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)

    left = ARCHS[model_type][1]
    messages = [str(w.message) for w in caught]
    if left:
        assert any(left in m and "forward of their own" in m for m in messages), messages
        assert any(type(m).__name__ == left for m in patched.modules())  # still its own class
    else:
        assert not any("left" in m for m in messages), messages
    if model_type == "mixtral":  # the experts' grouped GEMMs: seen, not tuned
        assert "not tuned yet" in cap.summary() and "grouped_mm" in cap.summary()
        grouped = [r for r in cap.records if r.op == "grouped_mm"]
        assert grouped and not any(r.tunable for r in grouped)
        assert {r.batch for r in grouped} == {4}  # one group per expert


def test_a_linear_subclass_that_keeps_torchs_forward_is_left_silently():
    """MultiheadAttention's out_proj (a Linear subclass with torch's forward, used through its
    weight) stays as it is without a warning: only a forward of a subclass's own is worth one."""
    model = torch.nn.Sequential(torch.nn.Linear(16, 16))
    model.append(torch.nn.modules.linear.NonDynamicallyQuantizableLinear(16, 16))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gemmtune.patch(model, example_inputs=[(torch.randn(3, 16),)], tune_fn=all_triton)
    assert type(model[0]) is gemmtune.nn.Linear
    assert type(model[1]) is torch.nn.modules.linear.NonDynamicallyQuantizableLinear
