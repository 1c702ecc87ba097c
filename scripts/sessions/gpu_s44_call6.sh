#!/usr/bin/env bash
# Session 44, call 6 (GPU only; no carry; ~2 min). The entry point now pre-starts a multi-shape
# tune's compile workers beside its benchmark worker (gemmtune_entry.spawn.prestart_compile_count),
# niced from their first instruction. Call 5's traces: a 12-shape `tune --fast` waited ~1 s for its
# first shape's compiles, its compile workers ready 2.7-3.3 s after the benchmark worker. Four runs
# alternating GEMMTUNE_PRESTART_COMPILE=1/0 (the first pays this fresh machine's one-time Triton
# driver build), each a fresh store, wall time of the whole process, traced.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
i=0
for pc in 1 0 1 0 1 0; do
  i=$((i+1)); rm -rf /tmp/tr$i
  t0=$(date +%s.%N)
  GEMMTUNE_PRESTART_COMPILE=$pc GEMMTUNE_WORKER_TRACE=/tmp/tr$i timeout 150 python3 -m gemmtune_entry tune --preset public \
    --groups decode,odd --fast --store /tmp/s$i.sqlite --out /tmp/t$i.json > /tmp/l$i.log 2>&1
  rc=$?; t1=$(date +%s.%N)
  echo "run $i prestart_compile=$pc rc=$rc process wall $(python3 -c "print(round($t1-$t0,2))") s; $(tail -1 /tmp/l$i.log)"
  python3 scripts/worker_trace.py /tmp/tr$i > $OUT/trace$i.txt 2>&1
  grep -E "shape_done|wait_compiles" $OUT/trace$i.txt | head -4
done
tar czf $OUT/s44c6.tgz -C /tmp tr1 tr2 tr3 tr4 tr5 tr6 l1.log l2.log l3.log l4.log l5.log l6.log
