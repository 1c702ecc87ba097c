#!/usr/bin/env bash
# Session 44, call 4 (GPU only; no carry; ~5 min).
# 1. Where a tune's first shape spends its extra seconds (session 43: 3-4.5 s more than its later
#    shapes in every bench mode, not waiting on compile workers; call 1 of this session: the
#    benchmark worker compiling the first shape itself, GEMMTUNE_FIRST_SHAPE_HERE=1, did not help).
#    `tune --fast` over the public decode and odd groups, with the new worker trace
#    (GEMMTUNE_WORKER_TRACE), on an empty Triton cache, then again (a new store, Triton's cache warm).
# 2. The norm fold with PDL: call 2 measured Llama-1B decode b1 (PDL on) at 1.061 ms folded against
#    1.032 ms unfolded, the folded strips launched without PDL. They now run as the -pdl twins
#    (normfold.rms_pdl_decomposition). Folded and not, each a process.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
for run in cold warm; do
  rm -rf /tmp/trace_$run
  GEMMTUNE_WORKER_TRACE=/tmp/trace_$run timeout 150 python3 -m gemmtune_entry tune --preset public --groups decode,odd \
    --fast --store /tmp/ft_$run.sqlite --out /tmp/ft_$run.json > /tmp/ft_$run.log 2>&1
  echo "tune $run rc=$?"; tail -1 /tmp/ft_$run.log
  python3 scripts/worker_trace.py /tmp/trace_$run > $OUT/trace_$run.txt 2>&1
  head -30 $OUT/trace_$run.txt | cut -c1-260
done
for f in 0 1; do
  GEMMTUNE_FOLD_NORMS=$f timeout 200 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 --profile \
    --modes fuse_patch_compile_pdl_graph --out /tmp/bm_pdlfold$f > /tmp/bm_pdlfold$f.log 2>&1
  echo "fold=$f rc=$?"; grep -E "\| fuse_patch" /tmp/bm_pdlfold$f/bench-model.md | cut -c1-240
  python3 -c "import json; m=json.load(open('/tmp/bm_pdlfold$f/bench-model.json'))['models'][0]; print('step ms', m['modes']['fuse_patch_compile_pdl_graph']['phases']['decode_b1']['ms'])"
done
tar czf $OUT/s44c4.tgz -C /tmp trace_cold trace_warm ft_cold.log ft_warm.log bm_pdlfold0 bm_pdlfold1 bm_pdlfold0.log bm_pdlfold1.log
