#!/usr/bin/env bash
# Session 17, call 2: the warm server's worker warm-up (GPU test, then warm one-shape runs against a
# server without it, max-autotune per shape), and where pad+ time goes on 4095^3 (exp_pad_odd.py).
# GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 120 python3 -m pytest -q -x tests/test_gpu.py -k "warm_pays or precompile" > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; tail -3 $OUT/gpu_tests.txt
timeout 150 python3 scripts/exp_pad_odd.py $OUT/pad_odd.json > $OUT/pad_odd.log 2>&1
echo "pad_odd rc=$?"; cat $OUT/pad_odd.log | grep -v Warning | tail -20
mkdir -p $OUT/warm
OUT=$OUT/warm OFF_ENV=GEMMTUNE_SERVER_WARMUP=0 timeout 300 bash scripts/warm_precompile.sh > $OUT/warm.log 2>&1
echo "warm rc=$?"; tail -8 $OUT/warm.log
tar czf $OUT/warm.tgz -C $OUT warm && rm -rf $OUT/warm
