#!/usr/bin/env bash
# Device call 2 of session 5 (2026-11-25): the batched zero_pad (pad+ bmm) on the GPU, i.e. its
# copy time against F.pad, the bmm and pad tests, compute-sanitizer memcheck of pad+ bmm launches;
# then the new families' timings for the rest of the call (as gpu_s5_collect.sh).
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
mkdir -p "$OUT/checks"
timeout 60 python3 scripts/pad_copy_bench.py > "$OUT/checks/pad-copy.jsonl" 2>&1; echo "pad bench rc=$?"
grep -i "bat\|3d\|bmm" "$OUT/checks/pad-copy.jsonl" | cut -c1-220 | head -12
timeout 100 python3 -m pytest -q tests/test_bmm.py tests/test_padcache.py -p no:cacheprovider > "$OUT/checks/tests.log" 2>&1
echo "tests rc=$?"; grep -E "passed|failed|FAIL|Error" "$OUT/checks/tests.log" | tail -5
timeout 100 compute-sanitizer --tool memcheck python3 scripts/sanitize_fp8_bmm.py padbmm bmm > "$OUT/checks/sanitize.log" 2>&1
echo "sanitize rc=$?"; grep -E "sanitize:|ERROR SUMMARY|WRONG|padbmm" "$OUT/checks/sanitize.log" | tail -8
CALL_S=$(( ${CALL_S:-585} - SECONDS )) bash scripts/gpu_s5_collect.sh 2>&1 | grep -v "^\[gpu0\] \[" | tail -8
