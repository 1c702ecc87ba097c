#!/usr/bin/env bash
# Session 12, device call 9 (one GPU; carry .whl): Qwen2-0.5B decode b1, compile + coordinate descent against
# patch + the same, with each graph's kernels profiled: which layer gives patch its 9.6% in call 8.
MODELS=qwen2-0.5b PHASES=decode_b1 MODES=compile_cdt_graph,patch_compile_cdt_graph PROFILE=1 \
  BENCH_S=570 exec bash scripts/gpu_bench_model_one.sh qwen2
