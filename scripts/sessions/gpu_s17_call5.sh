#!/usr/bin/env bash
# Session 17, call 5: H100 collection on vocabulary-sized odd-N heads (small M, B mostly row-major),
# the class where --fast missed most on shapes outside the suite (64x50257x1024: 91% of the best)
# and the H100 store has almost no problem: benchmarks/suites/collect-odd-heads.csv, through the
# new `gemmtune collect --shapes`. The same sample sizes as every earlier H100 collection.
# GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
S="--order spread --mm-sample 40 --splitk-sample 20 --pad-sample 8 --new-sample 12"
timeout 420 python3 -m gemmtune.cli collect --resume-from data/collect/h100/collect.sqlite.gz --dtypes bf16 $S \
  --shapes benchmarks/suites/collect-odd-heads.csv --max-minutes ${MIN:-5.5} --out $OUT/c > $OUT/collect.log 2>&1
echo "collect rc=$?"; tail -4 $OUT/collect.log
mv $OUT/c/collect.sqlite.gz $OUT/collect.sqlite.gz; mv $OUT/c/collect-progress.json $OUT/ 2>/dev/null
rm -rf $OUT/c; ls -la $OUT
