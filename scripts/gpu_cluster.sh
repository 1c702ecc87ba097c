#!/usr/bin/env bash
# Issue #21's speed-up measurement on one multi-GPU host (GPU ONLY; one call of the device tool
# on a machine with 2+ GPUs, e.g. nvidia-h200-x2, with carry=[".whl"]):
#   bash scripts/gpu_cluster.sh [SUITE_CSV]      (default benchmarks/suites/cluster-12.csv)
# 1. the suite tuned by plain `gemmtune tune` on GPU 0 alone;
# 2. the same suite tuned by `gemmtune tune --cluster local:$NGPU` (one Dask worker per GPU).
# Each has its own store and its own Triton cache (so the second does not load the first's
# binaries), and prints candidates verified per second (measured / wall s, from --summary), and
# the speed-up of 2 over 1. TUNE_ARGS adds flags to both (e.g. "--timing quick").
# Dask is not on the GPU image: make its wheels once with scripts/fetch_cluster_wheels.sh (they
# land in .whl/, git-ignored) and carry .whl; they are installed to /tmp/site here.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
SUITE=${1:-benchmarks/suites/cluster-12.csv}
NGPU=${NGPU:-$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)}
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  python3 -c "import dask, distributed, torch, triton; print('dask', dask.__version__, 'distributed', \
distributed.__version__, 'torch', torch.__version__, 'triton', triton.__version__)"
  echo "suite $SUITE ($(($(wc -l <"$SUITE") - 1)) shapes), $NGPU GPU(s)"
} 2>&1 | tee "$OUT/cluster-env.txt"
(( NGPU >= 2 )) || echo "warning: $NGPU GPU visible: the cluster run has nothing to spread over" | tee -a "$OUT/cluster-env.txt"

status=0
echo "== single GPU: gemmtune tune (GPU 0)"
CUDA_VISIBLE_DEVICES=0 TRITON_CACHE_DIR=$OUT/triton-single timeout 280 python3 -m gemmtune.cli tune --suite "$SUITE" \
  --store "$OUT/cluster-single.sqlite" --out "$OUT/cluster-single-table.json" --overwrite \
  --summary "$OUT/cluster-single.json" -q ${TUNE_ARGS:-} 2>&1 | tee "$OUT/cluster-single.log" || status=1
echo "== cluster: gemmtune tune --cluster local:$NGPU"
TRITON_CACHE_DIR=$OUT/triton-cluster timeout 280 python3 -m gemmtune.cli tune --suite "$SUITE" --cluster "local:$NGPU" \
  --store "$OUT/cluster-multi.sqlite" --out "$OUT/cluster-multi-table.json" --overwrite \
  --summary "$OUT/cluster-multi.json" -q ${TUNE_ARGS:-} 2>&1 | tee "$OUT/cluster-multi.log" || status=1
rm -rf "$OUT/triton-single" "$OUT/triton-cluster"

python3 - "$OUT" "$NGPU" <<'PY' | tee "$OUT/cluster-speedup.txt"
import json, sys
from pathlib import Path
out, ngpu = Path(sys.argv[1]), sys.argv[2]
rate = {}
for name, label in (("single", "1 GPU, gemmtune tune"), ("multi", f"{ngpu} GPUs, --cluster local:{ngpu}")):
    f = out / f"cluster-{name}.json"
    if not f.exists():
        print(f"{label}: no summary (the run failed or timed out; see cluster-{name}.log)")
        continue
    s = json.loads(f.read_text())
    rate[name] = s["measured"] / s["wall_s"] if s["wall_s"] else float("nan")
    print(f"{label}: {s['measured']} candidates verified + timed in {s['wall_s']:.1f} s "
          f"(start-up {s['startup_s']:.1f} s) = {rate[name]:.2f} candidates/s")
if len(rate) == 2:
    print(f"speed-up: {rate['multi'] / rate['single']:.2f}x on {ngpu} GPUs")
PY
exit $status
