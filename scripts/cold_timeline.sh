#!/usr/bin/env bash
# Issue #19: where a cold one-shape `gemmtune tune --fast` spends its seconds (GPU only; carry .whl).
# Each step is a whole process with empty Triton and Inductor caches of its own:
#   1. the parts: `import torch`, `import gemmtune.cli`, a CUDA context, a benchmark worker's
#      start-up (spawn -> ready -> device info), one cold compile of the top-1 candidate;
#   2. the cold tune as a user runs it (`gemmtune_entry`, what the console script runs), with
#      GEMMTUNE_PRESTART=0, with --in-process, and once more under cProfile (the parent's view);
#      each with --summary (start-up, the tune call's wall time);
#   3. max-autotune of `a @ b` in its own process, the comparison.
#   inprof: --in-process under cProfile (the whole tune in one profiled process).
#   noprecompile: GEMMTUNE_PRECOMPILE=0 (each candidate compiled just before its timing).
#   OUT=dir SHAPES="512x4096x4096:bf16 ..." bash scripts/cold_timeline.sh
set -u
source "$(dirname "$0")/device_env.sh"
record_env lightgbm
SHAPES=${SHAPES:-"2048x6144x4096:bf16 512x4096x4096:bf16 16x6144x4096:bf16 1000x1000x1000:bf16 64x64x65536:bf16"}
fresh() { export TRITON_CACHE_DIR=/tmp/tc-$$-$1 TORCHINDUCTOR_CACHE_DIR=/tmp/ti-$$-$1; }
stamp() { python3 -c 'import time; print(f"{time.time():.3f}")'; }
took() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$2"; }

{
  fresh parts
  python3 -c "import time; t = time.perf_counter(); import torch; print(f'import torch {time.perf_counter() - t:.2f} s')"
  python3 -c "import time; t = time.perf_counter(); import gemmtune.cli; print(f'import gemmtune.cli {time.perf_counter() - t:.2f} s')"
  python3 -c "import time, torch; t = time.perf_counter(); torch.zeros(1, device='cuda'); torch.cuda.synchronize(); print(f'CUDA context {time.perf_counter() - t:.2f} s')"
  python3 - <<'PY'
import time
t0 = time.perf_counter()
from gemmtune.bench.workers import WorkerPool
t1 = time.perf_counter()
with WorkerPool(1) as pool:
    t2 = time.perf_counter()
    info = pool.info() if hasattr(pool, "info") else None
    t3 = time.perf_counter()
print(f"worker pool: import {t1 - t0:.2f} s, spawn {t2 - t1:.2f} s, ready + info {t3 - t2:.2f} s, "
      f"close {time.perf_counter() - t3:.2f} s ({(info or {}).get('device_name')})")
PY
  python3 -X importtime -c "import gemmtune.cli" 2> "$OUT/importtime.txt"
} 2>&1 | tee "$OUT/parts.txt"

printf "%-22s %-10s %8s %10s %10s\n" shape mode process_s tune_wall_s startup_s | tee "$OUT/cold.txt"
for s in $SHAPES; do
  # cold: as a user runs it (the entry point pre-starts the worker); prestart0: without that;
  # inproc: --in-process; profiled: cold again under cProfile (the parent's view; slower).
  for mode in ${MODES:-cold prestart0 inproc profiled}; do
    fresh "$s-$mode"
    extra=""; envs=""; prof=""
    [ $mode = inproc ] && extra="--in-process"
    [ $mode = prestart0 ] && envs="GEMMTUNE_PRESTART=0"
    [ $mode = noprecompile ] && envs="GEMMTUNE_PRECOMPILE=0"
    # (profiled runs keep the interpreter's teardown: cProfile writes its file there)
    [ $mode = profiled ] && prof="-m cProfile -o $OUT/prof-${s%%:*}.prof" && envs="GEMMTUNE_FAST_EXIT=0"
    [ $mode = inprof ] && extra="--in-process" && prof="-m cProfile -o $OUT/prof-inproc-${s%%:*}.prof" \
      && envs="GEMMTUNE_FAST_EXIT=0"
    t0=$(stamp)
    env $envs python3 $prof -m gemmtune_entry tune --shape $s --fast $extra \
      --store "$OUT/$mode.sqlite" --out "$OUT/$mode-table.json" --summary "$OUT/sum-$mode-${s%%:*}.json" -q \
      > "$OUT/log-$mode-${s%%:*}.txt" 2>&1
    t1=$(stamp)
    python3 - "$s" "$mode" "$(took $t0 $t1)" "$OUT/sum-$mode-${s%%:*}.json" <<'PY' | tee -a "$OUT/cold.txt"
import json, sys
s, mode, wall, path = sys.argv[1:]
try:
    d = json.load(open(path))
    tw, st = f"{d.get('wall_s', float('nan')):.2f}", f"{d.get('startup_s', float('nan')):.2f}"
    st += f" pre={d.get('precompile_s', 0.0):.2f}/{d.get('precompiled', 0)}"
    best = d["shapes"][0]["best"]
except (OSError, ValueError, KeyError, IndexError):
    tw = st = "failed"; best = ""
print(f"{s:22s} {mode:10s} {float(wall):8.2f} {tw:>10s} {st:>10s}  {best}")
PY
  done
  [ "${NO_MAT:-0}" = 1 ] && continue  # max-autotune measured elsewhere in this call
  fresh "$s-mat"
  t0=$(stamp)
  python3 scripts/maxautotune_once.py "$s" > /dev/null 2>&1
  t1=$(stamp)
  printf "%-22s %-10s %8s\n" $s max-autotune $(took $t0 $t1) | tee -a "$OUT/cold.txt"
done
# The parent's profile, by cumulative time (the worker's wait shows as selector time).
for f in "$OUT"/prof-*.prof; do
  python3 -c "import pstats, sys; pstats.Stats(sys.argv[1]).sort_stats('cumulative').print_stats(110)" "$f" \
    > "${f%.prof}.txt" 2>&1
done
tar -C "$OUT" -czf "$OUT/profiles.tgz" $(cd "$OUT" && ls prof-* log-* sum-* importtime.txt) && \
  (cd "$OUT" && rm -f prof-* log-* sum-* importtime.txt *.sqlite *-table.json)
