#!/usr/bin/env bash
# For the next session: time session 20's changes that ran on no GPU (benchmarks/results/
# 2026-11-27-h100-s20). (1) skinny's default space at fp32 (dot tiles with BLOCK_K halved, core tiles
# shrunk to the register budget): the default column on benchmarks/suites/validate-fp32-decode-s20.csv,
# against call 10's (95.2% of the best; 8x5120x5120 stayed on cuBLAS); (2) pad+ reading an aligned A as
# it is where only N is odd: benchmarks/suites/validate-oddn-heads-s20.csv; (3) every GPU-marked test.
# GPU only; carry .whl.
set -u
source "$(dirname "$0")/device_env.sh"
record_env lightgbm
timeout 200 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; tail -2 $OUT/gpu_tests.txt
for S in validate-fp32-decode-s20 validate-oddn-heads-s20; do
  timeout 200 python3 -m gemmtune.cli bench --suite benchmarks/suites/$S.csv --skip-inductor --skip-tunableop \
    --deadline $(( $(date +%s) + 170 )) --out $OUT/$S > $OUT/$S.log 2>&1
  echo "$S rc=$?"; grep -A7 "Tuning wall" $OUT/$S/*.md | head -7; grep -A8 "^## Per shape: speedup" $OUT/$S/*.md | sed -n 3,8p
  rm -f $OUT/$S/*.png
done
tar czf $OUT/runs.tgz -C $OUT validate-fp32-decode-s20 validate-oddn-heads-s20 gpu_tests.txt && rm -rf $OUT/validate-* $OUT/gpu_tests.txt
