#!/usr/bin/env bash
# Session 16, call 7: the final tree on the GPU: all GPU tests (-n 4), then GEMMTUNE_SERVER against a
# warm server (the README's example: one forwarded --fast tune, and one with no server answering).
# GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 200 python3 -m pytest -q -x -n 4 tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; tail -3 $OUT/gpu_tests.txt
sock=/tmp/gemmtune-$$.sock
python3 -m gemmtune_entry worker --serve $sock 2> $OUT/server.log &
srv=$!
for _ in $(seq 120); do [ -S $sock ] && break; sleep 1; done
stamp() { python3 -c 'import time; print(f"{time.time():.3f}")'; }
t0=$(stamp)
GEMMTUNE_SERVER=$sock python3 -m gemmtune_entry tune --shape 1024x1024x1024:bf16 --fast --store $OUT/s.sqlite > $OUT/env-server.txt 2>&1
echo "env server rc=$? in $(python3 -c "print(round($(stamp) - $t0, 2))") s"; tail -2 $OUT/env-server.txt
GEMMTUNE_SERVER=/tmp/none-$$.sock python3 -m gemmtune_entry tune --shape 512x512x512:bf16 --fast --store $OUT/s.sqlite -q > $OUT/env-missing.txt 2>&1
echo "missing server rc=$?"; grep -h "GEMMTUNE_SERVER\|measured" $OUT/env-missing.txt
kill -TERM $srv; wait $srv 2>/dev/null
