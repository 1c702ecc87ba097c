#!/usr/bin/env bash
# Session 51, call 5 (GPU only; no carry; ~6 min): what a user's eager generate() gains, patched as
# the README says (the prompt's pass gated by patch, the decode step by gate_eager + decode_step):
# greedy generate of 32 tokens after a 128-token prompt, un-graphed, against an unpatched copy,
# 9 paired rounds; Llama-1B bf16, then Qwen2-0.5B fp32 (3xTF32).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 220 python3 scripts/exp_generate_gate.py --model llama-1b --dtype bfloat16 --out $OUT/gen-llama-bf16.json \
  > $OUT/gen.log 2>&1
echo "llama rc=$?"; grep -v "^E11\|^\[gemmtune\]" $OUT/gen.log | tail -4
LEFT=$(( 440 - $(date +%s) + T0 ))
timeout $LEFT python3 scripts/exp_generate_gate.py --model qwen2-0.5b --dtype float32 --out $OUT/gen-qwen2-fp32.json \
  >> $OUT/gen.log 2>&1
echo "qwen2 rc=$?"; grep -v "^E11\|^\[gemmtune\]" $OUT/gen.log | tail -3
echo "call took $(( $(date +%s) - T0 )) s"
