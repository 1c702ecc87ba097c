#!/usr/bin/env bash
# Session 12, device call 5 (one GPU; carry .whl): GPT-2 prefill 1x512 in the three CUDA-graph modes that
# #17's target compares (call 1's 300 s limit cut max-autotune's prefill compile).
set -u
source scripts/device_env.sh
record_env transformers lightgbm
mkdir -p $OUT/gpt2
OUT=$OUT/gpt2 timeout ${BENCH_S:-540} python3 - <<'PY' > $OUT/gpt2/bench-model.log 2>&1
import os, gemmtune.benchmodel as bm
bm.run(["gpt2"], phases=["prefill_b1_s512"], modes=["compile_graph", "patch_compile_graph", "max_autotune_graph"],
       out_dir=os.environ["OUT"], tune_kwargs={"fast": True})
PY
echo "gpt2 rc=$?"; grep -E "^gpt2|rror|interleaved" $OUT/gpt2/bench-model.log | grep -v "^E11" | tail -12
rm -f $OUT/gpt2/bench-model.md
grep -v "^E11" $OUT/gpt2/bench-model.log | gzip > $OUT/gpt2/bench-model.log.gz && rm $OUT/gpt2/bench-model.log
