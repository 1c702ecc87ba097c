#!/usr/bin/env bash
# Session 44, call 9 (GPU only; no carry; ~1.5 min). The benchmark worker's prewarm now also times
# cuBLAS once on a small problem (runner.PREWARM_PROBLEM) while the tuner plans: calls 4-6 put
# 0.74-0.98 s on the first shape's first cuBLAS measurement. A 12-shape `tune --fast` with
# GEMMTUNE_PREWARM_TIMING=1/0 alternating (run 1 pays the fresh machine's driver build), then a
# one-shape cold `tune --fast` the same way; whole-process wall times, traced.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
i=0
for spec in "1 many" "1 many" "0 many" "1 many" "0 many" "1 one" "0 one" "1 one" "0 one"; do
  set -- $spec; pw=$1; what=$2; i=$((i+1)); rm -rf /tmp/tr$i
  if [ "$what" = many ]; then args="--preset public --groups decode,odd"; else args="--shape 512x4096x4096:bf16"; fi
  t0=$(date +%s.%N)
  GEMMTUNE_PREWARM_TIMING=$pw GEMMTUNE_WORKER_TRACE=/tmp/tr$i timeout 120 python3 -m gemmtune_entry tune $args --fast \
    --store /tmp/s$i.sqlite --out /tmp/t$i.json > /tmp/l$i.log 2>&1
  rc=$?; t1=$(date +%s.%N)
  echo "run $i $what prewarm_timing=$pw rc=$rc process wall $(python3 -c "print(round($t1-$t0,2))") s; $(tail -1 /tmp/l$i.log)"
  python3 scripts/worker_trace.py /tmp/tr$i > $OUT/trace$i.txt 2>&1
  grep -E "prewarm |shape_done .*'shape': 0," $OUT/trace$i.txt | head -3
done
