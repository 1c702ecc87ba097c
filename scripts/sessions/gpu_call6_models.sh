#!/usr/bin/env bash
# Device call 6 of 2026-11-24: Inductor takes the exported persistent_tma / addmm lookup entries;
# bench-model with eager vs eager + patch interleaved and each layer's eager path recorded.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/env.txt
timeout ${LUT_S:-110} python3 scripts/check_inductor_lut.py > $OUT/inductor_lut.log 2>&1
echo "inductor lut rc=$?"; grep -E "^(exported|mm |addmm |hits|inductor lut)" $OUT/inductor_lut.log
mkdir -p $OUT/llama $OUT/small
OUT=$OUT/llama MODELS=llama-1b PHASES=decode_b1,prefill_b1_s512 MODES=eager,eager_patch,compile,patch_compile \
  timeout ${LLAMA_S:-260} bash scripts/gpu_bench_model.sh > /dev/null 2>&1
echo "llama rc=$?"; grep -E "^llama|rror" $OUT/llama/bench-model.log | tail -20
OUT=$OUT/small MODELS=gpt2,minilm MODES=eager,eager_patch \
  timeout ${SMALL_S:-180} bash scripts/gpu_bench_model.sh > /dev/null 2>&1
echo "small rc=$?"; grep -E "^(gpt2|minilm)|rror" $OUT/small/bench-model.log | tail -30
rm -f $OUT/small/bench-model.md $OUT/llama/bench-model.md
