#!/usr/bin/env bash
# Device call 4 of session 4 (2026-11-24): issue 20's bmm half on the GPU. tests/test_bmm.py
# (its CPU tests compile real kernels here, plus the gpu-marked ones), compute-sanitizer memcheck
# of the batched tiled kernel (transposed, broadcast, odd sizes), the bmm bench group against
# torch.bmm (cuBLAS), with the adaptive top-k mode; the pad copy micro-bench (zero_pad by cat).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > $OUT/env.txt 2>&1
timeout ${TESTS_S:-150} python3 -m pytest -q tests/test_bmm.py tests/test_padcache.py -p no:cacheprovider > $OUT/tests.log 2>&1
echo "tests rc=$?"; grep -E "passed|failed|Error|FAIL" $OUT/tests.log | tail -12
timeout ${SAN_S:-90} compute-sanitizer --tool memcheck python3 scripts/sanitize_fp8_bmm.py bmm > $OUT/sanitize.log 2>&1
echo "sanitize rc=$?"; grep -E "sanitize:|ERROR SUMMARY|WRONG|not run|bmm" $OUT/sanitize.log | tail -8
timeout 60 python3 scripts/pad_copy_bench.py > $OUT/pad_copy.jsonl 2> $OUT/pad_copy.err
echo "pad rc=$?"; cat $OUT/pad_copy.jsonl | cut -c1-200
timeout ${BENCH_S:-300} python3 -m gemmtune.cli bench --groups bmm --skip-inductor \
  --extra-modes auto --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "^bmm |candidates in" $OUT/bench.log | sed 's/  */ /g' | cut -c1-300
rm -f $OUT/bench/*.png
