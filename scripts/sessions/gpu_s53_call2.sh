#!/usr/bin/env bash
# Session 53, call 2 (GPU only; no carry; ~9 min): the tiled kernel's K mask in Inductor's form
# (the block's arange against the K left, one scalar; it had recomputed and compared every element's
# K index in 64 bits each iteration). (1) compute-sanitizer memcheck over the tiled kernel's users
# (triton_mm, triton_static, split-K, DecomposeK: odd K, split K slices, offset views); (2) the odd
# rows' parity against Inductor's template, 7 rounds, as call 1; (3) `gemmtune bench --groups odd`.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 150 compute-sanitizer --tool memcheck python3 scripts/sanitize_kernels.py triton_mm,triton_static,splitk,decompose_k \
  > $OUT/sanitize.log 2>&1
echo "sanitize rc=$?"; grep -E "ERROR SUMMARY|sanitize:|FAIL|mismatch" $OUT/sanitize.log | tail -5
timeout 200 python3 scripts/parity_inductor.py --small --odd --static --indexed-k --wrap-odd --rounds 7 \
  --out $OUT/parity_odd.json > $OUT/parity_odd.log 2>&1
echo "parity rc=$?"; grep -E "ratio" $OUT/parity_odd.log | sed -E 's/ \| ours \{.*//' | cut -c1-330
timeout $(( 570 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --groups odd --skip-tunableop \
  --deadline $(( T0 + 540 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "left out|rror" $OUT/bench.log | grep -v "^E12" | head -5
grep -A8 "Geomean % of the physical" $OUT/bench/*.md; grep -A8 "^## Geomean speedup" $OUT/bench/*.md
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
gzip -f $OUT/sanitize.log
echo "call took $(( $(date +%s) - T0 )) s"
