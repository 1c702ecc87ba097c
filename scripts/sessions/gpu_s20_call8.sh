#!/usr/bin/env bash
# Session 20, call 8: skinny's CUDA-core configs for the H100 ranker: --core-sample 8 on every M <= 16
# problem the H100 store holds (benchmarks/suites/collect-decode-core-{bf16,fp32}-s20.csv; the rest of
# each shape's sample is measured where the store lacks it), the ranker retrained (5-fold CV, then
# every shape), then --fast with it beside the shipped one on benchmarks/suites/validate-fp32-s20.csv
# (scripts/exp_fast_columns.py: column "model top-1" is the new ranker). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
S="--order spread --mm-sample 40 --splitk-sample 20 --pad-sample 8 --new-sample 12 --core-sample 8"
timeout 150 python3 -m gemmtune.cli collect --resume-from data/collect/h100/collect.sqlite.gz --dtypes fp32 $S \
  --shapes benchmarks/suites/collect-decode-core-fp32-s20.csv --max-minutes 0.7 --out $OUT/c1 > $OUT/collect-fp32.log 2>&1
echo "collect fp32 rc=$?"; tail -4 $OUT/collect-fp32.log | cut -c1-300
timeout 200 python3 -m gemmtune.cli collect --resume-from $OUT/c1/collect.sqlite.gz --dtypes bf16 $S \
  --shapes benchmarks/suites/collect-decode-core-bf16-s20.csv --max-minutes 2.0 --out $OUT/c > $OUT/collect-bf16.log 2>&1
echo "collect bf16 rc=$?"; tail -4 $OUT/collect-bf16.log | cut -c1-300
mv $OUT/c/collect.sqlite.gz $OUT/collect.sqlite.gz; mv $OUT/c/collect-progress.json $OUT/ 2>/dev/null; rm -rf $OUT/c $OUT/c1
mkdir -p $OUT/model
timeout 170 python3 -m gemmtune.cli train --store $OUT/collect.sqlite.gz --exclude-suite none --cv 5 --kind lgbm_rank \
  --device h100 --ship $OUT/model/nvidia-h100-rank.json --report $OUT/model/cv > $OUT/train.log 2>&1
echo "train rc=$?"; grep -E "lgbm_rank|analytic|chosen" $OUT/train.log | tail -4
timeout 230 python3 scripts/exp_fast_columns.py $OUT/model/nvidia-h100-rank.json -- \
  --suite benchmarks/suites/validate-fp32-s20.csv --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 200 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"
grep -A10 "Tuning wall" $OUT/bench/*.md | head -11; grep -A16 "^## Per shape: speedup" $OUT/bench/*.md | head -16
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
tar czf $OUT/model.tgz -C $OUT model train.log collect-fp32.log collect-bf16.log && rm -rf $OUT/model
