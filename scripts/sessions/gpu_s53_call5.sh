#!/usr/bin/env bash
# Session 53, call 5 (GPU only; no carry; ~7 min): the final tree. The -m gpu lane (after the
# kernel changes and the hunts of collect, the CLI, pdl/scaled_mm, the Inductor export, autograd and
# the tune API), fuzz_patch seed 53 with --compile, and Inductor's generated source for the two
# even-K odd-N parity rows (parity_inductor --code-dir), to read offline beside ours.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 300 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15
timeout 90 python3 scripts/parity_inductor.py --small --odd --static --indexed-k --wrap-odd --only 96x50257x768,300x20001x512 \
  --code-dir $OUT/code --out $OUT/parity_code.json > $OUT/parity_code.log 2>&1
echo "parity rc=$?"; grep -E "ratio" $OUT/parity_code.log | sed -E 's/ \| ours \{.*//' | cut -c1-300
tar czf $OUT/code.tgz -C $OUT code && rm -rf $OUT/code
LEFT=$(( 540 - $(date +%s) + T0 ))
timeout $LEFT python3 scripts/fuzz_patch.py --seed 53 --n 6 --compile --out $OUT > $OUT/fuzz.log 2>&1
echo "fuzz rc=$?"; tail -6 $OUT/fuzz.log
gzip -f $OUT/gpu_tests.txt
echo "call took $(( $(date +%s) - T0 )) s"
