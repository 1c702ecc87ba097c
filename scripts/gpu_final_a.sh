#!/usr/bin/env bash
# Device call A of 2026-11-23's second session: GPU tests (skinny, epilogues, every family),
# compute-sanitizer on the atomic/workspace paths, then bench-model on GPT-2, MiniLM and Llama-3.2-1B.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/env.txt
python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)" | tee -a $OUT/env.txt
timeout ${TESTS_S:-270} python3 -m pytest -q -m gpu tests/test_skinny.py tests/test_epilogue.py tests/test_gpu.py -p no:cacheprovider > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; tail -12 $OUT/gpu_tests.log
timeout 90 compute-sanitizer --tool memcheck --print-limit 20 python3 scripts/sanitize_kernels.py > $OUT/sanitize.log 2>&1
echo "memcheck rc=$?"; tail -3 $OUT/sanitize.log
mkdir -p $OUT/small $OUT/llama
OUT=$OUT/small MODELS=gpt2,minilm PHASES=decode_b1,decode_b16,prefill_b1_s512,prefill_b8_s128 \
  timeout ${SMALL_S:-150} bash scripts/gpu_bench_model.sh 2>&1 | grep -E "^(gpt2|minilm) |rror" | tail -40
OUT=$OUT/llama MODELS=llama-1b PHASES=decode_b1,prefill_b1_s512 MODES=eager,eager_patch,compile,patch_compile \
  timeout ${LLAMA_S:-150} bash scripts/gpu_bench_model.sh 2>&1 | grep -E "^llama|rror" | tail -20
