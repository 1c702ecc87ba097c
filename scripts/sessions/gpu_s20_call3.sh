#!/usr/bin/env bash
# Session 20, call 3: the one-launch pad pair on the GPU (memcheck of pad_pair and pad_copy, the pad
# tests on CUDA, and 333x4097x1025's pieces again, scripts/exp_pad_odd.py), then the public suite's
# decode, splitk and odd groups (Inductor skipped) with three --fast columns
# (scripts/exp_fast_columns.py): the shipped ranker, the ranker retrained in call 1 on the fp32
# collection (.s20model/, column "model top-1"), and the shipped ranker without the unsure widening
# (column "model top-20"). GPU only; carry .whl, .s20model.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 120 compute-sanitizer --tool memcheck --print-limit 20 python3 scripts/sanitize_kernels.py pad > $OUT/memcheck.log 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|WRONG|pad_pair" $OUT/memcheck.log | head -8
timeout 150 python3 -m pytest -q -x tests/test_pad.py tests/test_padcache.py -p no:cacheprovider > $OUT/pad_tests.txt 2>&1
echo "pad tests rc=$?"; tail -2 $OUT/pad_tests.txt
timeout 90 python3 scripts/exp_pad_odd.py $OUT/pad_odd_333.json 333 4097 1025 BM128-BN128-BK64-S4-W4-G8 > $OUT/pad_odd.log 2>&1
echo "pad_odd rc=$?"; grep -v Warning $OUT/pad_odd.log | grep " us " 
timeout 330 python3 scripts/exp_fast_columns.py .s20model/nvidia-h100-rank.json -- \
  --groups decode,splitk,odd --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + ${DEADLINE_S:-290} )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"
grep -A10 "Tuning wall" $OUT/bench/*.md | head -12; grep -A8 "Geomean % of the physical" $OUT/bench/*.md
grep -A24 "^## Per shape: speedup" $OUT/bench/*.md | head -26
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
tar czf $OUT/logs.tgz -C $OUT memcheck.log pad_tests.txt pad_odd.log bench.log && rm -f $OUT/memcheck.log $OUT/pad_tests.txt $OUT/bench.log
