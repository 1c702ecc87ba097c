#!/usr/bin/env bash
# Session 51, call 1 (GPU only; no carry; ~9 min): the step gate (gemmtune.eager_gate).
# (1) The gate's GPU tests, and the eager / bench-model GPU tests beside them.
# (2) Session 50's loss, again: Qwen2-0.5B's config in float32, prefill 512 and decode b1 / b16,
#     eager against eager + patch un-graphed (21 paired rounds), now with each phase's step gated.
# (3) The bf16 models the un-graphed target was missed on (0.96-0.99x): Llama-3.2-1B's config
#     and GPT-2, the same phases and modes.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 150 python3 -m pytest -q -n 4 -m gpu tests/test_eager_gate.py tests/test_eager.py tests/test_benchmodel.py \
  -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -8
run_bm() {  # name dtype seconds
  timeout $3 python3 -m gemmtune.cli bench-model --models $1 --dtype $2 \
    --phases prefill_b1_s512,decode_b1,decode_b16 --modes eager,eager_patch --eager-rounds 21 \
    --out $OUT/bm-$1-$2 > $OUT/bm-$1-$2.log 2>&1
  echo "bench-model $1 $2 rc=$?"
  grep -v "^E11" $OUT/bm-$1-$2.log | grep -E "gate|interleaved|rror|eager_patch .*(prefill|decode)|eager  .*(prefill|decode)|paths" | tail -14
  tar czf $OUT/bm-$1-$2.tgz -C $OUT bm-$1-$2 bm-$1-$2.log && rm -rf $OUT/bm-$1-$2 $OUT/bm-$1-$2.log
}
run_bm qwen2-0.5b float32 170
run_bm llama-1b bfloat16 150
LEFT=$(( 575 - $(date +%s) + T0 ))
[ $LEFT -ge 90 ] && run_bm gpt2 bfloat16 $LEFT
gzip -f $OUT/gpu_tests.txt
echo "call took $(( $(date +%s) - T0 )) s"
