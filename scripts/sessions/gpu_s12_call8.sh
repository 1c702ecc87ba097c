#!/usr/bin/env bash
# Session 12, device call 8 (one GPU; carry .whl): Qwen2-0.5B decode b1: compile + coordinate descent, patch +
# the same, max-autotune (graph modes), which #17's target compares (max-autotune turns cdt on; the
# 2026-11-26 Qwen2 run had only the default-compile modes).
MODELS=qwen2-0.5b PHASES=decode_b1 MODES=compile_cdt_graph,patch_compile_cdt_graph,max_autotune_graph \
  BENCH_S=570 exec bash scripts/gpu_bench_model_one.sh qwen2
