#!/usr/bin/env bash
# Session 50, call 2 (GPU only; no carry; ~8 min). (1) compute-sanitizer memcheck of the prepared
# section with fp32 operands again, now that a pad+ choice with no prepared launch (3xTF32's K-major
# copy of B) runs through run_choice, the dispatcher's path: call 1 never ran those copies.
# (2) scripts/exp_x3_tiles.py: is a K split the gain on large 3xTF32 problems, or the tile
# BM128-BN128-BK64-S3-W8 that the split families run and triton_mm's default space lacks?
# (3) the bmm preset (attention-shaped batched GEMMs, K = 64..128 among them) on today's tree;
# its last run was 2026-11-24 (1.01x torch.bmm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
SANITIZE_DTYPE=float32 timeout 150 compute-sanitizer --tool memcheck --print-limit 20 \
  python3 scripts/sanitize_kernels.py prepared > $OUT/sanitize_fp32.txt 2>&1
echo "sanitize rc=$?"; grep -E "ERROR SUMMARY|sanitize:|WRONG|skipped|^(prepared|run_choice) " $OUT/sanitize_fp32.txt | head -14
timeout 240 python3 scripts/exp_x3_tiles.py --out $OUT/x3 > $OUT/x3tiles.txt 2>&1
echo "x3 tiles rc=$?"; cat $OUT/x3tiles.txt | grep -v "^\s*$" | tail -110
rm -f $OUT/x3/*.sqlite-*; gzip -f $OUT/x3/x3tiles.sqlite
timeout $(( 560 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --suite bmm --skip-inductor --skip-tunableop \
  --deadline $(( T0 + 530 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "left out|rror" $OUT/bench.log | head -5
grep -E "^bmm " $OUT/bench.log | sed -E 's/  gemmtune model adaptive.*//'
grep -A4 "Geomean % of the physical" $OUT/bench/*.md | tail -3; grep -A4 "^## Geomean speedup" $OUT/bench/*.md | tail -3
grep -E "of the best" $OUT/bench/*.md | head -3
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
tar czf $OUT/x3.tgz -C $OUT x3 && rm -rf $OUT/x3
gzip -f $OUT/sanitize_fp32.txt
echo "call took $(( $(date +%s) - T0 )) s"
