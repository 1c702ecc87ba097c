#!/usr/bin/env bash
# Session 11, third device call (one GPU, nothing carried): 1. the GPU tests of the tiled kernel
# after reverting the prologue change and adding the index-form K loop (INDEXED_K); 2. the parity
# harness with the carried and the indexed K loop side by side (plain and static), small and large
# shapes; 3. Nsight Compute's per-instruction stall samples (SASS) of ours and Inductor's template
# on 512x4096x4096, where ours stalls on an L1TEX scoreboard that Inductor's does not.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT/r"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
XD=""; python3 -c "import xdist" 2>/dev/null && XD="-n 8"
PYTHONPATH=$PWD/src timeout ${TEST_S:-200} python3 -m pytest -q -x $XD -p no:cacheprovider tests/test_tile_kloop.py \
  tests/test_tile_cstore.py tests/test_static.py tests/test_epilogue.py tests/test_pad.py tests/test_kernels.py > $OUT/r/tests.log 2>&1
echo "tests ($XD) rc=$?"; tail -3 $OUT/r/tests.log
for part in small large; do
  timeout 200 python3 scripts/parity_inductor.py --$part --static --indexed-k --limit ${PARITY_N:-8} \
    --out $OUT/r/parity-$part.json > $OUT/r/parity-$part.log 2>&1
  echo "== $part rc=$?"; grep -E "ratio" $OUT/r/parity-$part.log | sed -E 's/ +/ /g' | cut -c1-230
done
PYTHONPATH=$PWD/src timeout 120 ncu --profile-from-start off --set full --import-source no --page source --print-source sass \
  --csv -k regex:"_tiled_mm_kernel|triton_tem" \
  python3 scripts/parity_ncu.py 512x4096x4096:bfloat16:BM64-BN128-BK64-S4-W4-G8 > $OUT/r/ncu-src.csv 2> $OUT/r/ncu-src.err
echo "ncu rc=$?"; tail -2 $OUT/r/ncu-src.err; wc -c $OUT/r/ncu-src.csv
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
