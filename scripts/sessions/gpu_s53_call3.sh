#!/usr/bin/env bash
# Session 53, call 3 (GPU only; no carry; ~5 min): the epilogue's one pointer add (the summed int32
# offsets) and the skinny family's K masks in the arange-against-a-scalar form. (1) compute-sanitizer
# memcheck over every family that stores through split_epilogue or masks K in a skinny loop;
# (2) the odd rows' parity against Inductor's template again (the even-K rows' residual was outside
# the K loop); (3) the public decode and splitk groups, --fast and the default space (no Inductor).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 200 compute-sanitizer --tool memcheck python3 scripts/sanitize_kernels.py skinny,triton_mm,triton_static,splitk,decompose_k \
  > $OUT/sanitize.log 2>&1
echo "sanitize rc=$?"; grep -E "ERROR SUMMARY|sanitize:|FAIL|mismatch" $OUT/sanitize.log | tail -5
timeout 200 python3 scripts/parity_inductor.py --small --odd --static --indexed-k --wrap-odd --rounds 7 \
  --out $OUT/parity_odd.json > $OUT/parity_odd.log 2>&1
echo "parity rc=$?"; grep -E "ratio" $OUT/parity_odd.log | sed -E 's/ \| ours \{.*//' | cut -c1-330
timeout $(( 570 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --groups decode,splitk --skip-tunableop --skip-inductor \
  --deadline $(( T0 + 545 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "left out|rror" $OUT/bench.log | grep -v "^E12" | head -5
grep -A8 "Geomean % of the physical" $OUT/bench/*.md; grep -A8 "^## Geomean speedup" $OUT/bench/*.md
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
gzip -f $OUT/sanitize.log
echo "call took $(( $(date +%s) - T0 )) s"
