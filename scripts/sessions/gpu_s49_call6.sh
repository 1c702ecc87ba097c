#!/usr/bin/env bash
# Session 49, call 6 (GPU only; no carry; ~6 min): the final tree. The whole -m gpu lane (the
# K-major pad+ path for 3xTF32 fp32, the report hunt's fixes), then fp32 shapes with a row-major
# B (and one K-major control) tuned by `gemmtune bench` against cuBLAS's SGEMM, interleaved:
# does the K-major copy's pad+ twin win where call 5 says it should, and does --fast find it.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 230 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15
cat > $OUT/fp32rb.csv <<'CSV'
group,name,M,N,K,dtype,layout_a,layout_b
square,cube_4096_fp32_rr,4096,4096,4096,float32,row,row
square,cube_2048_fp32_rr,2048,2048,2048,float32,row,row
prefill,prefill_1024x4096x4096_fp32_rr,1024,4096,4096,float32,row,row
prefill,conv1d_2048x3072x768_fp32_rr,2048,3072,768,float32,row,row
prefill,prefill_3000x5120x1280_fp32_rr,3000,5120,1280,float32,row,row
square,cube_4096_fp32_rc,4096,4096,4096,float32,row,col
CSV
timeout $(( 430 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --suite $OUT/fp32rb.csv --skip-inductor \
  --skip-tunableop --deadline $(( T0 + 400 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "left out|rror" $OUT/bench.log | head -5
grep -E "^(square|prefill) " $OUT/bench.log | sed -E 's/  gemmtune model adaptive.*//'
grep -A6 "Geomean % of the physical" $OUT/bench/*.md | tail -4; grep -A6 "^## Geomean speedup" $OUT/bench/*.md | tail -4
grep -E "^\| gemmtune (default|--fast) \| .pad" $OUT/bench/*.md | cut -c1-110
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
gzip -f $OUT/gpu_tests.txt
echo "call took $(( $(date +%s) - T0 )) s"
