#!/usr/bin/env bash
# Session 11, fourth device call (one GPU; carry .minilm only: with .whl the tree passes 64 MiB, so
# --fast ranks with the analytic model here, the documented fallback without lightgbm): 1. the tiled GPU tests again
# (call 3 stopped on a test that ran CPU tensors on a GPU machine); 2. the parity harness, small
# shapes, carried vs indexed K loop after the K_DIV fix; 3. all-MiniLM-L6-v2 (real weights,
# fp16-stored, xz) through bench-model in every mode, max-autotune included (#17's missing figure).
set -u
source scripts/device_env.sh
if [ -f .minilm/model.safetensors.xz ]; then
  rm -rf /tmp/minilm && cp -r .minilm /tmp/minilm && unxz /tmp/minilm/model.safetensors.xz && export MINILM=/tmp/minilm
fi
mkdir -p $OUT/r $OUT/mini
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton, transformers, sentence_transformers as st; print("torch", torch.__version__, "triton", triton.__version__, "transformers", transformers.__version__, "sentence-transformers", st.__version__)"; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
XD=""; python3 -c "import xdist" 2>/dev/null && XD="-n 8"
timeout ${TEST_S:-120} python3 -m pytest -q -x $XD -p no:cacheprovider tests/test_tile_kloop.py \
  tests/test_tile_cstore.py tests/test_static.py tests/test_epilogue.py tests/test_pad.py tests/test_kernels.py > $OUT/r/tests.log 2>&1
echo "tests ($XD) rc=$?"; tail -3 $OUT/r/tests.log
timeout ${PARITY_S:-110} python3 scripts/parity_inductor.py --small --static --indexed-k --limit 8 \
  --out $OUT/r/parity-small.json > $OUT/r/parity-small.log 2>&1
echo "== parity rc=$?"; grep -E "ratio" $OUT/r/parity-small.log | sed -E 's/ +/ /g' | cut -c1-200
OUT=$OUT/mini MODELS=minilm MODES=eager,eager_patch,compile,max_autotune,patch_compile timeout ${MINI_S:-320} python3 - <<'PY' > $OUT/mini/bench-model.log 2>&1
import os, gemmtune.benchmodel as bm
bm.run(["minilm"], phases=list(bm.PHASES), modes=os.environ["MODES"].split(","), out_dir=os.environ["OUT"],
       tune_kwargs={"fast": True}, minilm_folder=os.environ.get("MINILM"))
PY
echo "minilm rc=$?"; grep -E "^minilm|rror|speed|max_autotune" $OUT/mini/bench-model.log | tail -25
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
