#!/usr/bin/env bash
# Session 24, call 3: DecomposeK's rows of the H100 store measured again on small M x N (M*N < 135168,
# where its sum ran on a few programs before session 23's fix): scripts/remeasure_family.py into a
# copy of data/collect/h100/collect.sqlite.gz. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 560 python3 scripts/remeasure_family.py --store-gz data/collect/h100/collect.sqlite.gz \
  --family decompose_k --max-mn 135168 --out $OUT > $OUT/remeasure.log 2>&1
echo "remeasure rc=$?"; grep -v "Warning\|warn" $OUT/remeasure.log | tail -20
