#!/usr/bin/env bash
# Device call 2 of session 4 (2026-11-24): the fp8 bench group again after verify's per-element
# ulp slack (call 1: cuBLASLt and every kernel failed the max-element check on the two largest
# row-scaled shapes); #19 single-shape --fast in a warm process after the host-side cdiv fix.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > $OUT/env.txt 2>&1
timeout ${BENCH_S:-200} python3 -m gemmtune.cli bench --groups fp8 --skip-inductor --skip-tunableop \
  --extra-modes auto,top20 --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "^fp8 |candidates in" $OUT/bench.log | sed 's/  */ /g' | cut -c1-300
rm -f $OUT/bench/*.png
sock=/tmp/gt-$$.sock
TRITON_CACHE_DIR=/tmp/tc-srv python3 -m gemmtune.cli worker --serve $sock 2> $OUT/server.log &
srv=$!
for _ in $(seq 120); do [ -S $sock ] && break; sleep 1; done
timeout ${INPROC_S:-200} python3 scripts/single_shape_inproc.py $sock $OUT > $OUT/inproc.log 2>&1
echo "inproc rc=$?"; head -8 $OUT/inproc.log | cut -c1-400
kill -INT $srv; wait $srv 2>/dev/null
