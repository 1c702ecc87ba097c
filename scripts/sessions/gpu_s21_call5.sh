#!/usr/bin/env bash
# Session 21, call 5 (H200): the rest of call 1's collection, resumed from data/collect/collect.sqlite.gz
# (which holds call 1's rows): bf16 on benchmarks/suites/collect-h200-s21.csv (29 of 82 shapes left),
# then fp32 on collect-fp32-s20.csv (6 of 8 left), with the same recipe. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
S="--order spread --mm-sample 40 --splitk-sample 20 --pad-sample 8 --new-sample 12 --core-sample 8"
timeout 300 python3 -m gemmtune.cli collect --resume-from data/collect/collect.sqlite.gz --dtypes bf16 $S \
  --shapes benchmarks/suites/collect-h200-s21.csv --max-minutes ${MIN:-4.3} --out $OUT/c1 > $OUT/collect-bf16.log 2>&1
echo "collect bf16 rc=$?"; tail -3 $OUT/collect-bf16.log | cut -c1-300
timeout 75 python3 -m gemmtune.cli collect --resume-from $OUT/c1/collect.sqlite.gz --dtypes fp32 $S \
  --shapes benchmarks/suites/collect-fp32-s20.csv --max-minutes 0.9 --out $OUT/c > $OUT/collect-fp32.log 2>&1
echo "collect fp32 rc=$?"; tail -3 $OUT/collect-fp32.log | cut -c1-300
if [ -f $OUT/c/collect.sqlite.gz ]; then mv $OUT/c/collect.sqlite.gz $OUT/collect.sqlite.gz; else mv $OUT/c1/collect.sqlite.gz $OUT/collect.sqlite.gz; fi
cp $OUT/c1/collect-progress.json $OUT/collect-progress-bf16.json 2>/dev/null; cp $OUT/c/collect-progress.json $OUT/collect-progress-fp32.json 2>/dev/null
rm -rf $OUT/c $OUT/c1
tar czf $OUT/logs.tgz -C $OUT collect-bf16.log collect-fp32.log && rm -f $OUT/collect-*.log
