#!/usr/bin/env bash
# Session 59, call 1 (GPU only; no carry; ~3 min): #17, why a patched Llama decode step's converted layers cost ~1.7 us
# a layer more host time than nn.Linear on the GPU host (session 58, call 4) and not on the CPU machine.
# 1. exp_forward_host.py: each statement of the memoized F.linear path, timeit, CUDA input.
# 2. exp_forward_ladder.py: paired decode steps of the patched model with forwards adding the path's statements in turn.
# 3. exp_step_profile.py: a cProfile diff of a plain and a patched step, and the torch function modes inside a layer.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 90 python3 scripts/sessions/exp_forward_host.py > $OUT/forward_host.log 2>&1; echo "forward_host rc=$?"
grep -v Warn $OUT/forward_host.log | tail -16
timeout 150 python3 scripts/sessions/exp_forward_ladder.py --device cuda --dtype bfloat16 --features 2048 --steps 300 \
  > $OUT/ladder.log 2>&1; echo "ladder rc=$?"; grep -v Warn $OUT/ladder.log | tail -9
timeout 120 python3 scripts/sessions/exp_step_profile.py --device cuda --dtype bfloat16 --features 2048 --steps 50 \
  > $OUT/step_profile.log 2>&1; echo "profile rc=$?"; grep -v Warn $OUT/step_profile.log | tail -36
echo "call took $(( $(date +%s) - T0 )) s"
