#!/usr/bin/env bash
# Session 58, call 5 (GPU host; no carry; ~30 s): the host cost of each statement of gemmtune's memoized F.linear
# path with a CUDA input, against nn.Linear's forward (scripts/sessions/exp_forward_host.py).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 60 python3 scripts/sessions/exp_forward_host.py > $OUT/forward_host.log 2>&1; echo "rc=$?"
grep -v Warn $OUT/forward_host.log
lscpu | grep -E "Model name|MHz" | head -3
