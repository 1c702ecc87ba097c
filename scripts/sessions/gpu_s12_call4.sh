#!/usr/bin/env bash
# Session 12, device call 4 (one GPU; carry .whl): the deterministic split-K's new SPLIT_MODE 3 under
# the GPU tests, the determinism check and compute-sanitizer; then #19's single-shape figures.
set -u
source scripts/device_env.sh
record_env lightgbm
mkdir -p $OUT/r
XD=""; python3 -c "import xdist" 2>/dev/null && XD="-n 12"
timeout ${TEST_S:-170} python3 -m pytest -q -x $XD -p no:cacheprovider tests/test_gpu.py tests/test_kernels.py \
  tests/test_skinny.py > $OUT/r/tests.log 2>&1
echo "tests ($XD) rc=$?"; grep -E "^FAILED|passed|failed" $OUT/r/tests.log | tail -6
timeout 60 python3 scripts/determinism_check.py > $OUT/r/determinism.log 2>&1; echo "determinism rc=$?"; tail -8 $OUT/r/determinism.log
timeout 120 compute-sanitizer --tool memcheck python3 scripts/sanitize_kernels.py splitk > $OUT/r/sanitize.log 2>&1
echo "memcheck rc=$?"; tail -3 $OUT/r/sanitize.log
mkdir -p $OUT/single
OUT=$OUT/single timeout ${SINGLE_S:-230} bash scripts/single_shape_fast.sh > $OUT/r/single.log 2>&1; echo "single rc=$?"
cat $OUT/single/single_shape.txt
rm -f $OUT/single/*.sqlite
tar -czf $OUT/r.tgz -C $OUT r single && rm -rf $OUT/r $OUT/single
