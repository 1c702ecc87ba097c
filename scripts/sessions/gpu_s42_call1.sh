#!/usr/bin/env bash
# Prepared in session 41 for session 42 (~7 min; GPU only; no carry).
# 1. #17's tuning-time target without the benchmark worker's start-up: bench-model with
#    --in-process-tuning (tune(in_process=True): the candidates timed in the benchmark's own
#    process, which holds the GPU already). Session 41 measured 5.6-5.8 s of each 13.7-13.8 s tune
#    call as the workers' start-up (benchmarks/results/2026-11-30-h200-s41, call 6), for 0.091-0.127x
#    of max-autotune's compile.
# 2. Does a wide-layer strip gain in a PDL chain where alone it ties cuBLAS? Llama-1B's fused
#    gate/up (1 x 16384 x 2048) stayed on cuBLAS in both of session 41's decode steps (the run-off
#    kept it: the BN8 strip timed 17.8 us alone against cuBLAS's 18.4). A chain of 32 pointwise ->
#    GEMM pairs at INTER=16384 (2048 -> 16384 -> 2048), plain and -pdl, against cuBLAS.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
unset GEMMTUNE_GEMV_HANDBACK_MIN_BYTES
for model in qwen2-0.5b llama-1b; do
  timeout 200 python3 -m gemmtune.cli bench-model --models $model --phases decode_b1 --in-process-tuning \
    --modes max_autotune_pdl_graph,fuse_patch_compile_pdl_graph --out $OUT/bm_inproc_$model > $OUT/bm_inproc_$model.log 2>&1
  echo "bench-model --in-process-tuning $model rc=$?"
  grep -E "own tuning|first calls|interleaved" $OUT/bm_inproc_$model/bench-model.md | cut -c1-400
done
for cfg in skinny:BM1-BN8-BK512-SK1-S1-W4-core-det-flat-sum skinny:BM1-BN2-BK1024-SK1-S1-W4-core-det-flat-sum; do
  echo "== INTER=16384 $cfg"
  INTER=16384 timeout 60 python3 scripts/exp_pdl_skinny.py $OUT/wide_chain_$(echo $cfg | tr ':' '_') --config $cfg 2>&1 | tail -6
done
