#!/usr/bin/env bash
# Prepared at the end of session 37 for session 38 (~3 min; GPU only; no carry). After call 1.
# Session 37 peeled the first K step of skinny's other paths for -pdl (CPU only): do they pay in a
# chain of pointwise -> GEMM kernels on Llama-1B's MLP shapes, as the GEMV strip did (1.24x
# cuBLAS)? scripts/exp_pdl_skinny.py: batched decode (M = 16, tl.dot), B K-contiguous and
# N-contiguous; M = 1 on an N-contiguous B (GPT-2's Conv1D layout); M = 4 GEMV strip. If a path
# gains with a PDL-aware predecessor (variant pdl) and loses little without (pdl_unaware), widen
# gemmtune.pdl.pdl_twin to it and measure it in a model (bench-model --phases decode_b16). pdl_nolaunch
# against pdl_unaware and plain tells why a -pdl strip is ~1 us slower after a PDL-unaware kernel
# (its code, or the PDL launch itself); ncu on the two if it is unclear.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
for spec in "16 col skinny:BM16-BN64-BK256-SK1-S4-W4-dot-det" "16 col skinny:BM16-BN32-BK512-SK1-S4-W4-dot-det" \
            "16 row skinny:BM16-BN64-BK256-SK1-S4-W4-dot-det" "1 row skinny:BM1-BN64-BK128-SK1-S1-W4-core-det" \
            "4 col skinny:BM4-BN4-BK256-SK1-S1-W4-core-det" "1 col skinny:BM1-BN4-BK1024-SK1-S1-W4-core-det"; do
  set -- $spec
  d=$OUT/m$1_$2_$(echo $3 | tr ':' '_')
  timeout 60 python3 scripts/exp_pdl_skinny.py $d --m $1 --layout $2 --config $3 2>&1 | tail -5
done
