#!/usr/bin/env bash
# Session 61, call 3b (GPU only; run by hand on call 3's warm machine, ~70 s): bench-model's eager modes on GPT-2
# decode b1 / b16 with retired layers in their own class (21 paired rounds).
set -u
source "$(dirname "$0")/../device_env.sh"
T0=$(date +%s)
timeout 140 python3 -m gemmtune.cli bench-model --models gpt2 --dtype bfloat16 --phases decode_b1,decode_b16 \
  --modes eager,eager_copy,eager_patch --eager-rounds 21 --out $OUT/bm-gpt2 > $OUT/bm-gpt2.log 2>&1
echo "rc=$? t=$(( $(date +%s) - T0 ))"
grep -E "Given back|interleaved" $OUT/bm-gpt2/bench-model.md | cut -c1-1200
tar czf $OUT/bm-gpt2.tgz -C $OUT bm-gpt2 bm-gpt2.log && rm -rf $OUT/bm-gpt2 $OUT/bm-gpt2.log
