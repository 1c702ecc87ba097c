#!/usr/bin/env bash
# First device call of session 12 (one GPU; carry .minilm and .whl, and move data/collect out of the
# tree for the call: with it the tree passes 64 MiB). Session 11 added the cuBLAS hand-back under
# torch.compile (torch_ops.aten_to_inductor) and measured it on MiniLM only, un-graphed and
# against compile_graph. This call:
# 1. the GPU tests of the dispatcher, eager path, epilogues and the tiled kernel;
# 2. MiniLM: compile_graph, patch_compile_graph, max_autotune_graph (the target compares with max-autotune);
# 3. GPT-2 decode b1 and prefill 1x512: the same three graph modes (session 10, H100: patch + compile
#    1.166x / 1.006x max-autotune before the hand-back).
set -u
source scripts/device_env.sh
unpack_minilm
mkdir -p $OUT/r $OUT/mini $OUT/gpt2
record_env transformers sentence_transformers lightgbm
XD=""; python3 -c "import xdist" 2>/dev/null && XD="-n 12"
timeout ${TEST_S:-150} python3 -m pytest -q $XD -p no:cacheprovider tests/test_dispatch.py tests/test_eager.py \
  tests/test_epilogue.py tests/test_tile_kloop.py tests/test_tile_cstore.py > $OUT/r/tests.log 2>&1
echo "tests ($XD) rc=$?"; grep -E "^FAILED|passed|failed" $OUT/r/tests.log | tail -8
bench() {  # $1 model, $2 modes, $3 phases, $4 out, $5 timeout
  OUT=$4 MODES=$2 PHASES=$3 MODEL=$1 timeout $5 python3 - <<'PY' > $4/bench-model.log 2>&1
import os, gemmtune.benchmodel as bm
bm.run([os.environ["MODEL"]], phases=os.environ["PHASES"].split(","), modes=os.environ["MODES"].split(","),
       out_dir=os.environ["OUT"], tune_kwargs={"fast": True}, minilm_folder=os.environ.get("MINILM"))
PY
  echo "$1 rc=$?"; grep -E "^$1|rror|interleaved" $4/bench-model.log | tail -16
}
bench minilm compile_graph,patch_compile_graph,max_autotune_graph decode_b1 $OUT/mini 200
bench gpt2 compile_graph,patch_compile_graph,max_autotune_graph decode_b1,prefill_b1_s512 $OUT/gpt2 300
for d in mini gpt2; do rm -f $OUT/$d/bench-model.md; done
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
