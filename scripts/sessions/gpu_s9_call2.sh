#!/usr/bin/env bash
# Session 9, device call 2: the merged pad_copy kernel and split-K tile-major workspace, checked
# before they land: their GPU tests, compute-sanitizer memcheck (split-K and pad_copy) and racecheck
# (split-K), the pad-copy bench (Triton kernel vs the torch copies), and the parity harness with
# one shared output (--same-out: is the 1.08-1.14x gap to Inductor the kernel or the measurement?).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
timeout 150 python3 -m pytest -q -m gpu tests/ -k "splitk or pad or skinny" -p no:cacheprovider > $OUT/tests.log 2>&1
echo "gpu tests rc=$?"; tail -2 $OUT/tests.log
timeout 120 compute-sanitizer --tool memcheck python3 scripts/sanitize_kernels.py splitk,pad,skinny > $OUT/memcheck.log 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|sanitize:|WRONG" $OUT/memcheck.log
timeout 100 compute-sanitizer --tool racecheck python3 scripts/sanitize_kernels.py splitk > $OUT/racecheck.log 2>&1
echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|sanitize:|WRONG" $OUT/racecheck.log
timeout 100 python3 scripts/pad_copy_bench.py --out $OUT/pad.json > $OUT/pad.log 2>&1
echo "pad bench rc=$?"; tail -40 $OUT/pad.log | cut -c1-200
timeout ${PARITY_S:-120} python3 scripts/parity_inductor.py --small --static --same-out --limit ${PARITY_N:-3} --out $OUT/parity.json > $OUT/parity.log 2>&1
echo "parity rc=$?"; grep -v "^E1125\|select_algorithm\|Warning" $OUT/parity.log | tail -12 | cut -c1-250
