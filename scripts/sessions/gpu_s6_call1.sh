#!/usr/bin/env bash
# Device call 1 of session 6 (2026-11-25): issue 17 after patch leaves all-cuBLAS layers as torch's.
# GPU tests of the eager/patch path; eager vs eager + patch (interleaved) on GPT-2 and MiniLM, every
# phase; Llama-3.2-1B decode b1 in every mode, max-autotune included, in one run. Carry .whl
# (lightgbm, so the shipped ranker ranks) and .minilm (all-MiniLM-L6-v2, weights as fp16, xz-compressed).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1
# .minilm carries the weights xz-compressed (the working tree's 64 MiB limit): unpacked here.
if [ -f .minilm/model.safetensors.xz ]; then
  rm -rf /tmp/minilm && cp -r .minilm /tmp/minilm && unxz /tmp/minilm/model.safetensors.xz && export MINILM=/tmp/minilm
fi
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton, transformers, lightgbm; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__, 'lightgbm', lightgbm.__version__)"; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
[ "${PART:-ab}" != b ] && timeout ${TEST_S:-100} python3 -m pytest -q -x tests/test_eager.py tests/test_modeltune.py > $OUT/tests.log 2>&1
[ "${PART:-ab}" != b ] && { echo "tests rc=$?"; tail -3 $OUT/tests.log; }
mkdir -p $OUT/small $OUT/llama
[ "${PART:-ab}" != b ] && OUT=$OUT/small MODELS=gpt2,minilm MODES=eager,eager_patch timeout ${SMALL_S:-150} bash scripts/gpu_bench_model.sh > /dev/null 2>&1
echo "small rc=$?"; grep -E "^(gpt2|minilm)|rror" $OUT/small/bench-model.log | tail -30
[ "${PART:-ab}" != a ] && OUT=$OUT/llama MODELS=llama-1b PHASES=decode_b1 MODES=eager,eager_patch,patch_compile,compile,max_autotune \
  timeout ${LLAMA_S:-300} bash scripts/gpu_bench_model.sh > /dev/null 2>&1
echo "llama rc=$?"; grep -E "^llama|rror" $OUT/llama/bench-model.log | tail -30
rm -f $OUT/small/bench-model.md $OUT/llama/bench-model.md $OUT/small/bench-model.png
