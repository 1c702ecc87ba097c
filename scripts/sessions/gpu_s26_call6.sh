#!/usr/bin/env bash
# Session 26, call 6: skinny's GEMV strips and --fast's strip picks (GEMV tiles at M <= 2, 16-wide
# dot strips at 2 < M <= 16) on decode layers of 0.4-4B models that no earlier call of this session
# measured (small_decode2.csv), then the public suite's decode group (row-major B: the default
# space's new dot strips only). gemmtune bench, no Inductor. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
R=benchmarks/results/2026-11-27-h100-s26
timeout 280 python3 -m gemmtune.cli bench --suite $R/small_decode2.csv --skip-inductor --skip-tunableop \
  --ceilings-file $OUT/ceilings.json --deadline $(( $(date +%s) + 240 )) --out $OUT/bench2 > $OUT/bench2.log 2>&1
echo "bench2 rc=$?"; grep -E "candidates in|left out" $OUT/bench2.log | head
grep -A6 "Geomean % of the physical" $OUT/bench2/*.md; grep -A6 "^## Geomean speedup" $OUT/bench2/*.md
grep -A5 "Tuning wall" $OUT/bench2/*.md; grep -E "^\| decode \|" $OUT/bench2/*.md | head -16
timeout 230 python3 -m gemmtune.cli bench --groups decode --skip-inductor --skip-tunableop \
  --ceilings-file $OUT/ceilings.json --deadline $(( $(date +%s) + 200 )) --out $OUT/pub > $OUT/pub.log 2>&1
echo "public decode rc=$?"; grep -A6 "Geomean % of the physical" $OUT/pub/*.md; grep -A6 "^## Geomean speedup" $OUT/pub/*.md
grep -A5 "Tuning wall" $OUT/pub/*.md; grep -E "^\| decode \|" $OUT/pub/*.md | head -10
rm -f $OUT/bench2/*.png $OUT/pub/*.png
tar czf $OUT/bench.tgz -C $OUT bench2 pub && rm -rf $OUT/bench2 $OUT/pub
