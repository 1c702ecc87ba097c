#!/usr/bin/env bash
# Session 50, call 5 (GPU only; no carry; ~8 min): the final tree. The -m gpu lane (the store's
# fp32 precision, the table and epilogue hunts' fixes, fit_stages); the public suite's square and
# splitk groups (both fp32 rows among them) against cuBLAS, interleaved, its ceilings now with a
# write ceiling where the tree has one; then 3xTF32 fp32 timings for the rankers, the built-in
# plan's fp32 shapes spread over the groups, into a fresh store whose rows carry their
# fp32_precision (schema 2).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 240 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15
timeout 170 python3 -m gemmtune.cli bench --suite public --groups square,splitk --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 150 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "left out|rror" $OUT/bench.log | head -5
grep -E "^(square|splitk) " $OUT/bench.log | sed -E 's/  gemmtune model adaptive.*//'
grep -A7 "Geomean % of the physical" $OUT/bench/*.md | tail -4; grep -A7 "^## Geomean speedup" $OUT/bench/*.md | tail -4
grep -iE "ceiling|write" $OUT/bench/*.md | head -6
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
LEFT=$(( (560 - $(date +%s) + T0) / 60 ))
if [ $LEFT -ge 2 ]; then
  timeout $(( LEFT * 60 + 30 )) python3 -m gemmtune.cli collect --dtypes fp32 --order spread --mm-sample 40 --splitk-sample 16 \
    --max-minutes $(( LEFT - 1 )) --hard-stop-minutes $LEFT --out $OUT/collect > $OUT/collect.log 2>&1
  echo "collect rc=$? ($LEFT min)"; tail -4 $OUT/collect.log
  rm -f $OUT/collect/collect.sqlite $OUT/collect/*.sqlite-*; tar czf $OUT/collect.tgz -C $OUT collect collect.log && rm -rf $OUT/collect $OUT/collect.log
fi
gzip -f $OUT/gpu_tests.txt
echo "call took $(( $(date +%s) - T0 )) s"
