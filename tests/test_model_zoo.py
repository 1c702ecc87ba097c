"""A zoo of tiny random-weight HF architectures (CPU, fp32, the Triton interpreter) run the way a
user serves one: ``fuse_linears`` on an example prompt, ``patch`` with a lookup table whose
entries name a Triton kernel, then ``generate``. Greedy tokens and every step's logits must be
eager's, and every call of every converted layer must reach a Triton launch of its own shape (a
table key that missed, or a layer served by torch's path, fails the test).

tests/test_hf_archs.py checks one prefill and one decode step per architecture, through
``tune_model``'s dispatchers, and runs most of its architectures in the slow lane only. This file
covers other ground in the fast lane: several decode steps through transformers' own generation
loop (its attention mask, positions and cache growth), the ``patch(model, table)`` path, and a
launch count instead of the dispatchers' hint choices."""

from __future__ import annotations

import collections
import copy
import warnings

import pytest
import torch

tf = pytest.importorskip("transformers")

import gemmtune  # noqa: E402
from gemmtune import kernels  # noqa: E402
from gemmtune.configs import Choice  # noqa: E402
from gemmtune.problem import Problem  # noqa: E402
from gemmtune.provenance import Provenance  # noqa: E402
from gemmtune.table import LookupTable, TableChoice  # noqa: E402

# The models run on CPU tensors, where a Triton kernel runs only in the interpreter (conftest turns
# it on without a GPU): on a GPU machine without TRITON_INTERPRET=1 every choice would be cuBLAS.
pytestmark = pytest.mark.skipif(not gemmtune.interpreter_enabled(), reason="needs the Triton interpreter (CPU tensors)")

TRITON = "triton_mm:BM16-BN64-BK64-S1-W4-G8"  # few programs per launch: the interpreter runs each one
BATCH, PROMPT, NEW = 2, 6, 4
VOCAB = 256
TINY = dict(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
            max_position_embeddings=128)
QKV, GATE_UP = "q_proj+k_proj+v_proj", "gate_proj+up_proj"
# model_type -> (its config's own names for the tiny sizes, the groups fuse_linears makes (kinds:
# members' last name parts -> number of groups), the layers patch converts). Two layers each is
# 4 GEMMs a layer (fused ones counted once) and lm_head: 9.
CAUSAL = {
    # qkv_proj and gate_up_proj are one Linear each already: nothing left to fuse. (Its default
    # eos_token_id, 32000, lies outside the tiny vocabulary.)
    "phi3": (dict(num_key_value_heads=2, pad_token_id=0, bos_token_id=1, eos_token_id=2), {}, 9),
    # soft-capped eager attention, sliding-window layers, tied embeddings
    "gemma2": (dict(num_key_value_heads=2, head_dim=16), {QKV: 2, GATE_UP: 2}, 9),
    # q_norm / k_norm on the fused output's slices
    "qwen3": (dict(num_key_value_heads=2, head_dim=16), {QKV: 2, GATE_UP: 2}, 9),
    # query_key_value one Linear already; parallel residual, partial rotary
    "gpt_neox": ({}, {}, 9),
    # biases on every layer (fused into the kernel's epilogue), fc1 / fc2, learned positions
    "opt": (dict(ffn_dim=128, word_embed_proj_dim=64, pad_token_id=1), {QKV: 2}, 9),
    # FalconLinear overrides forward: patch leaves its 8 layers as they are (and says so), lm_head only
    "falcon": ({}, {}, 1),
    # the experts are one grouped GEMM (not patched); the router is Linear(64, 4)
    "mixtral": (dict(num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2), {QKV: 2}, 5),
    # the shared expert's one-output gate fuses with its gate / up projections
    "qwen2_moe": (dict(num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                       shared_expert_intermediate_size=64), {QKV: 2, GATE_UP + "+shared_expert_gate": 2}, 9),
    # LayerNorm, partial rotary
    "stablelm": (dict(num_key_value_heads=2), {QKV: 2, GATE_UP: 2}, 9),
}


