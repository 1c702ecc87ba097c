#!/usr/bin/env bash
# Session 41 (~8 min; GPU only; no carry). The default space's two wide one-row strips
# (skinny_spec._WIDE_ONE_ROW: BN16-BK512-W4 and BN8-BK512-W4 -flat-sum, added at N >= 64 SMs from the
# session's sweeps, leave-one-out on the 5 wide layers there) on 10 wide decode layers that no sweep
# timed (benchmarks/suites/decode-wide-s41.csv: LM heads and fused gate/up of 0.1-7B models), and
# on the two decode steps whose fused gate/up and LM head are that wide (Llama-1B, Qwen2-0.5B).
# First exp_gemv_wide --default-only on those weights: the default space's strips alone, every one
# timed, so the old four strips' best and the six's come from one run. Then gemmtune bench on them.
# The two decode steps follow in gpu_s41_call4.sh.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
shapes=$(tail -n +2 benchmarks/suites/decode-wide-s41.csv | cut -d, -f4,5 | tr , x | paste -sd,)
timeout 120 python3 scripts/exp_gemv_wide.py --default-only --shapes $shapes --out $OUT/gemv_default_wide.json \
  --budget-s 100 > $OUT/gemv_default_wide.log 2>&1
echo "exp_gemv_wide --default-only rc=$?"; grep -v "^#.*precompiled" $OUT/gemv_default_wide.log | sed -E 's/ \| next:.*//' | tail -11
timeout 240 python3 -m gemmtune.cli bench --suite benchmarks/suites/decode-wide-s41.csv --skip-inductor --skip-tunableop \
  --ceilings-file $OUT/ceilings.json --deadline $(( $(date +%s) + 210 )) --out $OUT/bench_wide > $OUT/bench_wide.log 2>&1
echo "bench decode-wide rc=$?"; grep -E "left out" $OUT/bench_wide.log | head -3
grep -A6 "Geomean % of the physical" $OUT/bench_wide/*.md; grep -A6 "^## Geomean speedup" $OUT/bench_wide/*.md
grep -A5 "Tuning wall" $OUT/bench_wide/*.md; rm -f $OUT/bench_wide/*.png
