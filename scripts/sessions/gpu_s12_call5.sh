#!/usr/bin/env bash
# Session 12, device call 5 (one GPU; carry .whl): GPT-2 prefill 1x512 in the three CUDA-graph modes that
# #17's target compares (call 1's 300 s limit cut max-autotune's prefill compile).
MODELS=gpt2 PHASES=prefill_b1_s512 MODES=compile_graph,patch_compile_graph,max_autotune_graph \
  BENCH_S=540 exec bash scripts/gpu_bench_model_one.sh gpt2
