#!/usr/bin/env bash
# Issue #19: single-shape tuning as a user runs it, one process per shape: `gemmtune tune --fast`
# cold (its own worker start-up), `--fast` against a warm `gemmtune worker --serve` pool, and
# torch.compile max-autotune (no cudagraphs) of `a @ b`. Wall time of each whole process.
# Both gemmtune runs go through the `gemmtune` command's entry point, as the console script does
# (gemmtune_entry: the worker started before torch's import, and gemmtune's bytecode cache where
# Python keeps none). Where that cache applies, max-autotune's process gets the same prefix
# (PYTHONPYCACHEPREFIX), so that no side gains from bytecode the other has to compile.
#   OUT=dir bash scripts/single_shape_fast.sh            (GPU only; carry .whl for lightgbm)
set -u
source "$(dirname "$0")/device_env.sh"   # the carried wheels, this tree first on PYTHONPATH, $OUT
record_env lightgbm
SHAPES=${SHAPES:-"2048x6144x4096:bf16 512x4096x4096:bf16 16x6144x4096:bf16 1000x1000x1000:bf16 64x64x65536:bf16"}
sock=/tmp/gemmtune-$$.sock
pyc=$(python3 -c "from gemmtune_entry.bytecode import prefix_for_this_machine as p; print(p() or '')")
echo "gemmtune's bytecode prefix: ${pyc:-none (Python keeps the bytecode itself)}"
if [ -n "$pyc" ]; then mat_env=(env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX="$pyc"); else mat_env=(env); fi
# Every process compiles from an empty cache of its own (the server's is its own too), so no
# run profits from another's compiled kernels: the comparison is of cold tuning paths.
# SHARED_CACHES=1: a user's second day instead. Each side keeps one Triton (and Inductor) cache
# across the shapes, empty at the start, so a shape's process may load kernels compiled for the
# shapes before it (same config, same specialisation), never its own shape's.
TRITON_CACHE_DIR=/tmp/tc-warm-$$ python3 -m gemmtune.cli worker --serve $sock 2> "$OUT/server.log" &
srv=$!
for _ in $(seq 120); do [ -S $sock ] && break; sleep 1; done
printf "%-22s %10s %10s %12s\n" shape cold_s warm_s maxautotune_s | tee "$OUT/single_shape.txt"
for s in $SHAPES; do
  tag=$s; [ "${SHARED_CACHES:-0}" = 1 ] && tag=shared
  export TRITON_CACHE_DIR=/tmp/tc-cold-$$-$tag TORCHINDUCTOR_CACHE_DIR=/tmp/ti-$$-$tag
  t0=$(date +%s.%N); python3 -m gemmtune_entry tune --shape $s --fast --store "$OUT/cold.sqlite" -q > /dev/null 2>&1; t1=$(date +%s.%N)
  # The gemmtune command's entry point, as the console script runs it: it forwards a tune --server
  # to the server without importing torch here (gemmtune_entry).
  python3 -m gemmtune_entry tune --shape $s --fast --store "$OUT/warm.sqlite" --server $sock -q > /dev/null 2>&1; t2=$(date +%s.%N)
  export TRITON_CACHE_DIR=/tmp/tc-mat-$$-$tag
  "${mat_env[@]}" python3 scripts/maxautotune_once.py "$s" > /dev/null 2>&1
  t3=$(date +%s.%N)
  # (no bc on the GPU image: the arithmetic is Python's)
  python3 -c "import sys; s,a,b,c,d = sys.argv[1:]; a,b,c,d = map(float, (a,b,c,d)); print(f'{s:22s} {b-a:10.1f} {c-b:10.1f} {d-c:12.1f}')" \
    $s $t0 $t1 $t2 $t3 | tee -a "$OUT/single_shape.txt"
done
kill -TERM $srv; wait $srv 2>/dev/null  # (a background job ignores SIGINT)
