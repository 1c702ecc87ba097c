#!/usr/bin/env bash
# Device call 1 of session 8 (2026-11-25): Llama-3.2-1B decode b1 under CUDA graphs, the compiled
# modes side by side (default compile, + coordinate-descent tuning, patched twins, max-autotune)
# with each graph's kernels profiled (bench-model --profile), to find where max-autotune's ~10%
# over patch + compile comes from. First the GPU tests of graphs and the profile. Carry .whl.
set -u
export TEST_S=${TEST_S:-120} PROFILE=1
MODES=${MODES:-compile_graph,compile_cdt_graph,patch_compile_graph,patch_compile_cdt_graph,max_autotune_graph} \
  LLAMA_S=${LLAMA_S:-480} bash scripts/sessions/gpu_s6_call2.sh
grep -E "profile|interleaved" $OUT/bm/bench-model.log | tail -20
