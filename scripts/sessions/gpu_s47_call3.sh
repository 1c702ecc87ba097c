#!/usr/bin/env bash
# Session 47, call 3 (GPU only; no carry; ~9 min): shapes and models nobody chose. A random suite
# with a seed no call has used (scripts/random_suite.py --seed 47): --fast, the default space and
# model top-5 against cuBLAS. Then two architectures no call has run, from transformers' default
# configs with random weights, bf16: Gemma-2 (hf:gemma2: a 256000-word head, logit soft-capping)
# and SmolLM3 (hf:smollm3), decode b1 and prefill 512, eager against eager + patch, un-graphed and
# from CUDA graphs.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
python3 scripts/random_suite.py --seed ${SEED:-47} --out $OUT/rand.csv
timeout 280 python3 -m gemmtune.cli bench --suite $OUT/rand.csv --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 260 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|left out|rror" $OUT/bench.log | head
grep -A8 "Geomean % of the physical" $OUT/bench/*.md; grep -A8 "^## Geomean speedup" $OUT/bench/*.md
grep -A5 "Tuning wall" $OUT/bench/*.md; grep -iE "slower|loss" $OUT/bench/*.md | head -8
rm -f $OUT/bench/*.png
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
for m in gemma2 smollm3; do
  timeout 130 python3 -m gemmtune.cli bench-model --models hf:$m --phases decode_b1,prefill_b1_s512 \
    --modes eager,eager_patch,eager_graph,eager_patch_graph --out $OUT/bm_$m > $OUT/bm_$m.log 2>&1
  echo "bench-model $m rc=$?"; grep -v "^E11" $OUT/bm_$m.log | grep -E "interleaved|rror|tuned|decode|prefill|Checks|Warn|paths" | tail -16
done
tar czf $OUT/bm.tgz -C $OUT bm_gemma2 bm_smollm3 && rm -rf $OUT/bm_gemma2 $OUT/bm_smollm3
