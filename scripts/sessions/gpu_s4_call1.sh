#!/usr/bin/env bash
# Device call 1 of session 4 (2026-11-24): issue 20's fp8 half on the GPU (bmm is not on main yet).
# The scaled_mm and padcache tests (their CPU tests compile real kernels here) and the gpu-marked
# ones; compute-sanitizer memcheck of the fp8 kernel paths; the fp8 bench group against
# torch._scaled_mm (cuBLASLt), with the adaptive top-k mode.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
timeout ${TESTS_S:-170} python3 -m pytest -q tests/test_scaled_mm.py tests/test_padcache.py \
  -p no:cacheprovider > $OUT/tests.log 2>&1
echo "tests rc=$?"; grep -E "passed|failed|Error|FAIL" $OUT/tests.log | tail -12
timeout ${SAN_S:-110} compute-sanitizer --tool memcheck python3 scripts/sanitize_fp8_bmm.py fp8 > $OUT/sanitize.log 2>&1
echo "sanitize rc=$?"; grep -E "sanitize:|ERROR SUMMARY|WRONG|not run" $OUT/sanitize.log | tail -8
timeout ${BENCH_S:-280} python3 -m gemmtune.cli bench --groups fp8 --skip-inductor --skip-tunableop \
  --extra-modes auto --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "^fp8 |geomean|candidates in" $OUT/bench.log | sed 's/  */ /g' | cut -c1-260
rm -f $OUT/bench/*.png
