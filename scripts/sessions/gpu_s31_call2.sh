#!/usr/bin/env bash
# Session 31, call 2: gemmtune on shapes nobody chose, on an H200. A random suite with a seed no
# call has used (scripts/random_suite.py --seed 31), --fast, the default space and model top-5
# against cuBLAS; then an architecture no call has run, transformers' default Phi config (hf:phi:
# biased Linears, GELU, partial rotary, random weights, bf16), decode b1 and prefill 512, eager
# against eager + patch, un-graphed and from CUDA graphs. GPU only; no carry (the shipped ranker
# runs through numpy).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
python3 scripts/random_suite.py --seed ${SEED:-31} --out $OUT/rand.csv
timeout 260 python3 -m gemmtune.cli bench --suite $OUT/rand.csv --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 245 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|left out|rror" $OUT/bench.log | head
grep -A8 "Geomean % of the physical" $OUT/bench/*.md; grep -A8 "^## Geomean speedup" $OUT/bench/*.md
grep -A5 "Tuning wall" $OUT/bench/*.md
rm -f $OUT/bench/*.png
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
timeout 250 python3 -m gemmtune.cli bench-model --models hf:phi --phases decode_b1,prefill_b1_s512 \
  --modes eager,eager_patch,eager_graph,eager_patch_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11" $OUT/bm.log | grep -E "interleaved|rror|tuned|decode|prefill|Checks|Warn|paths" | tail -24
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
