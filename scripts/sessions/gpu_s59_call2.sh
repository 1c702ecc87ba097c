#!/usr/bin/env bash
# Session 59, call 2 (GPU only; no carry; ~2.5 min): #17, a finer ladder. Call 1 had the patched Llama decode step
# +249 us (CI +171 to +363), the floor forward +35 (-65 to +174) and the floor plus the memo lookup +204 (+93 to
# +324) against plain: which of x.shape and dict.get costs, whether a numel-keyed memo costs less, and what a second
# deep copy of the floor moves (floor_b).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 300 python3 scripts/sessions/exp_forward_ladder.py --device cuda --dtype bfloat16 --features 2048 --steps 700 \
  > $OUT/ladder.log 2>&1; echo "ladder rc=$?"; grep -v Warn $OUT/ladder.log | tail -12
echo "call took $(( $(date +%s) - T0 )) s"
