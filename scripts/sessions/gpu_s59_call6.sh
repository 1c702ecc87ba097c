#!/usr/bin/env bash
# Session 59, call 6 (GPU only; no carry; ~2 min): #17 after the hot-shape fix (call 5: patched +149 us a step against
# the old path's +243 and the floors' -21 / -34). What the compile check in front costs in situ: the fixed fast path
# as a subclass behind torch.compiler.is_compiling (two Python frames), is_dynamo_compiling (one), and none.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 150 python3 scripts/sessions/exp_forward_ladder.py --device cuda --dtype bfloat16 --features 2048 --steps 650 \
  --variants floor,hot_check,hot_dyn,hot_nocheck,floor_b > $OUT/ladder.log 2>&1; echo "ladder rc=$?"
grep -v Warn $OUT/ladder.log | tail -9
echo "call took $(( $(date +%s) - T0 )) s"
