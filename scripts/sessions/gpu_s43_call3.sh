#!/usr/bin/env bash
# Prepared in session 42 for session 43 (~6 min; GPU only; no carry). The norm fold's first GPU run
# (GEMMTUNE_FOLD_NORMS=1, gemmtune.normfold; built and tested on the CPU in session 42):
# 1. the fold kernel's tests against fp64 on the GPU, and memcheck over them;
# (It also carries call 1's PDL-credit check: the fold=0 run's _pdl mode tunes with the credit.)
# 2. Llama-1B decode b1, fused + patched + compiled, with the fold off and on, profiled (the norms
#    were ~115 of 1126 us of this step in session 42's call 5), with and without PDL.
# At most 8 files come back from $OUT: the bench-model folders are tarred.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
python3 -m pytest -q -p no:cacheprovider tests/test_norm_fold_kernel.py 2>&1 | tail -3
compute-sanitizer --tool memcheck --print-limit 20 python3 -m pytest -q -p no:cacheprovider tests/test_norm_fold_kernel.py \
  -k "fp64 or views" 2>&1 | tail -4
python3 -m gemmtune_entry tune --shape 64x256x256:bf16 --fast --store /tmp/warm.sqlite --out /tmp/warm.json 2>&1 | tail -1
for f in 0 1; do
  GEMMTUNE_FOLD_NORMS=$f timeout 200 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 --profile \
    --modes fuse_patch_compile_graph,fuse_patch_compile_pdl_graph --out /tmp/bm_fold$f > /tmp/bm_fold$f.log 2>&1
  echo "fold=$f rc=$?"; grep -E "interleaved|\| fuse_patch" /tmp/bm_fold$f/bench-model.md | cut -c1-300
  python3 -c "import json; m=json.load(open('/tmp/bm_fold$f/bench-model.json'))['models'][0]; print('credit', m.get('fuse_tune_pdl_credit'), 'pdl_winners', m.get('pdl_winners'))"
done
tar czf $OUT/bm_fold.tgz -C /tmp bm_fold0 bm_fold1 bm_fold0.log bm_fold1.log
