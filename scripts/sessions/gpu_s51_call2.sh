#!/usr/bin/env bash
# Session 51, call 2 (GPU only; no carry; ~6 min): the step gate against the worst case, and what
# a patched layer on its cuBLAS path costs on this host.
# (1) scripts/exp_patch_overhead.py on CUDA: 20 Linear(2048, 2048) bf16 layers at M=1, torch's
#     against patched ones with every eager path on cuBLAS (host time per layer call).
# (2) scripts/exp_eager_gate.py: every layer's first call made to keep its tuned kernel, then the
#     gate per phase, then the gated model against an unpatched copy (Qwen2-0.5B fp32, Llama-1B bf16).
# (3) bench-model Llama-1B bf16 with eager_copy, the deep-copy control call 1 lacked.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 100 python3 scripts/exp_patch_overhead.py --device cuda --dtype bfloat16 --features 2048 > $OUT/overhead.txt 2>&1
echo "overhead rc=$?"; tail -3 $OUT/overhead.txt
timeout 150 python3 scripts/exp_eager_gate.py --model qwen2-0.5b --dtype float32 --out $OUT/gate-qwen2-fp32.json > $OUT/gate.log 2>&1
echo "gate qwen2 rc=$?"; grep -v "^E11\|^\[gemmtune\]" $OUT/gate.log | tail -8
timeout 120 python3 scripts/exp_eager_gate.py --model llama-1b --dtype bfloat16 --out $OUT/gate-llama-bf16.json >> $OUT/gate.log 2>&1
echo "gate llama rc=$?"; grep -v "^E11\|^\[gemmtune\]" $OUT/gate.log | tail -6
LEFT=$(( 570 - $(date +%s) + T0 ))
timeout $LEFT python3 -m gemmtune.cli bench-model --models llama-1b --dtype bfloat16 \
  --phases prefill_b1_s512,decode_b1 --modes eager,eager_copy,eager_patch --eager-rounds 21 \
  --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11" $OUT/bm.log | grep -E "gate|interleaved|rror" | tail -10
tar czf $OUT/bm.tgz -C $OUT bm bm.log && rm -rf $OUT/bm $OUT/bm.log
echo "call took $(( $(date +%s) - T0 )) s"
