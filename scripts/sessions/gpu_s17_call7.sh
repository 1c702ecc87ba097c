#!/usr/bin/env bash
# Session 17, call 7: the final tree's GPU tests (-n 4), then the public suite's splitk, prefill and
# square groups with --fast ranked by the retrained (now shipped) H100 ranker beside --fast ranked by
# the one shipped before it (.s17old/, carried): the "model top-1" column is the OLD ranker here.
# Inductor and TunableOp skipped. GPU only; carry .whl, .s17old.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 200 python3 -m pytest -q -n 4 tests/test_gpu.py > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; tail -3 $OUT/gpu_tests.txt
timeout 380 python3 scripts/exp_fast_new_model.py .s17old/nvidia-h100-rank.json -- --groups splitk,prefill,square \
  --skip-inductor --skip-tunableop --deadline $(( $(date +%s) + 330 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"
grep -A9 "Tuning wall" $OUT/bench/*.md; grep -A22 "^## Per shape: speedup" $OUT/bench/*.md
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
