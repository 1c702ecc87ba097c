#!/usr/bin/env bash
# Session 24, call 6: pad+ choices' per-call copies now always on Triton (pad.TRITON_PAD_MIN_BYTES 0:
# the path a dispatcher serves, prepared, and the one the tuner times). Seven small odd shapes no
# store holds, both copies under the old 4 MiB threshold (benchmarks/suites/validate-s24-smallodd.csv),
# then the public odd group; Inductor max-autotune included. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
T0=$(date +%s)
timeout 300 python3 -m gemmtune.cli bench --suite benchmarks/suites/validate-s24-smallodd.csv --skip-tunableop \
  --deadline $(( T0 + 270 )) --out $OUT/smallodd > $OUT/smallodd.log 2>&1
echo "smallodd rc=$?"
grep -A8 "Tuning wall" $OUT/smallodd/*.md; grep -A11 "^## Per shape: speedup" $OUT/smallodd/*.md | head -13
timeout $(( 575 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --groups odd --skip-tunableop \
  --deadline $(( T0 + 540 )) --out $OUT/odd > $OUT/odd.log 2>&1
echo "odd rc=$?"
grep -A8 "Tuning wall" $OUT/odd/*.md; grep -A9 "^## Per shape: speedup" $OUT/odd/*.md | head -11
grep -B2 -A8 "Geomean % of the physical" $OUT/odd/*.md | head -12
rm -f $OUT/*/*.png
tar czf $OUT/bench.tgz -C $OUT smallodd odd smallodd.log odd.log && rm -rf $OUT/smallodd $OUT/odd $OUT/smallodd.log $OUT/odd.log
