#!/usr/bin/env bash
# Session 25, call 4 (final tree): every GPU-marked test (the cached persistent call on operands
# TMA cannot read among them), then scripts/fuzz_tune.py on seeds 25 (call 3's problems, now also
# through a dispatcher) and 26. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 240 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -8
for seed in 25 26; do
  timeout 220 python3 scripts/fuzz_tune.py --n 60 --seed $seed --out $OUT/fuzz$seed > $OUT/fuzz$seed.log 2>&1
  echo "fuzz $seed rc=$?"; tail -14 $OUT/fuzz$seed.log | cut -c1-400
  rm -f $OUT/fuzz$seed/fuzz.sqlite-*
done
tar czf $OUT/fuzz.tgz -C $OUT fuzz25 fuzz26 fuzz25.log fuzz26.log && rm -rf $OUT/fuzz25 $OUT/fuzz26 $OUT/fuzz*.log
