#!/usr/bin/env bash
# Session 11, fifth device call (one GPU; carry .whl and .minilm): the cuBLAS hand-back under
# torch.compile (torch_ops.aten_to_inductor). 1. its GPU tests and the tiled/epilogue/eager tests;
# 2. MiniLM compile vs patch + compile, plain and replayed from CUDA graphs (call 4: 1.329 vs 3.575 ms);
# 3. GPT-2 compile vs patch + compile, every phase, plain and graph modes.
set -u
source scripts/device_env.sh
if [ -f .minilm/model.safetensors.xz ]; then
  rm -rf /tmp/minilm && cp -r .minilm /tmp/minilm && unxz /tmp/minilm/model.safetensors.xz && export MINILM=/tmp/minilm
fi
mkdir -p $OUT/r $OUT/mini $OUT/gpt2
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton, transformers, sentence_transformers as st, lightgbm as lg; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__, 'sentence-transformers', st.__version__, 'lightgbm', lg.__version__)"; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
XD=""; python3 -c "import xdist" 2>/dev/null && XD="-n 8"
timeout ${TEST_S:-150} python3 -m pytest -q -x $XD -p no:cacheprovider tests/test_dispatch.py tests/test_eager.py \
  tests/test_tile_kloop.py tests/test_tile_cstore.py tests/test_static.py tests/test_epilogue.py tests/test_pad.py tests/test_kernels.py > $OUT/r/tests.log 2>&1
echo "tests ($XD) rc=$?"; tail -3 $OUT/r/tests.log
bench() {  # $1 model, $2 modes, $3 phases, $4 out, $5 timeout
  OUT=$4 MODES=$2 PHASES=$3 MODEL=$1 timeout $5 python3 - <<'PY' > $4/bench-model.log 2>&1
import os, gemmtune.benchmodel as bm
bm.run([os.environ["MODEL"]], phases=os.environ["PHASES"].split(","), modes=os.environ["MODES"].split(","),
       out_dir=os.environ["OUT"], tune_kwargs={"fast": True}, minilm_folder=os.environ.get("MINILM"))
PY
  echo "$1 rc=$?"; grep -E "^$1|rror|interleaved" $4/bench-model.log | tail -24
}
bench minilm eager,compile,patch_compile,compile_graph,patch_compile_graph decode_b1 $OUT/mini 200
bench gpt2 eager,compile,patch_compile,compile_graph,patch_compile_graph prefill_b1_s512,prefill_b8_s128,decode_b1,decode_b16 $OUT/gpt2 280
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
