#!/usr/bin/env bash
# Device calls of session 6 (2026-11-25): the public suite (less fp8) after the feature-version-2
# retrain, every gemmtune mode (the adaptive top-k included) against Inductor max-autotune and
# cuBLAS. BENCH_GROUPS picks the part of the suite this call runs. Carry .whl (lightgbm, so the
# shipped LightGBM ranker ranks, as a user with gemmtune[model] installed would have it).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton, lightgbm; print('torch', torch.__version__, 'triton', triton.__version__, 'lightgbm', lightgbm.__version__)"
  python3 -W always -c "from gemmtune.model import default_model; from gemmtune.device import DeviceInfo; m = default_model(DeviceInfo.from_torch()); print('model', m, getattr(m, 'feature_version', ''))"; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
if [ -n "${DET:-}" ]; then timeout 90 python3 scripts/determinism_check.py 2>&1 | tee $OUT/determinism.log; fi
timeout ${BENCH_S:-560} python3 -m gemmtune.cli bench --groups ${BENCH_GROUPS} --deadline $(( $(date +%s) + ${DEADLINE_S:-480} )) \
  --skip-tunableop --extra-modes auto --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|^\| (all|decode|splitk|odd|prefill|square) " $OUT/bench/*.md | cut -c1-250
grep -A9 "Tuning wall" $OUT/bench/*.md
rm -f $OUT/bench/*.png
