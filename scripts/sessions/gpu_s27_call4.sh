#!/usr/bin/env bash
# Session 27, call 4: --fast's padded persistent pick now prefers a flattened (-F) config
# (topk.with_padded_persistent). The validation shapes again (validate.csv), then a fourth random
# suite on the final rules (scripts/random_suite.py --seed 29). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 200 python3 -m gemmtune.cli bench --suite benchmarks/results/2026-11-28-h100-s27/validate.csv \
  --skip-inductor --skip-tunableop --deadline $(( $(date +%s) + 180 )) --ceilings-file $OUT/ceilings.json \
  --out $OUT/validate > $OUT/validate.log 2>&1
echo "validate rc=$?"; grep -A8 "^## Geomean speedup" $OUT/validate/*.md; grep -A4 "Tuning wall" $OUT/validate/*.md
grep -E "^(odd|decode|splitk) " $OUT/validate.log | cut -c1-140
python3 scripts/random_suite.py --seed ${SEED:-29} --out $OUT/rand.csv
timeout 330 python3 -m gemmtune.cli bench --suite $OUT/rand.csv --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 300 )) --ceilings-file $OUT/ceilings.json --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "left out" $OUT/bench.log | head
grep -A8 "Geomean % of the physical" $OUT/bench/*.md; grep -A8 "^## Geomean speedup" $OUT/bench/*.md
grep -A5 "Tuning wall" $OUT/bench/*.md
rm -f $OUT/bench/*.png $OUT/validate/*.png
tar czf $OUT/bench.tgz -C $OUT bench validate && rm -rf $OUT/bench $OUT/validate
