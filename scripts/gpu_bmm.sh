#!/usr/bin/env bash
# One device call for issue 20's bmm half (not run yet): tests/test_bmm.py on the GPU (its CPU tests
# compile real kernels here, the gpu-marked ones add bf16 default spaces and torch.bmm comparisons);
# compute-sanitizer memcheck of the batched tiled kernel (transposed, broadcast, odd sizes); the bmm
# bench group (attention QK^T/PV and MoE experts) against torch.bmm, Inductor max-autotune skipped
# for time (drop --skip-inductor for it). Target: gemmtune default >= 1.0x torch.bmm geomean.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
timeout ${TESTS_S:-200} python3 -m pytest -q tests/test_bmm.py -p no:cacheprovider > $OUT/tests.log 2>&1
echo "tests rc=$?"; grep -E "passed|failed|Error|FAIL" $OUT/tests.log | tail -12
timeout ${SAN_S:-90} compute-sanitizer --tool memcheck python3 scripts/sanitize_fp8_bmm.py bmm > $OUT/sanitize.log 2>&1
echo "sanitize rc=$?"; grep -E "sanitize:|ERROR SUMMARY|WRONG|^bmm" $OUT/sanitize.log | tail -8
timeout ${BENCH_S:-280} python3 -m gemmtune.cli bench --groups bmm --skip-inductor --skip-tunableop \
  --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "^bmm |geomean|candidates in" $OUT/bench.log | sed 's/  */ /g' | cut -c1-260
rm -f $OUT/bench/*.png
