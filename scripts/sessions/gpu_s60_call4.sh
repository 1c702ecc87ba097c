#!/usr/bin/env bash
# Session 60, call 4 (GPU only; no carry; ~7 min). Call 3 again with eager_copy, the unpatched deep copy: call 3 put
# Llama decode_b16 at 0.945x with no tuned eager path in that phase, and its A/A control (the same model against
# itself) at 0.950x on decode_b1, so a patched copy's ratio needs a copy's beside it. 41 rounds.
# #17's target as bench-model measures it, after session 59's hot
# shape (a converted layer on its final F.linear path compares its input's shape with one in its own __dict__ before
# any table read): eager against eager + patch, un-graphed, paired interleaved rounds (31), on Llama-3.2-1B's config,
# GPT-2 and Qwen2-0.5B's config in bf16, prefill 1x512 and decode b1 / b16. Session 51: decode_b1 0.976x on Llama.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
run_bm() {  # name seconds
  timeout $2 python3 -m gemmtune.cli bench-model --models $1 --dtype bfloat16 \
    --phases prefill_b1_s512,decode_b1,decode_b16 --modes eager,eager_copy,eager_patch --eager-rounds 41 \
    --out $OUT/bm-$1 > $OUT/bm-$1.log 2>&1
  echo "bench-model $1 rc=$? t=$(( $(date +%s) - T0 )) s"
  grep -E "Step gate|interleaved" $OUT/bm-$1/bench-model.md | cut -c1-1600
  tar czf $OUT/bm-$1.tgz -C $OUT bm-$1 bm-$1.log && rm -rf $OUT/bm-$1 $OUT/bm-$1.log
}
run_bm llama-1b 230
LEFT=$(( 540 - $(date +%s) + T0 ))
[ $LEFT -ge 100 ] && run_bm gpt2 $LEFT
echo "call took $(( $(date +%s) - T0 )) s"
