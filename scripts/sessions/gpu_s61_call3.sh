#!/usr/bin/env bash
# Session 61, call 3 (GPU only; no carry; ~5.5 min). Call 2 found dynamo handing the unpatched model's compiled graph to
# the retired copy (same classes, no route: "first calls 0.0 s"); retired layers now have a class of their own
# (nn._retired_class). 1) exp_retire_compile.py on Llama decode b1: converted against retired (routed) patch + compile,
# same process, no dynamo reset between them; 2) bench-model eager modes on Llama-1B decode after the change.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 45 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_retire.py > $OUT/pytest_gpu.log 2>&1
echo "pytest -m gpu rc=$? t=$(( $(date +%s) - T0 )) s"; tail -2 $OUT/pytest_gpu.log
timeout 220 python3 scripts/sessions/exp_retire_compile.py --phases b1 --out $OUT/llama > $OUT/llama.log 2>&1
echo "llama rc=$? t=$(( $(date +%s) - T0 )) s"; grep -v "^\[gemmtune\]" $OUT/llama.log | grep -v -i warn | cut -c1-600 | tail -8
LEFT=$(( 420 - $(date +%s) + T0 ))
if [ $LEFT -ge 90 ]; then
  timeout $LEFT python3 -m gemmtune.cli bench-model --models llama-1b --dtype bfloat16 --phases decode_b1,decode_b16 \
    --modes eager,eager_copy,eager_patch --eager-rounds 31 --out $OUT/bm-llama-1b > $OUT/bm-llama-1b.log 2>&1
  echo "bench-model rc=$? t=$(( $(date +%s) - T0 )) s"
  grep -E "Step gate|Given back|interleaved" $OUT/bm-llama-1b/bench-model.md | cut -c1-1200
  tar czf $OUT/bm-llama-1b.tgz -C $OUT bm-llama-1b bm-llama-1b.log && rm -rf $OUT/bm-llama-1b $OUT/bm-llama-1b.log
fi
echo "call took $(( $(date +%s) - T0 )) s"
