#!/usr/bin/env bash
# Session 21, call 1 (H200): (1) every GPU-marked test, on the tree that session 20 left (its untimed
# changes: pad pair, skinny's fp32 default space, the eager shape limit); (2) the classes the H200
# store lacks (odd-vocabulary heads, small N, tiny and huge K: benchmarks/suites/collect-h200-s21.csv,
# bf16), then fp32 (collect-fp32-s20.csv), collected on top of data/collect/collect.sqlite.gz with
# the H100 recipe of sessions 19-20. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 190 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; tail -3 $OUT/gpu_tests.txt
S="--order spread --mm-sample 40 --splitk-sample 20 --pad-sample 8 --new-sample 12 --core-sample 8"
timeout 290 python3 -m gemmtune.cli collect --resume-from data/collect/collect.sqlite.gz --dtypes bf16 $S \
  --shapes benchmarks/suites/collect-h200-s21.csv --max-minutes ${MIN:-4.0} --out $OUT/c1 > $OUT/collect-bf16.log 2>&1
echo "collect bf16 rc=$?"; tail -3 $OUT/collect-bf16.log | cut -c1-300
timeout 80 python3 -m gemmtune.cli collect --resume-from $OUT/c1/collect.sqlite.gz --dtypes fp32 $S \
  --shapes benchmarks/suites/collect-fp32-s20.csv --max-minutes 0.8 --out $OUT/c > $OUT/collect-fp32.log 2>&1
echo "collect fp32 rc=$?"; tail -3 $OUT/collect-fp32.log | cut -c1-300
if [ -f $OUT/c/collect.sqlite.gz ]; then mv $OUT/c/collect.sqlite.gz $OUT/collect.sqlite.gz; else mv $OUT/c1/collect.sqlite.gz $OUT/collect.sqlite.gz; fi
cp $OUT/c1/collect-progress.json $OUT/collect-progress-bf16.json 2>/dev/null; cp $OUT/c/collect-progress.json $OUT/collect-progress-fp32.json 2>/dev/null
rm -rf $OUT/c $OUT/c1
tar czf $OUT/logs.tgz -C $OUT gpu_tests.txt collect-bf16.log collect-fp32.log && rm -f $OUT/gpu_tests.txt $OUT/collect-*.log
