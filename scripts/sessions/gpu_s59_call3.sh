#!/usr/bin/env bash
# Session 59, call 3 (GPU only; no carry; ~2.5 min): #17. Call 2 (700 paired steps): every forward variant that made a
# call besides F.linear (dict.get, x.numel(), type(), is_compiling) cost +125 to +191 us a step; x.shape alone, the
# floor and nn.Linear's body under gemmtune's class cost nothing (-78 to +21). Now: the memo read with no call (`in`
# and a subscript; a subscript in try/except), with and without the compile check, .get without super(), and which
# profile / trace / sys.monitoring hooks are on inside a layer.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 300 python3 scripts/sessions/exp_forward_ladder.py --device cuda --dtype bfloat16 --features 2048 --steps 700 \
  --variants floor,memo_check_in,get_nosuper,contains,contains_check,subscript_check,floor_b \
  > $OUT/ladder.log 2>&1; echo "ladder rc=$?"; grep -v Warn $OUT/ladder.log | tail -12
echo "call took $(( $(date +%s) - T0 )) s"
