#!/usr/bin/env bash
# Session 44, call 5 (GPU only; no carry; ~2 min). Call 4's worker trace put a 12-shape
# `tune --fast`'s first candidate 2.7 s after the pre-started benchmark worker was ready, with the
# worker idle (this machine has no lightgbm, so not its import). The tuner now traces its own steps
# too (tuning.tuner.tuner_trace): the same run again, and a cold one-shape --fast for comparison.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
run() {  # name, tune arguments...
  local name=$1; shift
  rm -rf /tmp/trace_$name
  GEMMTUNE_WORKER_TRACE=/tmp/trace_$name timeout 150 python3 -m gemmtune_entry tune "$@" --fast \
    --store /tmp/ft_$name.sqlite --out /tmp/ft_$name.json > /tmp/ft_$name.log 2>&1
  echo "tune $name rc=$?"; tail -1 /tmp/ft_$name.log
  python3 scripts/worker_trace.py /tmp/trace_$name > $OUT/trace_$name.txt 2>&1
  grep -v "^-- worker-.*compiles" $OUT/trace_$name.txt | head -45 | cut -c1-230
}
run twelve --preset public --groups decode,odd
run one --shape 512x4096x4096:bf16
tar czf $OUT/s44c5.tgz -C /tmp trace_twelve trace_one ft_twelve.log ft_one.log
