#!/usr/bin/env bash
# Issue #21 on one multi-GPU host (GPU ONLY; one device call on a machine with 2+ GPUs, e.g.
# nvidia-h100-x2, with carry=[".whl"] from scripts/fetch_cluster_wheels.sh):
#   bash scripts/gpu_cluster_collect.sh
# 1. one: the collection plan on GPU 0 alone (`gemmtune collect`), MIN minutes;
# 2. multi: the same plan, fresh store, with `gemmtune collect --cluster local:$NGPU`, MIN minutes;
#    each run has its own Triton cache, so neither loads the other's compiled kernels;
#    the speed-up is candidates recorded per second of wall time (start-up included), 2 over 1;
# COLLECT_ARGS adds collect options to every run (e.g. smaller samples for a CPU try).
# ONE_ARGS adds options to the 1-GPU run only: ONE_ARGS="--compile-workers $(nproc)" gives it every
# core (by default tune caps one GPU at 16 compile workers, and on 2 x H200 that run waited for
# compiles: part of the 2.27x of 2026-11-26 was the second worker's own compile pool).
# 3. kill: KILL_SHAPES shapes with --cluster; once the first shape is in the store (at most
#    KILL_AFTER s), one Dask worker process gets SIGKILL; then the same command again (resume).
#    The store must then hold exactly the planned candidates of those shapes, none left
#    (`collect --dry-run --resume-from` says 0 left and the row count equals the plan).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
NGPU=${NGPU:-$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)}
MIN=${MIN:-2.5}
KILL_SHAPES=${KILL_SHAPES:-4}
KILL_AFTER=${KILL_AFTER:-120}
PLAN=(--dtypes bf16 --order spread --no-export ${COLLECT_ARGS:-})
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  python3 -c "import dask, distributed, torch, triton; print('dask', dask.__version__, 'distributed', \
distributed.__version__, 'torch', torch.__version__, 'triton', triton.__version__)"
  echo "collection plan ${PLAN[*]}, $MIN min per run, $NGPU GPU(s), $(nproc) cores"
} 2>&1 | tee "$OUT/env.txt"
(( NGPU >= 2 )) || echo "warning: $NGPU GPU visible: the cluster run has nothing to spread over" | tee -a "$OUT/env.txt"
hard=$(python3 -c "print($MIN + 0.75)")

if [[ -z "${SKIP_SPEED:-}" ]]; then
  echo "== one: gemmtune collect on GPU 0"
  CUDA_VISIBLE_DEVICES=0 TRITON_CACHE_DIR=/tmp/tc-one timeout 300 python3 -m gemmtune.cli collect "${PLAN[@]}" \
    --max-minutes "$MIN" --hard-stop-minutes "$hard" --out "$OUT/one" ${ONE_ARGS:-} 2>&1 | grep -v '^{' | tee "$OUT/one.log"
  echo "== multi: gemmtune collect --cluster local:$NGPU"
  TRITON_CACHE_DIR=/tmp/tc-multi timeout 300 python3 -m gemmtune.cli collect "${PLAN[@]}" --cluster "local:$NGPU" \
    --max-minutes "$MIN" --hard-stop-minutes "$hard" --out "$OUT/multi" 2>&1 | grep -v '^{' | tee "$OUT/multi.log"
  python3 - "$OUT" "$NGPU" <<'PY' | tee "$OUT/speedup.txt"
import json, sys
from pathlib import Path
out, ngpu = Path(sys.argv[1]), sys.argv[2]
rate = {}
for name, label in (("one", "1 GPU, gemmtune collect"), ("multi", f"{ngpu} GPUs, collect --cluster local:{ngpu}")):
    f = out / name / "collect-progress.json"
    if not f.exists():
        print(f"{label}: no progress file (see {name}.log)")
        continue
    d = json.loads(f.read_text())
    rate[name] = d["candidates_per_s"]
    print(f"{label}: {d['measured_this_call']} candidates ({d['rows_added_by_status']}) on {d['shapes_done']} shapes "
          f"in {d['wall_s']:.1f} s = {rate[name]:.2f} candidates/s (inside tune(): {d['candidates_per_tune_s']:.2f}/s)")
