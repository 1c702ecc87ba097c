#!/usr/bin/env bash
# Session 37, after call 3 (the -pdl twins of the tuned winners: 0.979x without Inductor's PDL,
# 1.033x with it; call 2: a -pdl strip after a kernel that knows no PDL is ~1 us slower). Does
# serving EVERY M=1 GEMM on a K-contiguous weight by a -pdl skinny strip (cuBLAS's shapes too)
# pay when Inductor's kernels launch it early? Llama-1B decode b1, default compile, 4 variants.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
unset GEMMTUNE_GEMV_HANDBACK_MIN_BYTES
timeout 560 python3 scripts/exp_pdl_model.py --out $OUT/pdl_all.json --inductor-pdl --pdl-all \
  --only tuned,tuned+inductor_pdl,pdl_all,pdl_all+inductor_pdl > $OUT/pdl_all.log 2>&1
echo "exp_pdl_model --pdl-all rc=$?"; grep -v "^E11\|^W11" $OUT/pdl_all.log | grep -E "fuse|pdl_all:|first calls|interleaved|rror" | tail -10
