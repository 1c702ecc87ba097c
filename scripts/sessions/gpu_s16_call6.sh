#!/usr/bin/env bash
# Session 16, call 6: cold one-shape --fast against max-autotune with a Python bytecode cache, as an
# installed torch has. The GPU machine sets PYTHONDONTWRITEBYTECODE=1 and its torch has no
# __pycache__, so every process there compiles torch's modules from source (2.15 s of 955 modules in
# call 3's profile); call 5's PYTHONPYCACHEPREFIX alone did nothing for that reason. Here the flag is
# unset, the cache goes to a prefix, and one run of each process fills it first. Both sides get it.
# GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=/tmp/pyc-$$
python3 scripts/maxautotune_once.py 64x64x64:bf16 > /dev/null 2>&1
python3 -m gemmtune_entry tune --shape 64x64x64:bf16 --fast --store /tmp/pyc-warm.sqlite -q > /dev/null 2>&1
python3 -c "import sys, time; t=time.perf_counter(); import torch; print(f'import torch {time.perf_counter()-t:.2f} s with a bytecode cache (dont_write_bytecode={sys.flags.dont_write_bytecode})')" | tee $OUT/pyc.txt
mkdir -p $OUT/cold
OUT=$OUT/cold MODES=cold timeout ${COLD_S:-300} bash scripts/cold_timeline.sh > $OUT/cold.log 2>&1
echo "cold (bytecode cache) rc=$?"; cat $OUT/cold/cold.txt; grep -h "import\|context" $OUT/cold/parts.txt
tar czf $OUT/cold.tgz -C $OUT cold && rm -rf $OUT/cold