if len(rate) == 2:
    print(f"speed-up: {rate['multi'] / rate['one']:.2f}x on {ngpu} GPUs (candidates recorded per wall second)")
PY
fi

echo "== kill: $KILL_SHAPES shapes, one Dask worker killed (SIGKILL) after $KILL_AFTER s, then resumed"
KILL=(--dtypes bf16 --order spread --limit-shapes "$KILL_SHAPES" --no-export --out "$OUT/kill" --max-minutes 3 ${COLLECT_ARGS:-})
TRITON_CACHE_DIR=/tmp/tc-multi python3 -m gemmtune.cli collect "${KILL[@]}" --cluster "local:$NGPU" \
  > "$OUT/kill-1.log" 2>&1 &
driver=$!
python3 - "$driver" "$OUT/kill/collect.sqlite" "$KILL_AFTER" <<'PY' 2>&1 | tee "$OUT/kill-check.txt"
import os, signal, sqlite3, sys, time
import psutil
driver, store, limit = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
# Kill mid-measurement: once the driver has written its first shape (the workers are past
# start-up and busy with the next), or after KILL_AFTER s at the latest.
t0 = time.monotonic()
while time.monotonic() - t0 < limit and psutil.pid_exists(driver):
    try:
        if os.path.exists(store) and sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1).execute("SELECT COUNT(*) FROM results").fetchone()[0]:
            break
    except sqlite3.Error:
        pass
    time.sleep(0.5)
# The Nanny (inside the driver) spawns each Dask worker as a child; kill one with a GPU
# benchmark pool under it, as a host losing a GPU would.
kids = [p for p in psutil.Process(driver).children() if "spawn" in " ".join(p.cmdline())] if psutil.pid_exists(driver) else []
busy = [p for p in kids if p.children(recursive=True)] or kids
if busy:
    os.kill(busy[0].pid, signal.SIGKILL)
    print(f"killed Dask worker pid {busy[0].pid} at {time.monotonic() - t0:.1f} s ({len(kids)} workers under driver {driver})")
else:
    print("no worker process found to kill (the run ended first?)")
PY
wait "$driver"; echo "first run exit $?" | tee -a "$OUT/kill-1.log"
TRITON_CACHE_DIR=/tmp/tc-multi python3 -m gemmtune.cli collect "${KILL[@]}" --cluster "local:$NGPU" \
  > "$OUT/kill-2.log" 2>&1; echo "resumed run exit $?" | tee -a "$OUT/kill-2.log"
{
  python3 -m gemmtune.cli collect --dtypes bf16 --order spread --limit-shapes "$KILL_SHAPES" --dry-run ${COLLECT_ARGS:-} \
    --resume-from "$OUT/kill/collect.sqlite" | tee /tmp/kill-dry.txt
  python3 - "$OUT/kill/collect.sqlite" /tmp/kill-dry.txt <<'PY'
import re, sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute("SELECT COUNT(*) FROM results").fetchone()[0]
m = re.search(r"(\d+) candidates; left after \S+: (\d+) candidates", open(sys.argv[2]).read())
planned, left = (int(m.group(1)), int(m.group(2))) if m else (None, None)
# The store's primary key is (context, problem, choice): a row written twice would replace
# itself, so "nothing duplicated" is rows == planned with none left, not a row count alone.
ok = planned is not None and left == 0 and rows == planned
print(f"kill store: {rows} rows, {planned} planned, {left} left: {'OK: none lost, none extra' if ok else 'MISMATCH'}")
PY
} 2>&1 | tee -a "$OUT/kill-check.txt"
grep -h -E "shapes done|worker|Traceback|Error" "$OUT"/kill-*.log | head -30
# The device returns at most 8 files: the three stores go back as one archive (the learned
# model's data: every row is a verified timing), the folders are removed.
tar czf "$OUT/stores.tgz" -C "$OUT" $(cd "$OUT" && ls -d one/collect.sqlite multi/collect.sqlite kill/collect.sqlite 2>/dev/null) \
  && rm -rf "$OUT/one" "$OUT/multi" "$OUT/kill"
