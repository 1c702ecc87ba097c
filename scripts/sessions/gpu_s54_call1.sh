#!/usr/bin/env bash
# Session 54, call 1 (GPU only; no carry; ~8 min): (1) #15's odd-N GEMV class: the aligned-window GEMV
# of scripts/exp_gemv_oddn.py in its new tl.dot form (class-masked left operand, so Triton pipelines
# B's 16-byte cp.async loads; offline sm_90: LDGSTS.E.BYPASS.128) against cuBLAS, skinny's one-slice
# strips and session 47's best elementwise window, every output checked against fp64 first.
# (2) gemmtune bench on the odd group with PREFETCH_B (s53 benched the group before it), no Inductor.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 230 python3 scripts/exp_gemv_oddn.py --dot-only --budget-s 190 --out $OUT/gemv_oddn.json > $OUT/gemv_oddn.log 2>&1
echo "gemv rc=$?"; grep -vE "^\s*$" $OUT/gemv_oddn.log | tail -14 | cut -c1-400
timeout $(( 540 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --groups odd --skip-tunableop --skip-inductor \
  --deadline $(( T0 + 520 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "left out|rror" $OUT/bench.log | grep -v "^E12" | head -5
grep -A8 "Geomean % of the physical" $OUT/bench/*.md; grep -A8 "^## Geomean speedup" $OUT/bench/*.md
grep -E "^\| odd \|" $OUT/bench/*.md | head -8
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
echo "call took $(( $(date +%s) - T0 )) s"
