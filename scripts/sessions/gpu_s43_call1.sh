#!/usr/bin/env bash
# Prepared in session 42 (its device time ran out) for session 43 (~2.5 min; GPU only; no carry). The PDL credit (tune(pdl_credit=), pdl.PDL_CREDIT):
# Llama-1B decode b1, fused + patched + compiled with PDL, its tuning now crediting the strips it
# serves as -pdl twins. Profiled, to compare kernel by kernel with call 5 (the same mode before the
# credit, on another machine: cuBLAS's gate/up at 18.7 us a launch there).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
python3 -m gemmtune_entry tune --shape 64x256x256:bf16 --fast --store /tmp/warm.sqlite --out /tmp/warm.json 2>&1 | tail -1
timeout 200 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 --profile \
  --modes fuse_patch_compile_pdl_graph --out $OUT/bm_credit_llama-1b > /tmp/bm.log 2>&1
echo "bench-model llama-1b rc=$?"; tail -c 3000 /tmp/bm.log > $OUT/bm_credit_llama-1b.log_tail
grep -E "own tuning|fuse_patch_compile_pdl_graph" $OUT/bm_credit_llama-1b/bench-model.md | cut -c1-700 | head -8
python3 -c "import json; m=json.load(open('$OUT/bm_credit_llama-1b/bench-model.json'))['models'][0]; print(m.get('fuse_tune_pdl_credit'), m.get('pdl_winners'))"
