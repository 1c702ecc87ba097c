#!/usr/bin/env bash
# Device call 4 of 2026-11-24: GPU tests of the eager path and CUDA-graph capture rules, then
# bench-model: GPT-2 (eager, eager+patch, compile, patch+compile) and Llama-3.2-1B (the same plus
# max-autotune) after the eager-path rule was changed to count host time.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/env.txt
python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__)" | tee -a $OUT/env.txt
timeout ${TESTS_S:-100} python3 -m pytest -q -m gpu tests/test_eager.py tests/test_persistent.py -k "eager or loop_knobs or (default_space and bf16 and 4096x4096)" -p no:cacheprovider > $OUT/gpu_tests.log 2>&1
echo "gpu tests rc=$?"; tail -4 $OUT/gpu_tests.log
mkdir -p $OUT/small $OUT/llama
OUT=$OUT/small MODELS=gpt2 MODES=eager,eager_patch,compile,patch_compile timeout ${SMALL_S:-140} bash scripts/gpu_bench_model.sh > /dev/null 2>&1
echo "small rc=$?"; grep -E "^gpt2 |rror" $OUT/small/bench-model.log | tail -20
OUT=$OUT/llama MODELS=llama-1b PHASES=decode_b1,prefill_b1_s512 MODES=eager,eager_patch,compile,patch_compile,max_autotune \
  timeout ${LLAMA_S:-300} bash scripts/gpu_bench_model.sh > /dev/null 2>&1
echo "llama rc=$?"; grep -E "^llama |rror" $OUT/llama/bench-model.log | tail -20
rm -f $OUT/small/bench-model.md $OUT/llama/bench-model.md
