#!/usr/bin/env bash
# Session 20, call 10: --fast with skinny's first CUDA-core choice on fp32 decode (model.topk.with_core)
# on 4 fp32 decode shapes outside the H100 store (benchmarks/suites/validate-fp32-decode-s20.csv), beside
# the default space; `gemmtune bench`, Inductor skipped. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 200 python3 -m gemmtune.cli bench --suite benchmarks/suites/validate-fp32-decode-s20.csv --skip-inductor \
  --skip-tunableop --deadline $(( $(date +%s) + 170 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -A7 "Tuning wall" $OUT/bench/*.md | head -7; grep -A8 "^## Per shape: speedup" $OUT/bench/*.md | sed -n 3,8p
grep -A8 "### fp32dec" $OUT/bench/*.md | grep -E "###|--fast|default"
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
