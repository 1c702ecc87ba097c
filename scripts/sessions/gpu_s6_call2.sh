#!/usr/bin/env bash
# Device call 2 of session 6 (2026-11-25): bench-model's CUDA-graph modes (each step replayed
# from a graph: the GPU's time) on Llama-3.2-1B decode b1, max-autotune last (its compile is the
# long part); first the GPU tests of the graph capture and of the patched layers' eager path.
# MODELS / PHASES / MODES / LLAMA_S override. Carry .whl (lightgbm).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)"; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
[ -n "${TEST_S:-}" ] && timeout ${TEST_S} python3 -m pytest -q tests/test_benchmodel.py tests/test_eager.py -k "gpu or graph or profile" > $OUT/tests.log 2>&1
[ -n "${TEST_S:-}" ] && { echo "tests rc=$?"; tail -3 $OUT/tests.log; }
if [ -f .minilm/model.safetensors.xz ]; then  # MiniLM's weights, carried xz-compressed
  rm -rf /tmp/minilm && cp -r .minilm /tmp/minilm && unxz /tmp/minilm/model.safetensors.xz && export MINILM=/tmp/minilm
fi
if [ -n "${SMALL_S:-}" ]; then  # GPT-2 and MiniLM, no max-autotune (its compile is the long part)
  mkdir -p $OUT/small
  OUT=$OUT/small MODELS=gpt2,minilm PHASES=decode_b1,prefill_b1_s512,embed_64 \
    MODES=eager_graph,eager_patch_graph,compile_graph,patch_compile_graph timeout $SMALL_S bash scripts/gpu_bench_model.sh > /dev/null 2>&1
  echo "small rc=$?"; grep -E "^(gpt2|minilm)|rror|Traceback" $OUT/small/bench-model.log | tail -20
  rm -f $OUT/small/bench-model.md $OUT/small/bench-model.png
fi
mkdir -p $OUT/bm
OUT=$OUT/bm MODELS=${MODELS:-llama-1b} PHASES=${PHASES:-decode_b1} \
  MODES=${MODES:-eager_graph,eager_patch_graph,compile_graph,patch_compile_graph,max_autotune_graph} \
  timeout ${LLAMA_S:-420} bash scripts/gpu_bench_model.sh > /dev/null 2>&1
echo "bench-model rc=$?"; grep -E "^(llama|qwen|gpt2|minilm)|rror|Traceback" $OUT/bm/bench-model.log | grep -v "^E1125\|select_algorithm" | tail -30
rm -f $OUT/bm/bench-model.md
