"""capture and patch on tiny random-weight HF models of several architectures (CPU, fp32, the
Triton interpreter): capture finds each one's GEMMs, patch converts its nn.Linear / Conv1D layers
onto Triton kernels, and the patched model's outputs match eager's: a causal LM's logits on a
prefill and a decode step on the KV cache; an encoder's, an encoder-decoder's or a vision model's
outputs on two example inputs given by keyword. Layers patch cannot convert are left as they were,
with the reason; a saved patched model loads into a fresh instance."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

tf = pytest.importorskip("transformers")

import gemmtune  # noqa: E402
from gemmtune.capture import cache_kwarg, new_cache  # noqa: E402
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
    "gemma": (dict(num_key_value_heads=2, head_dim=16), None),
    # no sdpa in transformers' Gemma2 (its soft-capped attention): eager, whose q @ k.T capture sees as bmm
    "gemma2": (dict(num_key_value_heads=2, head_dim=16), None),
    "gemma3_text": (dict(num_key_value_heads=2, head_dim=16), None),
    "qwen3": (dict(num_key_value_heads=2, head_dim=16), None),
    # beside the experts, a shared expert and its gate, Linear(64, 1): a B of one column, which
    # capture names 'row' and the layer key 'col' (tune_model matches either)
    "qwen2_moe": (dict(num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                       shared_expert_intermediate_size=64), None),
    "qwen3_moe": (dict(num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                       head_dim=16), None),
    "olmo2": (dict(num_key_value_heads=2), None),
    "starcoder2": (dict(num_key_value_heads=2), None),
    "phi": ({}, None),
    "granite": (dict(num_key_value_heads=2), None),
    "stablelm": (dict(num_key_value_heads=2), None),
    "cohere": (dict(num_key_value_heads=2), None),
    "gptj": (dict(n_embd=64, n_layer=2, n_head=4, n_positions=256, rotary_dim=8), None),
    "codegen": (dict(n_embd=64, n_layer=2, n_head=4, n_positions=256, n_ctx=256, rotary_dim=8), None),
    # MLA (low-rank q and kv projections), a dense first layer, then routed and shared experts
    "deepseek_v3": (dict(num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                         n_shared_experts=1, first_k_dense_replace=1, q_lora_rank=32, kv_lora_rank=16,
                         qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, n_group=1, topk_group=1), None),
    # no attention; frozen (see FROZEN), its out_proj takes a transposed activation
    "mamba": (dict(state_size=8, expand=2, conv_kernel=4, time_step_rank=8), None),
}
# The fast lane: a plain Llama-like stack, GPT-2's Conv1D, a layer class left alone, an MoE, an MoE
# with a one-output gate.
FAST = ("mistral", "gpt2", "falcon", "mixtral", "qwen2_moe")
EAGER_ATTN = ("bloom", "gemma2", "mamba")  # no sdpa in transformers for these
# Weights that need no gradient, as in inference code (requires_grad_(False)): F.linear then runs a
# 3-D input that cannot be viewed as 2-D (Mamba's out_proj(scan_output.transpose(1, 2))) as a bmm
# against the weight broadcast over the batch, which capture must still count as the layer's GEMM.
FROZEN = ("mamba",)
# Linear layers whose forward never runs (their weight multiplied directly): no GEMM of their own,
# so no dispatcher; patch leaves them and names them (Mamba's mixer computes dt_proj.weight @ dt.T).
UNRUN = {"mamba": "dt_proj"}


def tiny(model_type: str, **over):
    """The tiny model of ``model_type`` (``over``: config values that replace the tiny ones)."""
    kw, _ = ARCHS[model_type]
    cfg = tf.AutoConfig.for_model(model_type, **{**TINY, **kw, **over})
    torch.manual_seed(0)
    attn = "eager" if model_type in EAGER_ATTN else "sdpa"
    try:
        model = tf.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation=attn).eval()
    except ValueError as e:  # GPT-J got sdpa after transformers 5.17 (the GPU machine's version)
        if "scaled_dot_product_attention" not in str(e):
            raise
        model = tf.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="eager").eval()
    return model.requires_grad_(False) if model_type in FROZEN else model


def all_triton(problems, **kw):
    return {p.key: TRITON for p in problems}


def prefill_then_step(model, ids, step):
    """Logits of a prefill of ``ids`` and of one decode step of ``step`` on its KV cache."""
    # `cache` from transformers 5.2x (past_key_values before), built from the config as generate
    # does (a bare DynamicCache has no state-space layers: Mamba's forward then raises)
    cache = {cache_kwarg(model): new_cache(model)}
    pre = model(input_ids=ids, use_cache=True, **cache).logits
    return pre, model(input_ids=step, use_cache=True, **cache).logits


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
        gemmtune.patch(patched, dispatchers=ds, tune_missing=False)  # nothing tuned beyond tune_model's call
    converted = [m for m in patched.modules() if hasattr(m, "_gemmtune_handle")]
    unrun = [name for name, m in patched.named_modules() if name.endswith("." + UNRUN.get(model_type, "-"))]
    assert len(converted) == n_layers - len(unrun) >= 1  # every nn.Linear / Conv1D, on a Triton kernel
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
    elif unrun:
        (left_msg,) = [m for m in messages if "left" in m]
        head = f"gemmtune.patch: {len(unrun)} layer(s) had no dispatcher given, left as they were: "
        assert left_msg.startswith(head), left_msg
        named = [part.split(" (N=")[0] for part in left_msg[len(head):].split("), ")]
        assert named == unrun and "K=" in left_msg, left_msg  # each with the shape it was looked up by
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


# ---------------------------------------------------------------- encoders, encoder-decoders, vision
def ids(*shape):
    return torch.randint(0, 512, shape)


ENC = dict(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
           max_position_embeddings=64)
SEQ2SEQ = dict(vocab_size=512, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
               decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128)
VIT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=32, patch_size=8)
# model_type -> (config, two example inputs by keyword, the M of the layers' GEMMs each one runs)
OTHERS = {
    "bert": (ENC, lambda: [dict(input_ids=ids(2, 8)), dict(input_ids=ids(1, 5))], {16, 5}),
    "roberta": ({**ENC, "pad_token_id": 1}, lambda: [dict(input_ids=ids(2, 8) % 500 + 2), dict(input_ids=ids(1, 5) % 500 + 2)], {16, 5}),
    "distilbert": (dict(vocab_size=512, dim=64, n_layers=2, n_heads=4, hidden_dim=128, max_position_embeddings=64),
                   lambda: [dict(input_ids=ids(2, 8)), dict(input_ids=ids(1, 5))], {16, 5}),
    # encoder M = 2 x 8, decoder M = 2 x 3; then 1 x 5 and 1 x 1
    "t5": (dict(vocab_size=512, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4),
           lambda: [dict(input_ids=ids(2, 8), decoder_input_ids=ids(2, 3)),
                    dict(input_ids=ids(1, 5), decoder_input_ids=ids(1, 1))], {16, 6, 5, 1}),
    "bart": ({**SEQ2SEQ, "max_position_embeddings": 64},
             lambda: [dict(input_ids=ids(2, 8), decoder_input_ids=ids(2, 3)),
                      dict(input_ids=ids(1, 5), decoder_input_ids=ids(1, 1))], {16, 6, 5, 1}),
    # 16 patches and CLS: M = 2 x 17, 1 x 17
    "vit": (VIT, lambda: [dict(pixel_values=torch.randn(2, 3, 32, 32)), dict(pixel_values=torch.randn(1, 3, 32, 32))],
            {34, 17}),
    # 32 mel frames, halved by the stride-2 conv: encoder M = 2 x 16
    "whisper": ({**SEQ2SEQ, "num_mel_bins": 16, "max_source_positions": 16, "max_target_positions": 32,
                 "decoder_start_token_id": 1, "pad_token_id": 0},
                lambda: [dict(input_features=torch.randn(2, 16, 32), decoder_input_ids=ids(2, 3)),
                         dict(input_features=torch.randn(1, 16, 32), decoder_input_ids=ids(1, 1))], {32, 6, 16, 1}),
    "clip": (dict(text_config={**ENC, "max_position_embeddings": 32}, vision_config=VIT, projection_dim=32),
             lambda: [dict(input_ids=ids(2, 8), pixel_values=torch.randn(2, 3, 32, 32)),
                      dict(input_ids=ids(1, 5), pixel_values=torch.randn(1, 3, 32, 32))], {16, 34, 5, 17}),
}
# GEMMs of a model's own forward, not of a layer: CLIP's logits_per_text (text @ image.t()) at each batch.
OUTSIDE = {"clip": "mm 2x2x32 float32 in the model's own forward; mm 1x1x32 float32 in the model's own forward"}
FAST_OTHERS = ("t5",)  # an encoder-decoder: two inputs by keyword, two stacks of layers


def tiny_other(model_type: str, **over):
    """The tiny model of ``model_type`` and its example inputs (``over``: config values that replace
    the tiny ones)."""
    cfg, inputs, _ = OTHERS[model_type]
    torch.manual_seed(0)
    model = tf.AutoModel.from_config(tf.AutoConfig.for_model(model_type, **{**cfg, **over}),
                                     dtype=torch.float32).eval()
    return model, inputs()


def outputs(model, inputs) -> list[torch.Tensor]:
    """Every floating-point tensor ``model(**x)`` returns, for each example input."""
    return [v for x in inputs for v in model(**x).values() if isinstance(v, torch.Tensor) and v.is_floating_point()]


@pytest.mark.parametrize("model_type", [pytest.param(a, marks=() if a in FAST_OTHERS else pytest.mark.slow)
                                        for a in OTHERS])
def test_encoders_and_encoder_decoders_patch_and_match_eager(model_type):
    """Models that are not causal LMs, their inputs given by keyword (dicts in ``example_inputs``):
    capture finds every layer's GEMM at the M each input runs, and ``patch(example_inputs=...)``
    converts every nn.Linear in one tuning call, with eager's outputs."""
    model, inputs = tiny_other(model_type)
    with torch.no_grad():
        want = outputs(model, inputs)
    cap = gemmtune.capture(model, inputs=inputs)
    assert {r.m for r in cap.records} >= OTHERS[model_type][2], cap.summary()
    assert all(r.tunable for r in cap.records), cap.summary()

    patched = copy.deepcopy(model)
    n_layers = patchable(patched)
    calls = []
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gemmtune.patch(patched, example_inputs=inputs, tune_fn=lambda ps, **kw: calls.append(ps) or all_triton(ps))
        got = outputs(patched, inputs)
    # Nothing left, nothing tuned outside the one call; only CLIP's text-image similarity (a product
    # of two embeddings in the model's own forward) is named as staying torch's.
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    outside = OUTSIDE.get(model_type)
    assert said == ([f"gemmtune: 2 GEMM shape(s) ran outside the nn.Linear / Conv1D layers patch converts, so they "
                     f"stay torch's: {outside}. gemmtune.tune or compile_mm serves them directly"] if outside else []), said
    assert len(calls) == 1
    assert sum(hasattr(m, "_gemmtune_handle") for m in patched.modules()) == n_layers >= 12
    assert len(got) == len(want) >= 2
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("model_type", ["t5", pytest.param("qwen2_moe", marks=pytest.mark.slow)])
def test_a_saved_patched_model_loads_into_a_fresh_instance(model_type, tmp_path):
    """save_patched, then load_patched into a new instance of the same architecture: every layer
    converted again from the artifact (no tuning), the outputs eager's. T5 (an encoder-decoder),
    and Qwen2-MoE, whose one-output shared-expert gate must be in the artifact too."""
    if model_type in OTHERS:
        model, inputs = tiny_other(model_type)
        run = lambda m: outputs(m, inputs)  # noqa: E731
    else:
        model = tiny(model_type)
        ids_, step = torch.randint(0, 512, (2, 8)), torch.randint(0, 512, (2, 1))
        inputs = [(ids_,), (step,)]
        run = lambda m: [m(x).logits for (x,) in inputs]  # noqa: E731
    fresh = copy.deepcopy(model)
    with torch.no_grad():
        want = run(model)
        gemmtune.patch(model, example_inputs=inputs, tune_fn=all_triton)
    path = gemmtune.save_patched(tmp_path / "model.json", gemmtune.nn.dispatchers(model, with_layout=True))

    n_layers = patchable(fresh)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # every layer found its dispatcher in the artifact
        gemmtune.load_patched(fresh, path)
    loaded = [m for m in fresh.modules() if hasattr(m, "_gemmtune_handle")]
    assert len(loaded) == n_layers and all(m.dispatcher.hint_choices[0].choice.id == TRITON for m in loaded)
    with torch.no_grad():
        got = run(fresh)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)


