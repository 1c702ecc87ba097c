#!/usr/bin/env bash
# Session 59, call 4 (GPU only; no carry; ~2.5 min): #17. Call 3: a memo read with no call at all (`in` and a
# subscript) cost as much as .get() (+190 us a step), x.shape alone nothing, and no profile, trace or sys.monitoring
# hook is on. Is it cache misses on each layer's own cold memo objects? One dict shared by every layer (hot), the last
# shape or numel held as a plain attribute, against the per-layer dict.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 300 python3 scripts/sessions/exp_forward_ladder.py --device cuda --dtype bfloat16 --features 2048 --steps 700 \
  --variants floor,contains,shared,last_shape,numel_attr,floor_b \
  > $OUT/ladder.log 2>&1; echo "ladder rc=$?"; grep -v Warn $OUT/ladder.log | tail -10
echo "call took $(( $(date +%s) - T0 )) s"
