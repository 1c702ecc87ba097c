#!/usr/bin/env bash
# Session 50, call 3 (GPU only; no carry; ~6 min). (1) The fp32 sanitizer's prepared section once
# more (call 2 stopped at a pad+ persistent tile too big for fp32 shared memory; now skipped by
# name). (2) fp32 out of sample: seed 51's prefill, square and odd shapes (scripts/random_suite.py,
# drawn as bf16 and run as fp32: benchmarks/suites/fp32-random-s50.csv), `gemmtune bench` against
# SGEMM, interleaved, with triton_mm's default space now holding BM128-BN128-BK64-S3-W8 in fp32
# (configs.fit_stages) and the analytic model's 3xTF32 BK32 charge.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
SANITIZE_DTYPE=float32 timeout 150 compute-sanitizer --tool memcheck --print-limit 20 \
  python3 scripts/sanitize_kernels.py prepared > $OUT/sanitize_fp32.txt 2>&1
echo "sanitize rc=$?"; grep -E "ERROR SUMMARY|sanitize:|WRONG|skipped|^(prepared|run_choice) " $OUT/sanitize_fp32.txt | head -14
timeout $(( 540 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --suite benchmarks/suites/fp32-random-s50.csv \
  --skip-inductor --skip-tunableop --deadline $(( T0 + 510 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "left out|rror" $OUT/bench.log | head -5
grep -E "^(square|prefill|odd) " $OUT/bench.log | sed -E 's/  gemmtune model adaptive.*//'
grep -A6 "Geomean % of the physical" $OUT/bench/*.md | tail -5; grep -A6 "^## Geomean speedup" $OUT/bench/*.md | tail -5
grep -E "of the best" $OUT/bench/*.md | head -5
grep -E "^\| gemmtune (default|--fast) \|" $OUT/bench/*.md | cut -c1-100
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
gzip -f $OUT/sanitize_fp32.txt
echo "call took $(( $(date +%s) - T0 )) s"
