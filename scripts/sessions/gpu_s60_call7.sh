#!/usr/bin/env bash
# Session 60, call 7 (GPU only; no carry; ~4 min). gemmtune bench's new read reference (gemmtune.bench.readtime): each
# memory-bound shape that writes little gets, in its own interleaved rounds, a kernel that only reads as many bytes
# as its inputs hold. The public decode group, no Inductor or TunableOp; the tests of the new module on the GPU.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_readtime.py > $OUT/readtime_tests.txt 2>&1
echo "readtime tests rc=$?"; tail -2 $OUT/readtime_tests.txt
timeout 240 python3 -m gemmtune.cli bench --groups decode --skip-inductor --skip-tunableop --out $OUT/bench \
  --deadline $(( $(date +%s) + 200 )) > $OUT/bench.log 2>&1; echo "bench rc=$?"
grep -hE "^Floor|^### " $OUT/bench/*.md | head -30
grep -hE "^\| decode" $OUT/bench/*.md | head -12
echo "call took $(( $(date +%s) - T0 )) s"
