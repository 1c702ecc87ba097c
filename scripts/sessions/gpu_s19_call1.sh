#!/usr/bin/env bash
# Session 19, call 1: shapes nobody tuned for, round two (benchmarks/suites/edge-s19.csv: K of 3, 15
# and 16, two vocabulary heads, M = 17 and 48, fp32 decode and odd fp32, N = 3, a batch of 64
# attention products and 512 tiny ones, a column-major A at decode, fp8 tensor- and row-wise), through
# `gemmtune bench` (Inductor and TunableOp skipped), every output checked against fp64, cuBLAS
# interleaved; then `gemmtune tune --fast` on three addmm shapes (bench compares plain products);
# then an H100 collection of tiny-K and one-tile huge-K problems for the ranker
# (benchmarks/suites/collect-tinyk-hugek-s19.csv). GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout ${BENCH_S:-290} python3 -m gemmtune.cli bench --suite benchmarks/suites/edge-s19.csv \
  --deadline $(( $(date +%s) + ${DEADLINE_S:-230} )) --skip-tunableop --skip-inductor --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -v Warning $OUT/bench.log | tail -8
grep -A9 "Tuning wall" $OUT/bench/*.md; grep -A8 "Geomean % of the physical" $OUT/bench/*.md
grep -A24 "^## Per shape: speedup" $OUT/bench/*.md | head -30
rm -f $OUT/bench/*.png
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
timeout 60 python3 -m gemmtune.cli tune --suite benchmarks/suites/edge-addmm-s19.csv --fast --store $OUT/addmm.sqlite \
  --out $OUT/addmm-table.json --summary $OUT/addmm-summary.json > $OUT/addmm.log 2>&1
echo "addmm rc=$?"; grep -v Warning $OUT/addmm.log | tail -12
S="--order spread --mm-sample 40 --splitk-sample 20 --pad-sample 8 --new-sample 12"
timeout ${COLLECT_S:-230} python3 -m gemmtune.cli collect --resume-from data/collect/h100/collect.sqlite.gz --dtypes bf16,fp32 $S \
  --shapes benchmarks/suites/collect-tinyk-hugek-s19.csv --max-minutes ${MIN:-3.3} --out $OUT/c > $OUT/collect.log 2>&1
echo "collect rc=$?"; tail -4 $OUT/collect.log
mv $OUT/c/collect.sqlite.gz $OUT/collect.sqlite.gz; mv $OUT/c/collect-progress.json $OUT/ 2>/dev/null
rm -rf $OUT/c; tar czf $OUT/logs.tgz -C $OUT addmm.log collect.log addmm.sqlite 2>/dev/null; rm -f $OUT/addmm.sqlite; ls -la $OUT
