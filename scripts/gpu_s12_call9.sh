#!/usr/bin/env bash
# Session 12, device call 9 (one GPU; carry .whl): Qwen2-0.5B decode b1, compile + coordinate descent against
# patch + the same, with each graph's kernels profiled: which layer gives patch its 9.6% in call 8.
set -u
source scripts/device_env.sh
record_env transformers lightgbm
mkdir -p $OUT/qwen2
OUT=$OUT/qwen2 timeout ${BENCH_S:-570} python3 - <<'PY' > $OUT/qwen2/bench-model.log 2>&1
import os, gemmtune.benchmodel as bm
bm.run(["qwen2-0.5b"], phases=["decode_b1"], modes=["compile_cdt_graph", "patch_compile_cdt_graph"], profile=True,
       out_dir=os.environ["OUT"], tune_kwargs={"fast": True})
PY
echo "qwen2 rc=$?"; grep -E "^qwen2|rror|interleaved" $OUT/qwen2/bench-model.log | grep -v "^E11" | tail -12
rm -f $OUT/qwen2/bench-model.md
grep -v "^E11" $OUT/qwen2/bench-model.log | gzip > $OUT/qwen2/bench-model.log.gz && rm $OUT/qwen2/bench-model.log
