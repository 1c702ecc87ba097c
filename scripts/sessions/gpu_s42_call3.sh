#!/usr/bin/env bash
# Session 42, call 3 (~8 min; GPU only; no carry). gemmtune's bytecode cache (gemmtune_entry.bytecode)
# on the H200 machine, whose Python runs with PYTHONDONTWRITEBYTECODE=1 and a torch without .pyc files.
# 1. A cold one-shape `gemmtune tune --fast` (the entry point, an empty Triton cache each) with the
#    cache off (GEMMTUNE_PYCACHE=0), the first run with it (writes it), then two with it warm.
# 2. #19's single-shape comparison (scripts/single_shape_fast.sh, 2 shapes), now through the entry
#    point as the console script runs it, max-autotune given the same bytecode prefix.
# 3. #17: bench-model Qwen2-0.5B decode b1 with the default tuning (a subprocess worker), whose
#    start-up the cache shortens.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers lightgbm
one() {  # label, then env assignments for the run
  local label=$1; shift
  local t0=$(date +%s.%N)
  env "$@" TRITON_CACHE_DIR=/tmp/tc-one-$label python3 -m gemmtune_entry tune --shape 512x4096x4096:bf16 --fast \
    --store $OUT/one_$label.sqlite > $OUT/one_$label.log 2>&1
  local t1=$(date +%s.%N)
  python3 -c "import sys; print(f'{sys.argv[1]:12s} {float(sys.argv[3]) - float(sys.argv[2]):6.2f} s')" $label $t0 $t1
  grep -E "start-up" $OUT/one_$label.log | head -2
}
one nocache GEMMTUNE_PYCACHE=0
one nocache2 GEMMTUNE_PYCACHE=0
one first
one warm1
one warm2
OUT=$OUT/single SHAPES="2048x6144x4096:bf16 16x6144x4096:bf16" timeout 150 bash scripts/single_shape_fast.sh 2>&1 | tail -5
timeout 330 python3 -m gemmtune.cli bench-model --models qwen2-0.5b --phases decode_b1 \
  --modes max_autotune_pdl_graph,fuse_patch_compile_pdl_graph --out $OUT/bm_qwen2-0.5b > $OUT/bm_qwen2-0.5b.log 2>&1
echo "bench-model qwen2-0.5b rc=$?"
grep -E "own tuning|first calls|interleaved" $OUT/bm_qwen2-0.5b/bench-model.md | cut -c1-400
