#!/usr/bin/env bash
# Issue #19, warm one-shape tuning: `gemmtune tune --fast --server SOCK` forwarded to a warm
# `gemmtune worker --serve`, against two servers: one that compiles a shape's candidates together
# on threads (bench.measure.precompile, the default) and one with GEMMTUNE_PRECOMPILE=0; then
# max-autotune of `a @ b` in its own process. Wall time of each whole client process.
# Each server and each max-autotune has an empty Triton cache of its own at the start.
# OFF_ENV: what the second server runs without (default GEMMTUNE_PRECOMPILE=0; session 17 used
# GEMMTUNE_SERVER_WARMUP=0: a server whose workers skip their warm-up).
#   OUT=dir bash scripts/warm_precompile.sh            (GPU only; carry .whl for lightgbm)
set -u
source "$(dirname "$0")/device_env.sh"
SHAPES=${SHAPES:-"2048x6144x4096:bf16 512x4096x4096:bf16 16x6144x4096:bf16 1000x1000x1000:bf16 64x64x65536:bf16"}
on=/tmp/gt-on-$$.sock; off=/tmp/gt-off-$$.sock
TRITON_CACHE_DIR=/tmp/tc-on-$$ python3 -m gemmtune_entry worker --serve $on 2> "$OUT/server-on.log" &
s1=$!
env ${OFF_ENV:-GEMMTUNE_PRECOMPILE=0} TRITON_CACHE_DIR=/tmp/tc-off-$$ python3 -m gemmtune_entry worker --serve $off 2> "$OUT/server-off.log" &
s2=$!
# Both servers ready: their "serving" line comes after every warm-up they do.
for _ in $(seq 240); do grep -q serving "$OUT/server-on.log" 2>/dev/null && grep -q serving "$OUT/server-off.log" 2>/dev/null && break; sleep 0.5; done
sleep 1
grep -h serving "$OUT/server-on.log" "$OUT/server-off.log"
stamp() { python3 -c 'import time; print(f"{time.time():.3f}")'; }
printf "%-22s %10s %10s %12s\n" shape warm_s warm_off_s maxautotune_s | tee "$OUT/warm.txt"
for s in $SHAPES; do
  t0=$(stamp)
  python3 -m gemmtune_entry tune --shape $s --fast --store "$OUT/on.sqlite" --server $on --summary "$OUT/sum-on-${s%%:*}.json" -q > "$OUT/log-on-${s%%:*}.txt" 2>&1
  t1=$(stamp)
  python3 -m gemmtune_entry tune --shape $s --fast --store "$OUT/off.sqlite" --server $off --summary "$OUT/sum-off-${s%%:*}.json" -q > "$OUT/log-off-${s%%:*}.txt" 2>&1
  t2=$(stamp)
  TRITON_CACHE_DIR=/tmp/tc-mat-$$-$s TORCHINDUCTOR_CACHE_DIR=/tmp/ti-mat-$$-$s python3 scripts/maxautotune_once.py "$s" > /dev/null 2>&1
  t3=$(stamp)
  python3 -c "import sys; s,a,b,c,d = sys.argv[1:]; a,b,c,d = map(float, (a,b,c,d)); print(f'{s:22s} {b-a:10.2f} {c-b:10.2f} {d-c:12.2f}')" \
    $s $t0 $t1 $t2 $t3 | tee -a "$OUT/warm.txt"
done
kill -TERM $s1 $s2; wait $s1 $s2 2>/dev/null
