#!/usr/bin/env bash
# Device call 1 of 2026-11-24: the persistent TMA family on the GPU (tests, compute-sanitizer,
# then timings against triton_mm and cuBLAS).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/env.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/env.txt
timeout ${TESTS_S:-200} python3 -m pytest -q -x tests/test_persistent.py tests/test_table.py -k "persistent or export" -p no:cacheprovider > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; tail -8 $OUT/gpu_tests.log
timeout ${SAN_S:-120} compute-sanitizer --tool memcheck --print-limit 20 python3 scripts/sanitize_kernels.py > $OUT/sanitize.log 2>&1
echo "memcheck rc=$?"; grep -E "persistent|ERROR|sanitize:" $OUT/sanitize.log | tail -12
timeout ${EXP_S:-330} python3 scripts/exp_persistent.py --out $OUT/persistent.json --budget-s ${BUDGET_S:-250} 2>&1 | tee $OUT/exp.log | grep -v Warning | tail -40
