#!/usr/bin/env bash
# Session 61, call 3 (GPU only; no carry; ~8 min). Retired layers now have a class of their own (nn._retired_class;
# call 2 found dynamo handing the unpatched model's graph to a retired copy of torch's classes). bench-model on
# Llama-1B decode b1, #17's two targets in one run: eager + patch against its deep copy (31 paired rounds), and
# patch + compile (the same retired copy, its GEMMs routed by compile_route) against max-autotune, both replayed
# from CUDA graphs. The -m gpu tests of the change first.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 45 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_retire.py > $OUT/pytest_gpu.log 2>&1
echo "pytest -m gpu rc=$? t=$(( $(date +%s) - T0 )) s"; tail -2 $OUT/pytest_gpu.log
timeout 500 python3 -m gemmtune.cli bench-model --models llama-1b --dtype bfloat16 --phases decode_b1 \
  --modes eager,eager_copy,eager_patch,patch_compile,max_autotune,patch_compile_graph,max_autotune_graph \
  --eager-rounds 31 --out $OUT/bm-llama-1b > $OUT/bm-llama-1b.log 2>&1
echo "bench-model rc=$? t=$(( $(date +%s) - T0 )) s"
grep -E "Step gate|Given back|interleaved|CUDA graphs|decode_b1 \|" $OUT/bm-llama-1b/bench-model.md | cut -c1-1500
grep -E "first calls|eager paths" $OUT/bm-llama-1b.log | cut -c1-300
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('compile_routes', d['models'][0].get('compile_routes'))" $OUT/bm-llama-1b/bench-model.json
tar czf $OUT/bm-llama-1b.tgz -C $OUT bm-llama-1b bm-llama-1b.log && rm -rf $OUT/bm-llama-1b $OUT/bm-llama-1b.log
echo "call took $(( $(date +%s) - T0 )) s"
