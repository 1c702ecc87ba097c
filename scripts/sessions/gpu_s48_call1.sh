#!/usr/bin/env bash
# Session 48, call 1 (GPU only; no carry; ~9.5 min): shapes and models nobody chose, with
# Inductor this time. A random suite with a new seed (scripts/random_suite.py --seed 48; the
# decode, splitk and odd groups, where gemmtune's families differ most from cuBLAS and Inductor):
# --fast, the default space and model top-5 against cuBLAS and torch.compile max-autotune, so
# #19's tuning-time ratio and #16's "odd >= Inductor" are measured on shapes no session chose.
# Then two architectures no call has run, from transformers' default configs with random weights,
# bf16: Phi-3 (hf:phi3: fused qkv_proj and gate_up_proj) and OLMo-2 (hf:olmo2: q/k norms, 7B),
# decode b1 and prefill 512, eager against eager + patch, un-graphed and from CUDA graphs.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
python3 scripts/random_suite.py --seed ${SEED:-48} --per-group decode=6,splitk=4,odd=5,prefill=0,square=0 --out $OUT/rand.csv
timeout 330 python3 -m gemmtune.cli bench --suite $OUT/rand.csv --skip-tunableop \
  --deadline $(( T0 + 310 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|left out|rror" $OUT/bench.log | head
grep -A8 "Geomean % of the physical" $OUT/bench/*.md; grep -A8 "^## Geomean speedup" $OUT/bench/*.md
grep -A6 "Tuning wall" $OUT/bench/*.md; grep -iE "slower|loss" $OUT/bench/*.md | head -8
rm -f $OUT/bench/*.png
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
for m in phi3 olmo2; do
  timeout 115 python3 -m gemmtune.cli bench-model --models hf:$m --phases decode_b1,prefill_b1_s512 \
    --modes eager,eager_patch,eager_graph,eager_patch_graph --out $OUT/bm_$m > $OUT/bm_$m.log 2>&1
  echo "bench-model $m rc=$?"; grep -v "^E11" $OUT/bm_$m.log | grep -E "interleaved|rror|tuned|decode|prefill|Checks|Warn|paths" | tail -16
done
tar czf $OUT/bm.tgz -C $OUT bm_phi3 bm_olmo2 && rm -rf $OUT/bm_phi3 $OUT/bm_olmo2
echo "call took $(( $(date +%s) - T0 )) s"
