#!/usr/bin/env bash
# Session 22, call 5 (H200): collect the classes where --fast fell short on call 3's suite (odd-vocabulary
# heads at M 24-256, tall problems with N <= 200, decode at M 9-24 with a Linear weight) on shapes that are
# not in that suite: benchmarks/suites/collect-h200-s22.csv, resumed from data/collect/collect.sqlite.gz,
# with session 21's recipe, in bf16 (collect reads no dtype column). Data for a later retraining: nothing is retrained or shipped here. GPU only;
# carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
S="--order spread --mm-sample 40 --splitk-sample 20 --pad-sample 8 --new-sample 12 --core-sample 8"
timeout 300 python3 -m gemmtune.cli collect --resume-from data/collect/collect.sqlite.gz --dtypes bf16 $S \
  --shapes benchmarks/suites/collect-h200-s22.csv --max-minutes ${MIN:-4.0} --out $OUT/c > $OUT/collect.log 2>&1
echo "collect rc=$?"; tail -3 $OUT/collect.log | cut -c1-300
mv $OUT/c/collect.sqlite.gz $OUT/collect.sqlite.gz; cp $OUT/c/collect-progress.json $OUT/ 2>/dev/null
rm -rf $OUT/c; gzip -f $OUT/collect.log
