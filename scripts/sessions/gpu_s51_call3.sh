#!/usr/bin/env bash
# Session 51, call 3 (GPU only; no carry; ~9 min): the step gate on models call 1 did not run,
# each with the deep-copy control: Qwen3-0.6B, Qwen2-0.5B and GPT-2 in bf16 (prefill 512, decode
# b1 / b16), eager / eager_copy / eager_patch, 21 paired rounds. (MiniLM needs its weights carried.)
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
run_bm() {  # name seconds phases
  timeout $2 python3 -m gemmtune.cli bench-model --models $1 --dtype bfloat16 ${3:+--phases $3} \
    --modes eager,eager_copy,eager_patch --eager-rounds 21 --out $OUT/bm-$1 > $OUT/bm-$1.log 2>&1
  echo "bench-model $1 rc=$?"
  grep -v "^E11" $OUT/bm-$1.log | grep -E "gate|eager_patch .*against eager_copy|rror|paths:" | sed -E 's/quartiles [0-9.]+-[0-9.]+, //' | tail -8
  tar czf $OUT/bm-$1.tgz -C $OUT bm-$1 bm-$1.log && rm -rf $OUT/bm-$1 $OUT/bm-$1.log
}
P=prefill_b1_s512,decode_b1,decode_b16
run_bm qwen3-0.6b 200 $P
run_bm qwen2-0.5b 190 $P
LEFT=$(( 570 - $(date +%s) + T0 ))
[ $LEFT -ge 100 ] && run_bm gpt2 $LEFT $P
echo "call took $(( $(date +%s) - T0 )) s"
