#!/usr/bin/env bash
# Session 44, call 7 (GPU only; no carry; ~5 min). The fold's -flat-sum strips now sum x^2 at every
# K step from the x just loaded (call 1: the re-read after the loop left the fold at 1.06-1.44x the
# plain strip's time). Offline for sm_90 (triton 3.6): fold 48 / 71 / 64 / 48 registers, unit-weight
# 40 / 48 / 64 / 40, plain 38 / 49 / 56 / 38 on exp_fold_ncu's four cases. Its tests and memcheck,
# the kernels side by side, then Llama-1B decode b1 with PDL, fold off and on (as call 4).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_norm_fold_kernel.py 2>&1 | tail -1
timeout 100 compute-sanitizer --tool memcheck --print-limit 20 python3 -m pytest -q -p no:cacheprovider \
  tests/test_norm_fold_kernel.py -k "fp64 or views" 2>&1 | tail -2
(cd scripts && timeout 90 python3 exp_fold_ncu.py time 2>&1 | tee $OUT/fold_time.txt)
for f in 0 1; do
  GEMMTUNE_FOLD_NORMS=$f timeout 200 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 --profile \
    --modes fuse_patch_compile_pdl_graph --out /tmp/bm_pdlfold$f > /tmp/bm_pdlfold$f.log 2>&1
  echo "fold=$f rc=$?"; grep -E "\| fuse_patch" /tmp/bm_pdlfold$f/bench-model.md | cut -c1-240
  python3 -c "import json; m=json.load(open('/tmp/bm_pdlfold$f/bench-model.json'))['models'][0]; print('step ms', m['modes']['fuse_patch_compile_pdl_graph']['phases']['decode_b1']['ms'])"
done
tar czf $OUT/s44c7.tgz -C /tmp bm_pdlfold0 bm_pdlfold1 bm_pdlfold0.log bm_pdlfold1.log
