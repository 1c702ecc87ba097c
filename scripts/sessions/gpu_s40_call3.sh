#!/usr/bin/env bash
# Session 40, call 3 (~5 min; GPU only; no carry).
# Call 1 (this session) ran the -flat one-row strips for the first time: the sweep's best was a
# -flat strip on 8 of 12 decode GEMVs, yet exp_gemv_kernel's "reduce" design (the [BN, BK] tile
# summed over K at every step, one fp32 a column held) beat both skinny layouts where the gap to
# cuBLAS is (1 x 16384 x 2048 17.1 us against -flat's 18.7; Qwen2's LM head 64.4 against 73.0).
# -flat-sum (SkinnyConfig.sum_each) is that design inside skinny: 64 registers at BN4-BK1024-W2
# where -flat holds 131 and the 3-D strip 153 (sm_90, compiled offline). Nothing of it has run on
# a GPU:
# 1. the one-row, -flat and -pdl tests of tests/test_skinny.py on the GPU (bf16 included), and
#    compute-sanitizer memcheck over the same;
# 2. exp_gemv_wide: the three layouts of every tile (237 strips on the deep shapes), with
#    exp_gemv_kernel's plain kernels as the reference in the same run;
# 3. exp_pdl_skinny's chain (32 pointwise -> GEMV pairs, Llama-1B's MLP shapes) with -flat-sum
#    tiles, with and without PDL, beside the 3-D BN4-BK1024-W4 strip and cuBLAS.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 120 python3 -m pytest -q -n 8 tests/test_skinny.py -k "one_row or flat or pdl" -p no:cacheprovider > $OUT/tests_skinny.txt 2>&1
echo "test_skinny one_row/flat/pdl (GPU) rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/tests_skinny.txt | tail -5
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest -q tests/test_skinny.py \
  -k "one_row or pdl_path or flat" -p no:cacheprovider > $OUT/sanitizer_flat.txt 2>&1
echo "memcheck (one_row, pdl_path, flat) rc=$?"; grep -E "ERROR SUMMARY|passed|failed" $OUT/sanitizer_flat.txt | tail -3
timeout 260 python3 scripts/exp_gemv_wide.py --out $OUT/gemv_wide_sum.json --budget-s 230 > $OUT/gemv_wide_sum.log 2>&1
echo "exp_gemv_wide rc=$?"; grep -v "^#.*precompiled" $OUT/gemv_wide_sum.log | sed -E 's/ \| next:.*//' | tail -13
timeout 80 python3 scripts/exp_gemv_kernel.py --out $OUT/gemv_kernel.json --budget-s 60 > $OUT/gemv_kernel.log 2>&1
echo "exp_gemv_kernel rc=$?"; tail -12 $OUT/gemv_kernel.log | sed -E 's/ \| persist.*//'
for cfg in skinny:BM1-BN4-BK1024-SK1-S1-W4-core-det skinny:BM1-BN2-BK2048-SK1-S3-W2-core-det-flat-sum \
           skinny:BM1-BN4-BK1024-SK1-S1-W2-core-det-flat-sum skinny:BM1-BN2-BK1024-SK1-S1-W4-core-det-flat-sum; do
  d=$OUT/m1_col_$(echo $cfg | tr ':' '_')
  echo "== $cfg"; timeout 60 python3 scripts/exp_pdl_skinny.py $d --m 1 --layout col --config $cfg 2>&1 | tail -5
done
