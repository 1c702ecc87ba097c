#!/usr/bin/env bash
# Session 20, call 6: persistent_tma with 6-8 stages beside its space's 4-5 and cuBLAS on mid-size
# problems (scripts/exp_persistent_stages.py). GPU only.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 420 python3 scripts/exp_persistent_stages.py $OUT/stages.json 1000x1000x1000 1024x1024x1024 \
  333x4097x1025 777x1531x2049 512x4096x4096 > $OUT/stages.log 2>&1
echo "rc=$?"; grep -v Warning $OUT/stages.log | tail -60
