#!/usr/bin/env bash
# Prepared at the end of session 36 for session 37 (~4 min; GPU only; no carry). After call 1.
# scripts/exp_pdl.py at the two best strips of session 36 (1.24x cuBLAS on the norm -> GEMV chain),
# the first with --single: skinny's default GEMV strips and their -pdl twins timed one by one the
# tuner's way (back to back), and after a spacer kernel that knows no PDL (what a fair tuner
# timing of a -pdl config could be), per Llama-1B decode layer.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 200 python3 scripts/exp_pdl.py $OUT/pdl_bn4_bk2048 --bn 4 --bk 2048 --single 2>&1 | tail -20
timeout 60 python3 scripts/exp_pdl.py $OUT/pdl_bn2_bk2048 --bn 2 --bk 2048 2>&1 | tail -6
