#!/usr/bin/env bash
# Session 58, call 2 (GPU only; no carry; ~9 min): the benchmark operands' fix (an unaligned key whose strides are
# already unaligned keeps torch.randn's aligned pointer). 1. cuBLAS on shifted against torch.randn's B on the small-N
# shapes (exp_shifted_ptr.py). 2. gemmtune bench, cuBLAS interleaved, on the classes whose operands changed: the
# tall shapes with N <= 4 (session 57's 1.6-2.9x was measured against cuBLAS on shifted pointers), and a random suite
# (seed 58: tall, small-K, odd) nobody chose.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 60 python3 scripts/sessions/exp_shifted_ptr.py > $OUT/shifted.log 2>&1; echo "shifted rc=$?"; grep -v Warn $OUT/shifted.log
python3 scripts/random_suite.py --seed 58 --per-group decode=0,splitk=0,prefill=0,square=0,tall=8,smallk=3,odd=3 --out $OUT/suite.csv
cat >> $OUT/suite.csv <<'CSV'
tall,n1_8192x1x4096_rr,8192,1,4096,bfloat16,row,row
tall,n1_8192x1x4096_rc,8192,1,4096,bfloat16,row,col
tall,n4_16384x4x2048_rr,16384,4,2048,bfloat16,row,row
tall,n2_4096x2x4096_rr,4096,2,4096,bfloat16,row,row
tall,n2_6000x2x8192_rc,6000,2,8192,bfloat16,row,col
tall,n8_2305x8x7168_rr,2305,8,7168,bfloat16,row,row
CSV
timeout 470 python3 -m gemmtune.cli bench --suite $OUT/suite.csv --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 440 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|left out|rror" $OUT/bench.log | grep -v "^E12" | head
grep -A12 "Geomean % of the physical" $OUT/bench/*.md; grep -A12 "^## Geomean speedup" $OUT/bench/*.md
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench; gzip -f $OUT/bench.log
echo "call took $(( $(date +%s) - T0 )) s"
