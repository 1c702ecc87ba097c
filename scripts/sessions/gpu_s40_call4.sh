#!/usr/bin/env bash
# Session 40, call 4 (~8-9 min; GPU only; no carry). After call 3 put -flat strips in the default
# space at M = 1 on 16-bit operands (skinny_spec._DEFAULT_ONE_ROW, in place of the 3-D GEMV tiles):
# 1. gemmtune bench on 18 M = 1 decode layers of 0.4-8B models with a Linear's K-contiguous
#    weight (benchmarks/suites/decode-m1-s40.csv: session 26's M = 1 rows; 14 of them are not among
#    the 12 shapes the tiles were picked on): default and --fast against cuBLAS, % of the floor.
# 2. bench-model, Llama-1B decode b1, PDL on both sides (session 39: 1.054x max-autotune with
#    the 3-D GEMV tiles): the tiles in a model, with their -pdl twins.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 230 python3 -m gemmtune.cli bench --suite benchmarks/suites/decode-m1-s40.csv --skip-inductor --skip-tunableop \
  --ceilings-file $OUT/ceilings.json --deadline $(( $(date +%s) + 200 )) --out $OUT/bench_m1 > $OUT/bench_m1.log 2>&1
echo "bench decode-m1 rc=$?"; grep -E "left out" $OUT/bench_m1.log | head -3
grep -A6 "Geomean % of the physical" $OUT/bench_m1/*.md; grep -A6 "^## Geomean speedup" $OUT/bench_m1/*.md
grep -A5 "Tuning wall" $OUT/bench_m1/*.md; rm -f $OUT/bench_m1/*.png
unset GEMMTUNE_GEMV_HANDBACK_MIN_BYTES
timeout 330 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 --profile \
  --modes max_autotune_pdl_graph,fuse_patch_compile_pdl_graph \
  --out $OUT/bm_llama-1b > $OUT/bm_llama-1b.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm_llama-1b.log | grep -E "interleaved|replay|FAILED|rror|first calls" | tail -12
