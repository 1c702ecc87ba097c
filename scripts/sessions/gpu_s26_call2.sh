#!/usr/bin/env bash
# Session 26, call 2: mid-size decode GEMMs (scripts/exp_mid_decode.py): cuBLAS, a pure read of
# B, skinny's sweep; then Nsight Compute on the best skinny config and cuBLAS for two shapes
# (duration, DRAM throughput, occupancy, stall reasons). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 400 python3 scripts/exp_mid_decode.py --out $OUT > $OUT/mid.log 2>&1
echo "exp rc=$?"; grep -v "^#" $OUT/mid.log | cut -c1-330 | tail -14
for shape in "8 1536 4096 row" "1 2048 8192 col" "8 2816 896 row"; do
  best=$(python3 - $shape <<'PY'
import json, os, sys
m, n, k, lay = sys.argv[1:]
rows = json.load(open(os.environ["OUT"] + "/mid_decode.json"))["rows"]
r = [r for r in rows if (r["M"], r["N"], r["K"], r["layout_b"]) == (int(m), int(n), int(k), lay)][0]
print(r["best_skinny"][1])
PY
)
  tag=$(echo $shape | tr ' ' x)
  for cid in aten "$best"; do
    timeout 60 ncu --clock-control none --launch-skip 6 --launch-count 4 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
      --section WarpStateStats python3 scripts/exp_mid_decode.py --drive $shape "$cid" > $OUT/ncu-$tag-${cid%%:*}.txt 2>&1
    echo "== $tag $cid"; grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Grid Size|Block Size|Warp Cycles Per Issued|Theoretical Occ" $OUT/ncu-$tag-${cid%%:*}.txt | head -40
  done
done
tar czf $OUT/ncu.tgz -C $OUT $(cd $OUT && ls ncu-*.txt) && rm -f $OUT/ncu-*.txt
