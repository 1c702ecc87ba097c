#!/usr/bin/env bash
# Session 60, call 5 (GPU only; no carry; ~5 min). #17: call 4 put eager + patch below its unpatched deep copy where no
# layer runs a tuned kernel (GPT-2 decode b1 / b16 0.971x, every one of its 49 layers converted and on cuBLAS; Llama
# decode_b16 0.983x) -- 3.5-4 us a converted layer, against ~0.9 us in session 59's synthetic ladder. bench-model's
# --profile on the un-graphed modes: the kernels each step launches and their device time, patched against the copy,
# to tell GPU work (another kernel, another GEMM, a copy) from host time.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
run_bm() {  # name phases seconds
  timeout $3 python3 -m gemmtune.cli bench-model --models $1 --dtype bfloat16 --profile \
    --phases $2 --modes eager,eager_copy,eager_patch --eager-rounds 21 \
    --out $OUT/bm-$1 > $OUT/bm-$1.log 2>&1
  echo "bench-model $1 rc=$? t=$(( $(date +%s) - T0 )) s"
  grep -E "interleaved|eager paths" $OUT/bm-$1/bench-model.md $OUT/bm-$1.log | cut -c1-1600
  grep -iE "profile|kernels|launch" $OUT/bm-$1.log | head -30
  tar czf $OUT/bm-$1.tgz -C $OUT bm-$1 bm-$1.log && rm -rf $OUT/bm-$1 $OUT/bm-$1.log
}
run_bm gpt2 decode_b1,decode_b16 200
LEFT=$(( 480 - $(date +%s) + T0 ))
[ $LEFT -ge 100 ] && run_bm llama-1b decode_b16 $LEFT
echo "call took $(( $(date +%s) - T0 )) s"
