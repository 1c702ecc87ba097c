#!/usr/bin/env bash
# Session 61, call 1 (GPU only; no carry; ~9.5 min). #17: after the step gate, nn.retire gives the layers on cuBLAS
# for every eager shape back to torch's class (session 60: such converted layers cost 2-4 us of host time a call,
# eager + patch 0.971-0.984x its unpatched deep copy), and compile_route puts their GEMM back on the dispatcher in
# Inductor's graphs. 1) the -m gpu tests of the change; 2) bench-model, un-graphed eager modes paired against the
# deep copy, plus compile and patch_compile (which compiles the same retired copy), Llama-1B's config and GPT-2.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 180 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_retire.py tests/test_eager_gate.py \
  tests/test_fuse_compile.py tests/test_nn_hot_shape.py > $OUT/pytest_gpu.log 2>&1
echo "pytest -m gpu rc=$? t=$(( $(date +%s) - T0 )) s"; tail -4 $OUT/pytest_gpu.log
run_bm() {  # name phases modes seconds
  timeout $4 python3 -m gemmtune.cli bench-model --models $1 --dtype bfloat16 \
    --phases $2 --modes $3 --eager-rounds 31 --out $OUT/bm-$1 > $OUT/bm-$1.log 2>&1
  echo "bench-model $1 rc=$? t=$(( $(date +%s) - T0 )) s"
  grep -E "Step gate|Given back|interleaved" $OUT/bm-$1/bench-model.md | cut -c1-1200
  grep -E "eager paths|given back|first calls" $OUT/bm-$1.log | cut -c1-300
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); m=d['models'][0]; print('compile_routes', m.get('compile_routes'))" $OUT/bm-$1/bench-model.json 2>&1 | tail -1
  tar czf $OUT/bm-$1.tgz -C $OUT bm-$1 bm-$1.log && rm -rf $OUT/bm-$1 $OUT/bm-$1.log
}
run_bm llama-1b decode_b1,decode_b16 eager,eager_copy,eager_patch,compile,patch_compile 250
LEFT=$(( 560 - $(date +%s) + T0 ))
[ $LEFT -ge 90 ] && run_bm gpt2 prefill_b1_s512,decode_b1,decode_b16 eager,eager_copy,eager_patch $LEFT
echo "call took $(( $(date +%s) - T0 )) s"
