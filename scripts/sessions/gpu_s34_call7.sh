#!/usr/bin/env bash
# Session 34, call 7 (~2.5 min; GPU only; no carry): where eager + patch's ~4% at decode goes
# (scripts/exp_eager_overhead.py: the model, a deep copy as control, the patched copy; cProfile).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 200 python3 scripts/exp_eager_overhead.py --out $OUT/eager_overhead.json > $OUT/eager_overhead.log 2>&1
echo "exp rc=$?"; grep -v "^E11\|^W11" $OUT/eager_overhead.log | grep -E "step ms|cprofile|layer|rror" | tail -8
