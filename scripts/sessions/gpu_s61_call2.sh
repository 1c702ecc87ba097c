#!/usr/bin/env bash
# Session 61, call 2 (GPU only; no carry; ~6 min). Call 1 measured patch_compile's un-graphed Llama decode_b1 step at
# 23.2 ms against compile's 5.9 ms, with the 113 retired layers routed by compile_route (565 routes). Is that the
# routing, or what patch + compile always cost un-graphed? exp_retire_compile.py compiles the unpatched model, a
# converted copy and a retired copy in one process and times their decode steps, interleaved, with a kernel profile.
# Also the -m gpu test that call 1 failed (a later decode gate after patch retired everything; now retire=False).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_eager_gate.py tests/test_retire.py > $OUT/pytest_gpu.log 2>&1
echo "pytest -m gpu rc=$? t=$(( $(date +%s) - T0 )) s"; tail -3 $OUT/pytest_gpu.log
timeout 300 python3 scripts/sessions/exp_retire_compile.py --out $OUT/llama > $OUT/llama.log 2>&1
echo "llama rc=$? t=$(( $(date +%s) - T0 )) s"; grep -v "^\[gemmtune\]" $OUT/llama.log | cut -c1-700 | tail -20
LEFT=$(( 540 - $(date +%s) + T0 ))
if [ $LEFT -ge 100 ]; then
  timeout $LEFT python3 scripts/sessions/exp_retire_compile.py --model gpt2 --out $OUT/gpt2 > $OUT/gpt2.log 2>&1
  echo "gpt2 rc=$? t=$(( $(date +%s) - T0 )) s"; grep -v "^\[gemmtune\]" $OUT/gpt2.log | cut -c1-700 | tail -20
fi
echo "call took $(( $(date +%s) - T0 )) s"
