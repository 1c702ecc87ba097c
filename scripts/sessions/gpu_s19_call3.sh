#!/usr/bin/env bash
# Session 19, call 3: (1) the public prefill and square groups with --fast ranked by the retrained
# H100 ranker (.s19model/, carried) beside the shipped one (call 2 ran decode, splitk, odd and the
# edge shapes); (2) `gemmtune bench-model` on two causal LMs of architectures gemmtune's own list
# lacks, from config files (random weights): a Phi-3 (fused qkv and gate-up projections) and a
# Gemma (multi-query attention, head_dim 256, a 256000-word tied head), eager against eager + patch,
# un-graphed and replayed from CUDA graphs, with the logits and greedy checks. GPU only; carry
# .whl, .s19model.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm transformers
timeout 300 python3 scripts/exp_fast_new_model.py .s19model/nvidia-h100-rank.json -- \
  --groups prefill,square --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 250 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"
grep -A9 "Tuning wall" $OUT/bench/*.md; grep -A14 "^## Per shape: speedup" $OUT/bench/*.md | head -16
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
for m in phi3-8l gemma-6l; do
  timeout ${MODEL_S:-130} python3 -m gemmtune.cli bench-model --models config:benchmarks/models-s19/$m.json \
    --phases prefill_b1_s512,decode_b1,decode_b16 --modes eager,eager_patch,eager_graph,eager_patch_graph \
    --out $OUT/bm-$m > $OUT/bm-$m.log 2>&1
  echo "bench-model $m rc=$?"; grep -v Warning $OUT/bm-$m.log | tail -25
done
tar czf $OUT/bench-model.tgz -C $OUT bm-phi3-8l bm-gemma-6l bm-phi3-8l.log bm-gemma-6l.log 2>/dev/null
rm -rf $OUT/bm-*
