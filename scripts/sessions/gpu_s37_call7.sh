#!/usr/bin/env bash
# Session 37: the product path of -pdl serving on a GPU (tests/test_pdl.py's gpu test:
# patch(pdl=True), save/load, torch.compile with Inductor's PDL on, a CUDA graph, against fp64).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 200 python3 -m pytest -q -m gpu tests/test_pdl.py -p no:cacheprovider > $OUT/gpu_pdl_tests.txt 2>&1
echo "pdl gpu tests rc=$?"; tail -15 $OUT/gpu_pdl_tests.txt
