#!/usr/bin/env bash
# Session 24, call 8: --fast ranked by an H100 ranker retrained on the store with DecomposeK's
# small-MxN rows (call 3) and the small-copy pad+ rows (call 7) measured again (.s24model/, carried)
# beside --fast with the shipped ranker, one run each (scripts/exp_fast_new_model.py: the "model
# top-1" column is --fast with the new ranker): the seven small odd shapes, the public odd group,
# the eight long-K shapes. No Inductor. GPU only; carry .whl, .s24model.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
T0=$(date +%s)
run() {  # name, deadline offset, bench args...
  local name=$1 end=$2; shift 2
  timeout $(( end + 25 - $(date +%s) + T0 )) python3 scripts/exp_fast_new_model.py .s24model/nvidia-h100-rank.json -- \
    "$@" --skip-inductor --skip-tunableop --deadline $(( T0 + end )) --out $OUT/$name > $OUT/$name.log 2>&1
  echo "$name rc=$?"
  grep -A7 "Tuning wall" $OUT/$name/*.md | tail -5; grep -A12 "^## Per shape: speedup" $OUT/$name/*.md | tail -10
}
run smallodd 190 --suite benchmarks/suites/validate-s24-smallodd.csv
run odd 380 --groups odd
run longk 550 --suite benchmarks/suites/validate-s24-longk.csv
rm -f $OUT/*/*.png
tar czf $OUT/bench.tgz -C $OUT smallodd odd longk smallodd.log odd.log longk.log
rm -rf $OUT/smallodd $OUT/odd $OUT/longk $OUT/*.log
