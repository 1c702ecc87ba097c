#!/usr/bin/env bash
# Prepared in session 39 for session 40 (~2 min; GPU only; no carry). After call 1.
# The -flat one-row strips in a decode step's kind of chain, with and without PDL:
# scripts/exp_pdl_skinny.py (32 pointwise -> GEMM pairs on Llama-1B's MLP shapes, CUDA graph,
# interleaved, cuBLAS beside). The 3-D BN4-BK1024-W4 strip is the reference (session 38: its -pdl
# twin 1.066x plain, 1.138x cuBLAS, 58% of the floor); BN4-BK1024-W2 is the tile a plain 2-D GEMV
# won with (session 39), in both layouts. If -flat gains here and in call 1, pdl=True twins it as
# any GEMV strip (gemmtune.pdl.pdl_twin keeps the flag), once a space offers it.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
for cfg in skinny:BM1-BN4-BK1024-SK1-S1-W4-core-det skinny:BM1-BN4-BK1024-SK1-S1-W2-core-det \
           skinny:BM1-BN4-BK1024-SK1-S1-W2-core-det-flat skinny:BM1-BN2-BK2048-SK1-S1-W2-core-det-flat; do
  d=$OUT/m1_col_$(echo $cfg | tr ':' '_')
  timeout 60 python3 scripts/exp_pdl_skinny.py $d --m 1 --layout col --config $cfg 2>&1 | tail -5
done
