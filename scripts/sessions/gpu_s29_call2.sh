#!/usr/bin/env bash
# Session 29, call 2: gemmtune on what nobody chose. A random suite (scripts/random_suite.py
# --seed 29, which session 27 also ran: a re-run on session 28's tree), --fast and the default space against cuBLAS, then
# an architecture no call has run, StarCoder2's default config (hf:starcoder2: biased Linears,
# GELU-tanh MLP, random weights, bf16), eager against eager + patch, un-graphed and from CUDA
# graphs. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers lightgbm
python3 scripts/random_suite.py --seed ${SEED:-29} --out $OUT/rand.csv
timeout 250 python3 -m gemmtune.cli bench --suite $OUT/rand.csv --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 235 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|left out|rror" $OUT/bench.log | head
grep -A8 "Geomean % of the physical" $OUT/bench/*.md; grep -A8 "^## Geomean speedup" $OUT/bench/*.md
grep -A5 "Tuning wall" $OUT/bench/*.md
rm -f $OUT/bench/*.png
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
timeout 290 python3 -m gemmtune.cli bench-model --models hf:starcoder2 --phases decode_b1,prefill_b1_s512 \
  --modes eager,eager_patch,eager_graph,eager_patch_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11" $OUT/bm.log | grep -E "interleaved|rror|tuned|decode|prefill|Checks|Warn" | tail -24
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
