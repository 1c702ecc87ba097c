#!/usr/bin/env bash
# Session 14: H100 collection for what the shipped ranker does not trust. The H100 store held
# bf16 only, so every fp32 problem was ranked by the analytic model alone (trust 0); and small-M
# lm-head-like unaligned bf16 shapes (1x50257x768) were too far from its unaligned problems.
# Part 1: fp32, spread over every group; part 2: bf16 decode, odd and llm shapes not yet timed.
# Same sample sizes as every earlier H100 collection. GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/device_env.sh"
record_env lightgbm
S="--order spread --mm-sample 40 --splitk-sample 20 --pad-sample 8 --new-sample 12"
timeout 330 python3 -m gemmtune.cli collect --resume-from data/collect/h100/collect.sqlite.gz --dtypes fp32 $S \
  --max-minutes ${FP32_MIN:-4.5} --out $OUT/c1 > $OUT/collect-fp32.log 2>&1
echo "fp32 rc=$?"; tail -3 $OUT/collect-fp32.log
timeout 260 python3 -m gemmtune.cli collect --resume-from $OUT/c1/collect.sqlite.gz --dtypes bf16 --groups decode,odd,llm $S \
  --max-minutes ${BF16_MIN:-3.6} --out $OUT/c2 > $OUT/collect-bf16.log 2>&1
echo "bf16 rc=$?"; tail -3 $OUT/collect-bf16.log
mv $OUT/c2/collect.sqlite.gz $OUT/collect.sqlite.gz 2>/dev/null || mv $OUT/c1/collect.sqlite.gz $OUT/collect.sqlite.gz
tar czf $OUT/progress.tgz -C $OUT c1 c2 --exclude='*.sqlite' --exclude='*.sqlite.gz' 2>/dev/null
rm -rf $OUT/c1 $OUT/c2; ls -la $OUT
