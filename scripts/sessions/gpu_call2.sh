#!/usr/bin/env bash
# Device call: GPU tests (skinny + the shared split-K epilogue), compute-sanitizer on the atomic /
# workspace paths, then the skinny sweep with deeper pipelines.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
timeout 300 python3 -m pytest -q -x -m gpu tests/test_skinny.py tests/test_gpu.py -p no:cacheprovider 2>&1 | tee $OUT/gpu_tests.log | tail -15
timeout 150 compute-sanitizer --tool memcheck --print-limit 20 python3 scripts/sanitize_kernels.py > $OUT/sanitize.log 2>&1
echo "memcheck rc=$?"; tail -12 $OUT/sanitize.log
BUDGET=${BUDGET_S:-150} python3 scripts/exp_skinny.py --out $OUT/skinny2.json --budget-s ${BUDGET_S:-150} 2>&1 | tee $OUT/exp2.log
