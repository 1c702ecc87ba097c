#!/usr/bin/env bash
# Device call 2 of 2026-11-24 (session 3): #19 single-shape --fast inside a warm Python process
# (warm worker pool) against max-autotune in the same process, with a profile; #17 Llama-3.2-1B
# decode (b1) under torch.compile, patch + compile and max-autotune (its compile time).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
sock=/tmp/gt-$$.sock
TRITON_CACHE_DIR=/tmp/tc-srv python3 -m gemmtune.cli worker --serve $sock 2> $OUT/server.log &
srv=$!
for _ in $(seq 120); do [ -S $sock ] && break; sleep 1; done
timeout ${INPROC_S:-170} python3 scripts/single_shape_inproc.py $sock $OUT > $OUT/inproc.log 2>&1
echo "inproc rc=$?"; head -8 $OUT/inproc.log | cut -c1-400
kill -INT $srv; wait $srv 2>/dev/null
mkdir -p $OUT/llama
OUT=$OUT/llama MODELS=llama-1b PHASES=decode_b1 MODES=compile,patch_compile,max_autotune \
  timeout ${LLAMA_S:-390} bash scripts/gpu_bench_model.sh > /dev/null 2>&1
echo "llama rc=$?"; grep -E "^llama|rror|compile" $OUT/llama/bench-model.log | tail -20
rm -f $OUT/llama/bench-model.md $OUT/llama/*.png
