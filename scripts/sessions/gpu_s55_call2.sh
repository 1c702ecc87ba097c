#!/usr/bin/env bash
# Session 55, call 2 (GPU only; no carry; ~9 min): the merged tree's -m gpu lane (after this session's
# prefetched-B addressing and the hunts of the CLI, reports, dispatch/normfold, collect/scaled_mm and the
# Inductor export), then #16's parity table on the rows the odd call leaves out (aligned and large rows,
# 4095^3 and the M = 1 head), same config as Inductor's template, 5 rounds, every form.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 240 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15
timeout $(( 420 - $(date +%s) + T0 )) python3 scripts/parity_inductor.py --large --static --indexed-k --wrap-odd --rounds 5 \
  --out $OUT/parity_large.json > $OUT/parity_large.log 2>&1
echo "parity large rc=$?"; grep -E "ratio|rror" $OUT/parity_large.log | sed -E 's/ \| ours \{.*//' | cut -c1-330
timeout $(( 575 - $(date +%s) + T0 )) python3 scripts/parity_inductor.py --small --static --indexed-k --wrap-odd --rounds 5 \
  --only 512x4096x4096,1024x1024x1024,1000x1000x1000,2048x4096x16,1x50257x768,4095x4095x4095 \
  --out $OUT/parity_small.json > $OUT/parity_small.log 2>&1
echo "parity small rc=$?"; grep -E "ratio|rror" $OUT/parity_small.log | sed -E 's/ \| ours \{.*//' | cut -c1-330
gzip -f $OUT/gpu_tests.txt
echo "call took $(( $(date +%s) - T0 )) s"
