#!/usr/bin/env bash
# Session 24, call 7: the pad+ rows of the H100 store whose per-call copies were all under 4 MiB
# (made with F.pad until this session, one Triton launch now) measured again, exactly those choices,
# into call 3's store (DecomposeK's small-MxN rows already measured again). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 560 python3 scripts/remeasure_family.py --store-gz benchmarks/results/2026-11-27-h100-s24/call3/collect.sqlite.gz \
  --pad-copies-under 4194304 --out $OUT > $OUT/remeasure.log 2>&1
echo "remeasure rc=$?"; grep -v "Warning\|warn" $OUT/remeasure.log | tail -20