# What fuse_linears finds in each architecture (kinds: the members' last name parts, per group
# kind, the number of groups): siblings that read one input, of one in_features, all with a bias
# or none. Phi's fc1 reads the attention's input (a parallel block); Cohere's MLP too; Whisper's
# k_proj has no bias (q and v fuse without it); cross-attention k / v of every decoder layer read
# the encoder's output, one group across the layers.
FUSED = {
    "llama": {"q_proj+k_proj+v_proj": 2, "gate_proj+up_proj": 2},
    "gpt2": {},  # Conv1D, c_attn already one GEMM
    "falcon": {},  # query_key_value already one GEMM
    "mixtral": {"q_proj+k_proj+v_proj": 2},  # the experts are a grouped GEMM
    "qwen2_moe": {"q_proj+k_proj+v_proj": 2, "gate_proj+up_proj+shared_expert_gate": 2},
    "phi": {"q_proj+k_proj+v_proj+fc1": 2},
    "cohere": {"q_proj+k_proj+v_proj+gate_proj+up_proj": 2},
    "deepseek_v3": {"q_a_proj+kv_a_proj_with_mqa": 2, "gate_proj+up_proj": 2},
    "t5": {"q+k+v": 4, "k+v+k+v": 1},
    "whisper": {"q_proj+v_proj": 4, "k_proj+k_proj": 1, "v_proj+v_proj": 1},
}
FAST_FUSED = ("llama", "gpt2", "phi", "cohere", "deepseek_v3", "t5")


