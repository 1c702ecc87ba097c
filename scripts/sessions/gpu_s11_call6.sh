#!/usr/bin/env bash
# Session 11, sixth device call (one GPU, nothing carried): the GPU tests of the tiled kernel after the
# K-loop refactor (INDEXED_K helpers) and of the dispatcher's cuBLAS hand-back, all of them (no -x).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
XD=""; python3 -c "import xdist" 2>/dev/null && XD="-n 12"
timeout ${TEST_S:-170} python3 -m pytest -q $XD -p no:cacheprovider tests/test_tile_kloop.py tests/test_tile_cstore.py \
  tests/test_static.py tests/test_epilogue.py tests/test_pad.py tests/test_kernels.py tests/test_dispatch.py > $OUT/tests.log 2>&1
echo "tests ($XD) rc=$?"; grep -E "^FAILED|passed|failed" $OUT/tests.log | tail -12
