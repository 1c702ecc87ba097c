#!/usr/bin/env bash
# Session 20, call 1: fp32 problems for the H100 ranker (its store held 23 fp32 problems against 470
# bf16, none with small MxN and a long K: --fast kept cuBLAS on the public tiny_mn_fp32 at 88% of the
# best), collected on top of data/collect/h100 (benchmarks/suites/collect-fp32-s20.csv); the ranker
# retrained on it here (5-fold CV, then every shape). Then where a pad+ choice's time goes on the odd
# 333x4097x1025 (scripts/exp_pad_odd.py: each piece from CUDA graphs, L2-cold, beside Inductor).
# GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
S="--order spread --mm-sample 40 --splitk-sample 20 --pad-sample 8 --new-sample 12"
timeout 250 python3 -m gemmtune.cli collect --resume-from data/collect/h100/collect.sqlite.gz --dtypes fp32 $S \
  --shapes benchmarks/suites/collect-fp32-s20.csv --max-minutes ${MIN:-3.7} --out $OUT/c > $OUT/collect.log 2>&1
echo "collect rc=$?"; tail -3 $OUT/collect.log | cut -c1-400
mv $OUT/c/collect.sqlite.gz $OUT/collect.sqlite.gz; mv $OUT/c/collect-progress.json $OUT/ 2>/dev/null; rm -rf $OUT/c
mkdir -p $OUT/model
timeout 170 python3 -m gemmtune.cli train --store $OUT/collect.sqlite.gz --exclude-suite none --cv 5 --kind lgbm_rank \
  --device h100 --ship $OUT/model/nvidia-h100-rank.json --report $OUT/model/cv > $OUT/train.log 2>&1
echo "train rc=$?"; grep -E "lgbm_rank|analytic|chosen" $OUT/train.log | tail -4
timeout 120 python3 scripts/exp_pad_odd.py $OUT/pad_odd_333.json 333 4097 1025 \
  BM128-BN128-BK64-S4-W4-G8 BM128-BN128-BK64-S5-W4-G8-F BM64-BN128-BK64-S4-W4-G8 BM128-BN64-BK64-S4-W4-G8 > $OUT/pad_odd.log 2>&1
echo "pad_odd rc=$?"; grep -v Warning $OUT/pad_odd.log | tail -22
tar czf $OUT/model.tgz -C $OUT model train.log collect.log pad_odd.log && rm -rf $OUT/model
ls -la $OUT