@pytest.mark.parametrize("model_type", [pytest.param(a, marks=() if a in FAST_FUSED else pytest.mark.slow)
                                        for a in FUSED])
def test_fused_then_patched_models_match_eager(model_type):
    """fuse_linears then patch, on each architecture: the groups found are the expected ones, the
    fused model's outputs are eager's (a prefill and a decode step on the KV cache for a causal LM;
    keyword inputs for the others), every group runs its one GEMM once per pass (its members
    served from it, not falling back to their own), and so does the patched fused model."""
    if model_type in OTHERS:
        model, inputs = tiny_other(model_type)
        passes = [lambda m, x=x: [v for v in m(**x).values() if isinstance(v, torch.Tensor) and v.is_floating_point()]
                  for x in inputs]
        fuse_kw = dict(inputs=inputs)
    else:
        model = tiny(model_type)
        ids, step = torch.randint(0, 512, (2, 8)), torch.randint(0, 512, (2, 1))
        cache = {}

        def prefill(m):
            cache[id(m)] = new_cache(m)
            return [m(input_ids=ids, use_cache=True, **{cache_kwarg(m): cache[id(m)]}).logits]

        def decode(m):
            return [m(input_ids=step, use_cache=True, **{cache_kwarg(m): cache[id(m)]}).logits]
        passes = [prefill, decode]
        fuse_kw = dict(fn=lambda: [p(fused) for p in passes])
    with torch.no_grad():
        want = [p(model) for p in passes]
        fused = copy.deepcopy(model)
        groups = gemmtune.fuse_linears(fused, **fuse_kw)
        assert gemmtune.fuse.kinds(g.members for g in groups) == FUSED[model_type]
        mods = dict(fused.named_modules())
        for stage in ("fused", "patched"):
            if stage == "patched":
                if model_type in OTHERS:
                    gemmtune.patch(fused, example_inputs=inputs, tune_fn=all_triton)
                else:
                    ds = gemmtune.tune_model(fused, fn=lambda: [p(fused) for p in passes], tune_fn=all_triton)
                    gemmtune.patch(fused, dispatchers=ds, tune_missing=False)
                assert all(hasattr(mods[g.fused], "_gemmtune_handle") for g in groups)
            seen = []
            handles = [mods[g.fused].register_forward_hook(lambda m, a, o: seen.append(m)) for g in groups]
            for p, w in zip(passes, want):
                seen.clear()
                got = p(fused)
                assert len(got) == len(w) >= 1
                for g_, w_ in zip(got, w):
                    torch.testing.assert_close(g_, w_, rtol=1e-4, atol=1e-4)
                if model_type not in OTHERS:  # every group's one GEMM ran once, its members served from it
                    assert len(seen) == len(groups), (stage, len(seen), len(groups))
            for h in handles:
                h.remove()


