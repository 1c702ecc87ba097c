#!/usr/bin/env bash
# Prepared in session 40 for session 41 (~6-7 min; GPU only; no carry). After call 1.
# Batched decode (M = 2 and 4) on a Linear's weight: skinny's -flat-sum strips over BLOCK_M rows
# (session 40: `_flat_rows`, each row of A a [BK] vector multiplied into B's tile in turn, one
# fp32 a column and row held; 54 registers at BM4-BN2-BK1024-W4 where the 3-D strip of that tile
# holds 128 and the default space's BM4-BN4-BK512-W2 216, sm_90, offline) against the default
# space's one-slice strips (3-D GEMV tiles and 16-wide tl.dot strips) and cuBLAS, on the 12 decode
# GEMVs of exp_gemv_wide. It is reached by choice id only; nothing of it has run on a GPU, so
# first the GPU tests of the one-row, -flat and -pdl paths (they include BM4 and BM8 -flat-sum)
# and memcheck over them. If -flat-sum wins at M = 2-4: put its tiles in the default space there
# (skinny_spec.one_row_gemv says M = 1 today) and re-run bench on M = 2-4 decode layers.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 120 python3 -m pytest -q -n 8 tests/test_skinny.py -k "one_row or flat or pdl or fp64 or odd_views" -p no:cacheprovider > $OUT/tests_skinny.txt 2>&1
echo "test_skinny (GPU) rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/tests_skinny.txt | tail -5
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest -q tests/test_skinny.py \
  -k "flat or pdl_path" -p no:cacheprovider > $OUT/sanitizer_flat.txt 2>&1
echo "memcheck (flat, pdl_path) rc=$?"; grep -E "ERROR SUMMARY|passed|failed" $OUT/sanitizer_flat.txt | tail -3
for m in 2 4; do
  timeout 150 python3 scripts/exp_gemv_wide.py --m $m --out $OUT/gemv_wide_m$m.json --budget-s 130 > $OUT/gemv_wide_m$m.log 2>&1
  echo "exp_gemv_wide --m $m rc=$?"; grep -v "^#.*precompiled" $OUT/gemv_wide_m$m.log | sed -E 's/ \| next:.*//' | tail -13
done
# In a decode chain at M = 4 (exp_pdl_skinny.py: 32 pointwise -> GEMM pairs on Llama-1B's MLP shapes,
# one CUDA graph, interleaved, cuBLAS beside), with and without PDL: the default space's 3-D GEMV
# tile at M = 4 against -flat-sum over 4 rows.
for cfg in skinny:BM4-BN2-BK1024-SK1-S1-W4-core-det skinny:BM4-BN2-BK1024-SK1-S1-W4-core-det-flat-sum \
           skinny:BM4-BN2-BK2048-SK1-S1-W4-core-det-flat-sum; do
  echo "== $cfg"; timeout 60 python3 scripts/exp_pdl_skinny.py $OUT/m4_col_$(echo $cfg | tr ':' '_') --m 4 --layout col --config $cfg 2>&1 | tail -5
done
