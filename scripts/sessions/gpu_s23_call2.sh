#!/usr/bin/env bash
# Session 23, call 2: (1) the parity harness with Inductor's output held for a pass over the input
# sets (bench.inductor.held_launch), beside the old measurement (--same-out: ratio_old), on the small
# and unaligned rows plus session 23's LoRA-B (K = 16) and prime rows; (2) gemmtune bench, Inductor
# included (now also held), on 8 shapes of call 1's suite and session 22's: the decode ones for
# --fast's new skinny pick (topk.with_skinny), and the three where Inductor led. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 230 python3 scripts/parity_inductor.py --small --static --same-out --out $OUT/parity.json > $OUT/parity.log 2>&1
echo "parity rc=$?"; grep -E "ratio|x[0-9]+x" $OUT/parity.log | cut -c1-260
timeout 320 python3 -m gemmtune.cli bench --suite benchmarks/suites/s23-call2.csv \
  --skip-tunableop --deadline $(( $(date +%s) + 300 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"
grep -A7 "Tuning wall" $OUT/bench/*.md | head -9; grep -A8 "Geomean % of the physical" $OUT/bench/*.md
grep -A14 "^## Per shape: speedup" $OUT/bench/*.md | head -14
grep -h "fast: the first" $OUT/bench.log | head -8
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
