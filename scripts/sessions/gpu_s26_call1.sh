#!/usr/bin/env bash
# Session 26, call 1 (and call 8 with SEED=27, on the final tree): gemmtune bench on a random suite nobody chose (scripts/random_suite.py,
# env SEED, default 26): cuBLAS, the default mode, --fast and model top-5, no Inductor or
# TunableOp (time). Where does --fast fall short of the best on shapes outside the public suite?
# GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
SEED=${SEED:-26}
python3 scripts/random_suite.py --seed $SEED --out $OUT/rand$SEED.csv
timeout ${BENCH_S:-560} python3 -m gemmtune.cli bench --suite $OUT/rand$SEED.csv --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + ${DEADLINE_S:-480} )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|tuning [0-9]+ shapes|left out" $OUT/bench.log | head -20
grep -A9 "Tuning wall" $OUT/bench/*.md; grep -A8 "Geomean % of the physical" $OUT/bench/*.md
grep -A8 "^## Geomean speedup" $OUT/bench/*.md
rm -f $OUT/bench/*.png
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
