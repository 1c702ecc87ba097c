#!/usr/bin/env bash
# Session 47, call 4 (GPU only; no carry; ~8 min): the final tree. The whole -m gpu lane (with the
# numerics hunt's autograd / forward-AD / scaled_mm changes, the cluster's claims and streamed
# results, the bench hunt's report changes), then new seeds of both fuzzers.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 320 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -12
timeout 90 python3 scripts/fuzz_patch.py --n 3 --seed 51 --compile --out /tmp/p51 > $OUT/fuzz_patch51.log 2>&1
echo "fuzz_patch seed 51 rc=$?"; tail -8 $OUT/fuzz_patch51.log | grep -v '^{"d"'
timeout $(( 560 - $(date +%s) + T0 )) python3 scripts/fuzz_tune.py --n 30 --seed 49 --out /tmp/f49 > $OUT/fuzz49.log 2>&1
echo "fuzz_tune seed 49 rc=$?"; tail -6 $OUT/fuzz49.log
cp /tmp/p51/fuzz_patch.json $OUT/fuzz_patch51.json; cp /tmp/f49/fuzz_tune.json $OUT/fuzz_tune49.json
gzip -f $OUT/gpu_tests.txt
