#!/usr/bin/env bash
# Prepared in session 39 for session 40 (~4-5 min; GPU only; no carry). Run FIRST.
#
# skinny's one-row strips now come in two layouts (kernels.skinny; SkinnyConfig.flat): the 3-D
# [1, BN, BK] product, whose A broadcast puts 4-10 barriers in the K loop (SASS, sm_90), and
# -flat's 2-D [BN, BK] tile with none. Session 39 measured a plain 2-D GEMV beating skinny's best
# 3-D strip on all 12 decode GEMVs (1 x 16384 x 2048: 17.7 us against 19.7, cuBLAS 18.3), yet the
# 3-D layout won at other tiles, so both are configs. No space offers -flat yet, and nothing of it
# has run on a GPU:
# 1. tests/test_skinny.py in full on the GPU (fp64 checks of both layouts, bf16 included), and
#    compute-sanitizer memcheck over the one-row tests and the -pdl peels.
# 2. exp_gemv_wide: the default space's best (3-D strips) and the sweep's (both layouts of every
#    tile), against cuBLAS, on 12 decode GEMVs; exp_gemv_kernel: the plain 2-D kernel, as the
#    reference, in the same run.
# If -flat wins where the script did: put its winning tiles in the M = 1 default space beside the
# 3-D strips (--fast times every GEMV tile of that space: topk.GEMV_PICKS and its tests), give the
# rankers a feature for the layout (features_row has none: a strip and its -flat twin would tie),
# collect decode GEMVs, and run bench-model decode_b1 (gpu_s39_call4.sh) to see it in a model.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 150 python3 -m pytest -q -n 8 tests/test_skinny.py -p no:cacheprovider > $OUT/tests_skinny.txt 2>&1
echo "test_skinny (GPU) rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/tests_skinny.txt | tail -5
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 python3 -m pytest -q tests/test_skinny.py \
  -k "one_row or pdl_path or flat" -p no:cacheprovider > $OUT/sanitizer_flat.txt 2>&1
echo "memcheck (one_row, pdl_path, flat) rc=$?"; grep -E "ERROR SUMMARY|passed|failed" $OUT/sanitizer_flat.txt | tail -3
timeout 180 python3 scripts/exp_gemv_wide.py --out $OUT/gemv_wide_flat.json --budget-s 150 > $OUT/gemv_wide_flat.log 2>&1
echo "exp_gemv_wide rc=$?"; grep -v "^#.*precompiled" $OUT/gemv_wide_flat.log | sed -E 's/ \| next:.*//' | tail -13
timeout 100 python3 scripts/exp_gemv_kernel.py --out $OUT/gemv_kernel.json --budget-s 80 > $OUT/gemv_kernel.log 2>&1
echo "exp_gemv_kernel rc=$?"; tail -12 $OUT/gemv_kernel.log
