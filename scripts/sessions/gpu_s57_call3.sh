#!/usr/bin/env bash
# Session 57, call 3 (GPU only; ~1.5 min): the shipped 127-leaf H200 ranker, gzipped, loads on the GPU machine (no
# lightgbm there: the numpy text reader) and ranks a --fast tune of three shapes.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 40 python3 -c "
from gemmtune.model import default_model
m = default_model()
print('model:', type(m).__name__, getattr(m, 'family', None), m.provenance.get('training', {}).get('regressor', {}).get('num_leaves'))
" 2>&1 | tail -3
timeout 70 python3 -m gemmtune.cli tune --fast --shape 8192x1x4096 --shape 16x6144x4096 --shape 2048x6144x4096 \
  --store $OUT/s.sqlite --out $OUT/t.json > $OUT/tune.log 2>&1; echo "tune rc=$?"; grep -iE "model|ranker|stale|warn|->" $OUT/tune.log | head -8; tail -6 $OUT/tune.log