def config(model_type: str, **kw):
    try:
        return tf.AutoConfig.for_model(model_type, **kw)
    except ValueError as e:  # an architecture this transformers does not have
        pytest.skip(f"transformers {tf.__version__} has no {model_type!r}: {e}")


def tiny_causal(model_type: str, **over):
    """The tiny causal LM of ``model_type`` (``over``: config values that replace the tiny ones)."""
    cfg = config(model_type, **{**TINY, **CAUSAL[model_type][0], **over})
    torch.manual_seed(0)
    return tf.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()


def triton_table(model: torch.nn.Module, ms) -> LookupTable:
    """A lookup table, as ``gemmtune tune --out`` writes one, naming TRITON for every nn.Linear
    shape of ``model`` at each M of ``ms``, made on this machine (no provenance warning)."""
    shapes = {tuple(m.weight.shape) for m in model.modules() if type(m) is torch.nn.Linear}
    return LookupTable(Provenance.current("by-hand").to_dict(),
                       {Problem.from_sizes(m, n, k, "fp32", layout_b="col").key: [TableChoice(Choice.parse(TRITON))]
                        for n, k in shapes for m in ms})


def patch_with(model: torch.nn.Module, table: LookupTable) -> list[str]:
    """``patch(model, table)``, the hint kernels cuBLAS: only the table's exact entries name a
    Triton kernel, so a call whose shape misses them runs torch.mm (and fails the launch check).
    No tuning runs (tune_fn answers at once). Returns the warnings patch gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gemmtune.patch(model, table, hints={"m": [1]}, tune_fn=lambda ps, **kw: {p.key: "aten" for p in ps})
    return [str(w.message) for w in caught]


def converted(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [m for m in model.modules() if hasattr(m, "_gemmtune_handle")]


@pytest.fixture
def launches(monkeypatch):
    """(M, N, K) of every triton_mm launch from now on. Set before the first call of a shape: a
    dispatcher binds the family's run into that shape's launch closure."""
    seen = []
    fam = kernels.get("triton_mm")
    run = fam.run

    def counting(a, b, out, cfg, **kw):
        seen.append((a.shape[0], out.shape[1], a.shape[1]))
        return run(a, b, out, cfg, **kw)
    monkeypatch.setattr(fam, "run", counting)
    return seen


def layer_calls(model: torch.nn.Module) -> tuple[list, list]:
    """(calls, hook handles): (M, N, K) of every call of a converted layer of ``model``."""
    calls = []

    def hook(mod, args, out):
        calls.append((args[0].shape[:-1].numel(), *mod.weight.shape))
    return calls, [m.register_forward_hook(hook) for m in converted(model)]


def assert_all_launched(calls, launched) -> None:
    """Every layer call met a Triton launch of its shape (the extra launches are the first-sight
    checks, one per shape and dispatcher, on random inputs)."""
    assert calls
    missing = collections.Counter(calls) - collections.Counter(launched)
    assert not missing, f"layer calls that ran no Triton kernel (M, N, K): {dict(missing)}"


def greedy(model, ids):
    return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW, min_new_tokens=NEW,
                          do_sample=False, output_logits=True, return_dict_in_generate=True, pad_token_id=0)


def assert_same_generation(got, want) -> None:
    assert got.sequences.shape == (BATCH, PROMPT + NEW)
    assert torch.equal(got.sequences, want.sequences)
    assert len(got.logits) == len(want.logits) == NEW
    for step, (g, w) in enumerate(zip(got.logits, want.logits)):
        rel = ((g - w).abs().max() / w.abs().max()).item()
        assert rel < 1e-4, (step, rel)


@pytest.mark.parametrize("model_type", list(CAUSAL))
def test_fused_table_patched_model_generates_eagers_tokens(model_type, launches):
    model = tiny_causal(model_type)
    ids = torch.randint(0, VOCAB, (BATCH, PROMPT))
    with torch.no_grad():
        want = greedy(model, ids)
        fused = copy.deepcopy(model)
        groups = gemmtune.fuse_linears(fused, ids)
        assert gemmtune.fuse.kinds(g.members for g in groups) == CAUSAL[model_type][1]
        # the prefill's M, then one token a sequence per decode step
        said = patch_with(fused, triton_table(fused, (BATCH * PROMPT, BATCH)))
        layers = converted(fused)
        assert len(layers) == CAUSAL[model_type][2]
        if model_type == "falcon":
            assert len(said) == 1 and "FalconLinear x8" in said[0], said
        else:
            assert not said, said
        calls, hooks = layer_calls(fused)
        got = greedy(fused, ids)
    for h in hooks:
        h.remove()
    assert_same_generation(got, want)
    assert len(calls) == NEW * len(layers)  # every converted layer, once per forward
    assert_all_launched(calls, launches)


def test_encoder_with_padding_fused_table_patched_matches_eager(launches):
    """RoBERTa on a padded batch: query/key/value fuse, every layer (the pooler's too, at M =
    batch) runs its Triton kernel, and the outputs are eager's."""
    cfg = config("roberta", **{**TINY, "max_position_embeddings": 64, "pad_token_id": 1})
    torch.manual_seed(0)
    model = tf.AutoModel.from_config(cfg, dtype=torch.float32).eval()
    ids = torch.randint(2, VOCAB, (BATCH, PROMPT))
    mask = torch.ones_like(ids)
    ids[1, -2:], mask[1, -2:] = cfg.pad_token_id, 0  # the second sequence two tokens shorter
    x = dict(input_ids=ids, attention_mask=mask)
    with torch.no_grad():
        want = model(**x)
        fused = copy.deepcopy(model)
        groups = gemmtune.fuse_linears(fused, inputs=[x])
        assert gemmtune.fuse.kinds(g.members for g in groups) == {"query+key+value": 2}
        assert not patch_with(fused, triton_table(fused, (BATCH * PROMPT, BATCH)))
        assert len(converted(fused)) == 2 * 4 + 1  # fused q/k/v, attention output, intermediate, output; pooler
        calls, hooks = layer_calls(fused)
        got = fused(**x)
    for h in hooks:
        h.remove()
    for name in ("last_hidden_state", "pooler_output"):
        torch.testing.assert_close(got[name], want[name], rtol=1e-4, atol=1e-5)
    assert (BATCH, 64, 64) in calls  # the pooler, on each sequence's first token
    assert_all_launched(calls, launches)


