#!/usr/bin/env bash
# Session 19, call 4: small-N problems for the H100 ranker (MoE routers, classifier and regression
# heads: N from 1 to 256, M from 256 to 32768; benchmarks/suites/collect-smalln-s19.csv), collected
# on top of the store in data/collect/h100; the ranker retrained on it here (5-fold CV, then every
# shape); then --fast with it beside --fast with the shipped ranker on
# benchmarks/suites/validate-smalln-s19.csv (8 small-N shapes outside the collection, then the
# public decode and splitk groups; the report's "model top-1" column is --fast with the new
# model). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
S="--order spread --mm-sample 40 --splitk-sample 20 --pad-sample 8 --new-sample 12"
timeout 230 python3 -m gemmtune.cli collect --resume-from data/collect/h100/collect.sqlite.gz --dtypes bf16 $S \
  --shapes benchmarks/suites/collect-smalln-s19.csv --max-minutes ${MIN:-3.2} --out $OUT/c > $OUT/collect.log 2>&1
echo "collect rc=$?"; tail -3 $OUT/collect.log | cut -c1-400
mv $OUT/c/collect.sqlite.gz $OUT/collect.sqlite.gz; mv $OUT/c/collect-progress.json $OUT/ 2>/dev/null; rm -rf $OUT/c
mkdir -p $OUT/model
timeout 150 python3 -m gemmtune.cli train --store $OUT/collect.sqlite.gz --exclude-suite none --cv 5 --kind lgbm_rank \
  --device h100 --ship $OUT/model/nvidia-h100-rank.json --report $OUT/model/cv > $OUT/train.log 2>&1
echo "train rc=$?"; grep -E "lgbm_rank|analytic|chosen" $OUT/train.log | tail -4
timeout 300 python3 scripts/exp_fast_new_model.py $OUT/model/nvidia-h100-rank.json -- \
  --suite benchmarks/suites/validate-smalln-s19.csv --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 250 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"
grep -A8 "Tuning wall" $OUT/bench/*.md; grep -A26 "^## Per shape: speedup" $OUT/bench/*.md | head -28
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
tar czf $OUT/model.tgz -C $OUT model train.log collect.log && rm -rf $OUT/model
