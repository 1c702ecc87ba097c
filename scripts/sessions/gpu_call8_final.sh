#!/usr/bin/env bash
# Device call 8 of 2026-11-24: GPU tests after the KernelFamily refactor and the pad+ change,
# single-shape --fast (cold, warm server) against max-autotune, the odd group with pad+ writing
# straight into the output.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/env.txt
timeout ${TESTS_S:-100} python3 -m pytest -q -m gpu tests/test_families.py tests/test_eager.py tests/test_persistent.py \
  tests/test_epilogue.py -k "families or eager or loop_knobs or (default_space and bf16 and 4096x4096) or padded or prepared" \
  -p no:cacheprovider > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; tail -3 $OUT/gpu_tests.log
SHAPES="2048x6144x4096:bf16 16x6144x4096:bf16 1000x1000x1000:bf16" timeout ${SINGLE_S:-150} bash scripts/single_shape_fast.sh
timeout ${BENCH_S:-110} python3 -m gemmtune.cli bench --groups odd --skip-inductor --skip-tunableop --out $OUT/odd \
  > $OUT/odd.log 2>&1
echo "odd bench rc=$?"; grep -E "^odd " $OUT/odd.log | sed 's/  */ /g' | cut -c1-200
rm -f $OUT/odd/*.png
