#!/usr/bin/env bash
# Device call 2 of 2026-11-24: GPU tests of the eager path / CUDA-graph rules and persistent_tma,
# compute-sanitizer (TMA cases included), then bench-model on GPT-2 + MiniLM (every mode) and
# Llama-3.2-1B (no max-autotune: a later call) to see eager + patch against eager.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/env.txt
python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)" | tee -a $OUT/env.txt
timeout ${TESTS_S:-150} python3 -m pytest -q -m gpu tests/test_eager.py tests/test_persistent.py -p no:cacheprovider > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; tail -6 $OUT/gpu_tests.log
timeout ${SAN_S:-120} compute-sanitizer --tool memcheck --print-limit 20 python3 scripts/sanitize_kernels.py > $OUT/sanitize.log 2>&1
echo "memcheck rc=$?"; grep -E "persistent|ERROR SUMMARY|sanitize:" $OUT/sanitize.log | tail -12
mkdir -p $OUT/small $OUT/llama
OUT=$OUT/small MODELS=gpt2,minilm timeout ${SMALL_S:-230} bash scripts/gpu_bench_model.sh > /dev/null 2>&1
echo "small rc=$?"; grep -E "^(gpt2|minilm) |rror" $OUT/small/bench-model.log | tail -40
OUT=$OUT/llama MODELS=llama-1b PHASES=decode_b1,decode_b16,prefill_b1_s512 MODES=eager,eager_patch,compile,patch_compile \
  timeout ${LLAMA_S:-170} bash scripts/gpu_bench_model.sh > /dev/null 2>&1
echo "llama rc=$?"; grep -E "^llama |rror" $OUT/llama/bench-model.log | tail -20
rm -f $OUT/small/bench-model.md $OUT/llama/bench-model.md
