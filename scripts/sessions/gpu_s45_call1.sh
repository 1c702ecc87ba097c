#!/usr/bin/env bash
# Prepared in session 44 for session 45 (GPU only; no carry; ~4 min). Session 44 kept the compile
# workers pre-started with the command's benchmark worker (gemmtune_entry.spawn.prestart_compile_count)
# on two pairs of runs: a 12-shape `tune --fast` 8.0-8.2 s inside `tune` against 8.5-8.7 s, the
# whole process 10.2-10.5 against 10.4-10.6 s. Settle it: eight alternating runs of that tune
# (after one that pays the machine's Triton driver build), then Llama-1B's tune_model through
# bench-model (which pre-starts them too) with GEMMTUNE_PRESTART_COMPILE=1/0: its tuning call's
# time and start-up. If the process is not faster, take the pre-start out again.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
i=0
for pc in 1 1 0 1 0 1 0 1 0; do
  i=$((i+1))
  timed_tune $i prestart_compile=$pc GEMMTUNE_PRESTART_COMPILE=$pc -- --preset public --groups decode,odd --fast
done
# the first run finds empty caches (session 44's call 8: 13.3 s then 5.1 s): compare the last two
j=0
for pc in 0 1 0; do
  j=$((j+1))
  GEMMTUNE_PRESTART_COMPILE=$pc timeout 200 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 \
    --modes fuse_patch_compile_graph --out /tmp/bm$j > /tmp/bm$j.log 2>&1
  echo "bench-model run $j prestart_compile=$pc rc=$?"
  python3 - /tmp/bm$j/bench-model.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["models"][0]
print({k: m.get(k) for k in ("fuse_tune_s", "fuse_tune_call_s", "fuse_tune_startup_s") if k in m})
PY
done
