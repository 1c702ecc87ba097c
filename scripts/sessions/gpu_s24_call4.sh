#!/usr/bin/env bash
# Session 24, call 4: --fast ranked by an H100 ranker retrained on the store with DecomposeK's
# small-M x N rows measured again (call 3; .s24model/, carried) beside --fast with the shipped
# ranker, same run (scripts/exp_fast_new_model.py: the "model top-1" column is --fast with the new
# ranker). Eight long-K shapes no store holds (benchmarks/suites/validate-s24-longk.csv), then the
# public decode and splitk groups. GPU only; carry .whl, .s24model.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
T0=$(date +%s)
timeout 260 python3 scripts/exp_fast_new_model.py .s24model/nvidia-h100-rank.json -- \
  --suite benchmarks/suites/validate-s24-longk.csv --skip-inductor --skip-tunableop \
  --deadline $(( T0 + 230 )) --out $OUT/longk > $OUT/longk.log 2>&1
echo "longk rc=$?"
grep -A8 "Tuning wall" $OUT/longk/*.md; grep -A12 "^## Per shape: speedup" $OUT/longk/*.md | head -14
timeout $(( 570 - $(date +%s) + T0 )) python3 scripts/exp_fast_new_model.py .s24model/nvidia-h100-rank.json -- \
  --groups decode,splitk --skip-inductor --skip-tunableop \
  --deadline $(( T0 + 540 )) --out $OUT/public > $OUT/public.log 2>&1
echo "public rc=$?"
grep -A8 "Tuning wall" $OUT/public/*.md; grep -A20 "^## Per shape: speedup" $OUT/public/*.md | head -22
rm -f $OUT/*/*.png
tar czf $OUT/bench.tgz -C $OUT longk public longk.log public.log && rm -rf $OUT/longk $OUT/public $OUT/longk.log $OUT/public.log
