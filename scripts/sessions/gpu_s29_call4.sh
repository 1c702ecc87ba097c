#!/usr/bin/env bash
# Session 29, call 4: where the un-graphed Llama-1B decode step's extra host time with the patch goes
# (call 3: 0.972x eager, paired rounds, quartiles 0.957-0.990). scripts/diag_eager_host.py: eager,
# an unpatched deep copy and the patched copy interleaved, then cProfile of eager and patched steps.
# GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 300 python3 scripts/diag_eager_host.py --model llama-1b --out $OUT/diag > $OUT/diag.log 2>&1
echo "diag rc=$?"; grep -v "^E11\|^W11" $OUT/diag.log | tail -60
