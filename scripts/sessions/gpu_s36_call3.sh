#!/usr/bin/env bash
# Prepared at the end of session 35 for session 36 (~5 min; GPU only; no carry).
# #17 "eager + patch never slower ... in any model": GPT-2 (Conv1D: its cuBLAS path now runs
# transformers' forward inline with _parameters reads, CPU -0.66 us a call against Conv1D) and
# Qwen2-0.5B at decode b1, with the deep-copy control, 101 paired rounds.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 560 python3 -m gemmtune.cli bench-model --models gpt2,qwen2-0.5b --phases decode_b1 --eager-rounds 101 \
  --modes eager,eager_copy,eager_patch --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|rror|FAIL" | tail -8
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