def test_table_patched_model_generates_under_torch_compile(launches):
    """GPT-NeoX (nothing to fuse, so every GEMM is a converted layer in the graph), its forward
    under ``torch.compile(dynamic=True)`` with aot_eager (dynamo and AOTAutograd trace
    gemmtune's op; no Inductor C++ build), through generate: eager's tokens and logits, and the
    compiled steps launch the Triton kernel of every layer call the eager patched run made. One
    decoder layer (dynamo traces each layer anew): its 4 GEMMs and lm_head are the same kinds of call."""
    model = tiny_causal("gpt_neox", num_hidden_layers=1)
    ids = torch.randint(0, VOCAB, (BATCH, PROMPT))
    with torch.no_grad():
        want = greedy(model, ids)
        patched = copy.deepcopy(model)
        assert not patch_with(patched, triton_table(patched, (BATCH * PROMPT, BATCH)))
        calls, hooks = layer_calls(patched)
        greedy(patched, ids)  # eager: decides (and checks) each shape's kernel, and counts the calls
        for h in hooks:
            h.remove()
        torch._dynamo.reset()
        patched.forward = torch.compile(patched.forward, backend="aot_eager", dynamic=True)
        launches.clear()
        got = greedy(patched, ids)
    torch._dynamo.reset()
    assert_same_generation(got, want)
    assert len(calls) == NEW * 5  # 4 GEMMs in the one layer, and lm_head
    # the same launches as the eager calls, no more: nothing is decided anew under compile
    assert collections.Counter(launches) == collections.Counter(calls)
