#!/usr/bin/env bash
# Session 53, call 7 (GPU only; no carry; ~3 min): PREFETCH_B in the library's tiled kernel (B's next
# K tile held in registers where the indexed loop wraps an odd N along a row-major B: triton_static's
# indexed_wrap form). compute-sanitizer over triton_static's cases (two indexed_wrap, one an offset
# view), then the odd rows' parity against Inductor's template (5 rounds).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 70 compute-sanitizer --tool memcheck python3 scripts/sanitize_kernels.py triton_static > $OUT/sanitize.log 2>&1
echo "sanitize rc=$?"; grep -E "ERROR SUMMARY|sanitize:|FAIL|mismatch" $OUT/sanitize.log | tail -4
timeout 140 python3 scripts/parity_inductor.py --small --odd --static --indexed-k --wrap-odd --rounds 5 \
  --only 96x50257x768,300x20001x512,333x4097x1025,777x1531x2049,1021x2053x509 \
  --out $OUT/parity_odd.json > $OUT/parity_odd.log 2>&1
echo "parity rc=$?"; grep -E "ratio" $OUT/parity_odd.log | sed -E 's/ \| ours \{.*//' | cut -c1-330
gzip -f $OUT/sanitize.log
echo "call took $(( $(date +%s) - T0 )) s"
