#!/usr/bin/env bash
# Prepared at the end of session 36 for session 37 (~7 min; GPU only; no carry). After calls 1 and 2
# pass. Do -pdl GEMV strips speed up Llama-1B's compiled decode step? scripts/exp_pdl_model.py:
# fused + tuned (--fast) once; one copy patched with the winners, one with each one-slice GEMV
# strip swapped for its -pdl twin; each compiled (default Inductor) with Inductor's own PDL off
# and on (TORCHINDUCTOR_ENABLE_PDL), captured in CUDA graphs, checked against eager, profiled,
# replayed interleaved. max-autotune is not in this run (its compile alone takes ~6 min): the
# question is the -pdl twins against the same winners without PDL, side by side.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
unset GEMMTUNE_GEMV_HANDBACK_MIN_BYTES
timeout 560 python3 scripts/exp_pdl_model.py --out $OUT/pdl_model.json --inductor-pdl > $OUT/pdl_model.log 2>&1
echo "exp_pdl_model rc=$?"; grep -v "^E11\|^W11" $OUT/pdl_model.log | grep -E "fuse|first calls|interleaved|rror" | tail -10
