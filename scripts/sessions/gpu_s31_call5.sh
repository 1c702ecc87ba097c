#!/usr/bin/env bash
# Session 31, call 5: the fuse tests after call 4's fixes (capture --fuse on transformers 5.17,
# patch(fuse=True), thread-safe rounds, tensor-subclass inputs), and the patched-model GPU tests
# (patch's signature and warnings changed). GPU only; no carry.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_fuse.py tests/test_capture.py \
  tests/test_eager.py tests/test_modeltune.py tests/test_hf_archs.py -k "fuse or gpu or eager or patch" > $OUT/tests.txt 2>&1
echo "tests rc=$?"; grep -E "FAILED|passed|failed" $OUT/tests.txt | tail -6
