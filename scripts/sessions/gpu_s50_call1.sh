#!/usr/bin/env bash
# Session 50, call 1 (GPU only; no carry; ~9 min): session 49's tree after its last GPU call.
# The -m gpu lane; compute-sanitizer memcheck over the pad copies and prepared launches with fp32
# operands (3xTF32: the K-major pad+ copy of a row-major B, ragged and aligned); then fp32 with a
# row-major B plus the public suite's fp32 rows, `gemmtune bench` against SGEMM, interleaved:
# --fast with the analytic model's 3xTF32 tile charges (session 49 measured 82% of the best
# before them).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 230 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15
SANITIZE_DTYPE=float32 timeout 120 compute-sanitizer --tool memcheck --print-limit 20 \
  python3 scripts/sanitize_kernels.py pad,prepared > $OUT/sanitize_fp32.txt 2>&1
echo "sanitize rc=$?"; grep -E "ERROR SUMMARY|sanitize:|WRONG|skipped" $OUT/sanitize_fp32.txt | head -12
cat > $OUT/fp32.csv <<'CSV'
group,name,M,N,K,dtype,layout_a,layout_b
square,cube_4096_fp32,4096,4096,4096,float32,row,row
splitk,tiny_mn_fp32,64,64,32768,float32,row,row
square,cube_2048_fp32_rr,2048,2048,2048,float32,row,row
prefill,prefill_1024x4096x4096_fp32_rr,1024,4096,4096,float32,row,row
prefill,conv1d_2048x3072x768_fp32_rr,2048,3072,768,float32,row,row
prefill,prefill_3000x5120x1280_fp32_rr,3000,5120,1280,float32,row,row
CSV
timeout $(( 560 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --suite $OUT/fp32.csv --skip-inductor \
  --skip-tunableop --deadline $(( T0 + 530 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "left out|rror" $OUT/bench.log | head -5
grep -E "^(square|prefill|splitk) " $OUT/bench.log | sed -E 's/  gemmtune model adaptive.*//'
grep -A6 "Geomean % of the physical" $OUT/bench/*.md | tail -4; grep -A6 "^## Geomean speedup" $OUT/bench/*.md | tail -4
grep -iE "of the best" $OUT/bench/*.md | head -5
grep -E "^\| gemmtune (default|--fast) \|" $OUT/bench/*.md | cut -c1-110
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
gzip -f $OUT/gpu_tests.txt $OUT/sanitize_fp32.txt
echo "call took $(( $(date +%s) - T0 )) s"
