#!/usr/bin/env bash
# Device call 1 of 2026-11-24 (session 3): #19 single-shape --fast (cold, warm server) against
# max-autotune on 5 public shapes; #16 the odd group (default and --fast, pad+ restored for
# pointer families); #21 the cluster path end to end on one GPU. Carry .whl (dask, lightgbm, scipy).
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > $OUT/pip.log 2>&1
export PYTHONPATH=$PWD/src:/tmp/site
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton, lightgbm, dask; print('torch', torch.__version__, 'triton', triton.__version__, 'lightgbm', lightgbm.__version__, 'dask', dask.__version__)"
  python3 -c "from gemmtune.device import current_or; from gemmtune.model.shipped import shipped_for; print('ranker:', shipped_for(current_or()))"
} > $OUT/env.txt 2>&1; cat $OUT/env.txt
OUT=$OUT timeout ${SINGLE_S:-300} bash scripts/single_shape_fast.sh
timeout ${BENCH_S:-150} python3 -m gemmtune.cli bench --groups odd --skip-inductor --skip-tunableop --out $OUT/odd \
  > $OUT/odd.log 2>&1
echo "odd bench rc=$?"; grep -E "^odd |geomean" $OUT/odd.log | sed 's/  */ /g' | cut -c1-220
rm -f $OUT/odd/*.png
timeout ${CLUSTER_S:-100} python3 -m gemmtune.cli tune --suite benchmarks/suites/cluster-3.csv --cluster local:1 --fast \
  --store $OUT/cluster1.sqlite --out $OUT/cluster1-table.json --summary $OUT/cluster1.json > $OUT/cluster1.log 2>&1
echo "cluster rc=$?"; tail -5 $OUT/cluster1.log; cat $OUT/cluster1.json 2>/dev/null | head -c 600