COMPILED = ("llama", "phi", "deepseek_v3", "gpt2")  # (Mamba and Qwen2-MoE passed too: 25 s more of CI)
# One decoder layer holds all of an architecture's distinctive code; dynamo traces each layer anew
# (a second layer cost ~3.5 s a model). DeepSeek-V3 keeps two: its first layer is dense
# (first_k_dense_replace=1), its second the routed and shared experts (2 routed, both taken by
# every token at top-2: the routed path traced and run with half the expert calls of 4).
COMPILED_LAYERS = {"llama": dict(num_hidden_layers=1), "phi": dict(num_hidden_layers=1), "gpt2": dict(n_layer=1, num_hidden_layers=1),
                   "deepseek_v3": dict(n_routed_experts=2)}
FAST_COMPILED = ("llama", "gpt2")


@pytest.mark.parametrize("model_type", [pytest.param(a, marks=() if a in FAST_COMPILED else pytest.mark.slow)
                                        for a in COMPILED])
def test_fused_patched_models_trace_under_torch_compile_dynamic(model_type):
    """A fused + patched model of each architecture under ``torch.compile(dynamic=True)`` (the
    aot_eager backend: dynamo and AOTAutograd trace it, the CPU runs it without Inductor's C++
    build): a prefill and a decode step match eager, and the traced graphs hold gemmtune's ops
    (the patched layers were not traced as torch's own). A sweep of all 37 tiny architectures
    passed the same check (2026-11-29)."""
    model = tiny(model_type, **COMPILED_LAYERS[model_type])
    assert model.config.num_hidden_layers == (2 if model_type == "deepseek_v3" else 1)
    ids, step = torch.randint(0, 512, (2, 8)), torch.randint(0, 512, (2, 1))
    codes = []

    def recording(gm, example_inputs):
        codes.append(gm.code)
        return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)

    with torch.no_grad():
        want = prefill_then_step(model, ids, step)
        f = copy.deepcopy(model)
        gemmtune.fuse_linears(f, fn=lambda: prefill_then_step(f, ids, step))
        ds = gemmtune.tune_model(f, fn=lambda: prefill_then_step(f, ids, step), tune_fn=all_triton)
        gemmtune.patch(f, dispatchers=ds, tune_missing=False)
        torch._dynamo.reset()
        got = prefill_then_step(torch.compile(f, backend=recording, dynamic=True), ids, step)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
    assert codes and any("gemmtune" in c for c in codes)
