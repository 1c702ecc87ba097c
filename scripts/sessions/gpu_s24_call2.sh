#!/usr/bin/env bash
# Session 24, call 2: every GPU-marked test with the prepared launches of DecomposeK, persistent_tma
# and pad+ (tests fixed after call 1: a shape's first call runs the generic launch for its fp64
# check); scripts/bench_prepared.py again; GPT-2 (the odd 50257-word head: pad+ choices) through
# bench-model, eager against eager + patch, un-graphed and from CUDA graphs. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm transformers
timeout 230 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed" $OUT/gpu_tests.txt | tail -8
timeout 100 python3 scripts/bench_prepared.py --out $OUT > $OUT/bench_prepared.log 2>&1
echo "bench rc=$?"; tail -15 $OUT/bench_prepared.log
timeout 200 python3 -m gemmtune.cli bench-model --models gpt2 \
  --phases prefill_b1_s512,prefill_b8_s128,decode_b1,decode_b16 --modes eager,eager_patch,eager_graph,eager_patch_graph \
  --out $OUT/bm-gpt2 > $OUT/bm-gpt2.log 2>&1
echo "bench-model gpt2 rc=$?"; grep -v Warning $OUT/bm-gpt2.log | tail -25
tar czf $OUT/bench-model.tgz -C $OUT bm-gpt2 bm-gpt2.log 2>/dev/null && rm -rf $OUT/bm-gpt2 $OUT/bm-gpt2.log
