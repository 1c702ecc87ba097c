#!/usr/bin/env bash
# Session 20, call 5: why mid-size GEMMs sit at 30-45% of the floor (1000^3: cuBLAS 8.9 us against a
# 2.5 us floor, and no Triton choice of ours beats it; 333x4104x1032 padded: cuBLAS 10.6 us, our
# persistent TMA kernel 14.3): cuBLAS's kernel names (tile, cluster, stages) and Nsight Compute's
# speed-of-light, launch, occupancy and warp-state sections for cuBLAS and our kernels
# (scripts/probe_kernels.py). Then the square group with the widened run-off (gemmtune bench,
# Inductor skipped). GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 90 python3 scripts/probe_kernels.py names 1000x1000x1000 1024x1024x1024 333x4104x1032 777x1536x2056 \
  2048x2048x2048 4096x4096x4096 96x50264x768 512x4096x4096 128x128x32768 16x6144x4096 > $OUT/cublas_names.txt 2>&1
echo "names rc=$?"; grep " us " $OUT/cublas_names.txt | cut -c1-230
P="persistent_tma"
timeout 150 ncu --profile-from-start off --section SpeedOfLight --section LaunchStats --section Occupancy \
  --section WarpStateStats --section MemoryWorkloadAnalysis --csv python3 scripts/probe_kernels.py ncu \
  1000x1000x1000:aten 1000x1000x1000:$P:BM64-BN128-BK64-S5-W4-G8 1000x1000x1000:$P:BM128-BN128-BK64-S4-W8-G8 \
  1000x1000x1000:triton_mm:BM64-BN128-BK64-S4-W4-G8 333x4104x1032:aten 333x4104x1032:$P:BM128-BN128-BK64-S4-W4-G8 \
  > $OUT/ncu.csv 2> $OUT/ncu.err
echo "ncu rc=$?"; tail -3 $OUT/ncu.err
python3 - $OUT/ncu.csv <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: sys.exit("no ncu rows")
h = rows[0]; ix = {n: h.index(n) for n in ("ID", "Kernel Name", "Metric Name", "Metric Value")}
want = ("Duration", "Compute (SM) Throughput", "Memory Throughput", "L2 Cache Throughput", "DRAM Throughput",
        "Grid Size", "Block Size", "Registers Per Thread", "Achieved Occupancy", "Theoretical Occupancy",
        "Cluster Size", "Dynamic Shared Memory Per Block", "Warp Cycles Per Issued Instruction")
cur = None
for r in rows[1:]:
    if r[ix["Metric Name"]] in want:
        k = (r[ix["ID"]], r[ix["Kernel Name"]][:90])
        if k != cur:
            print("--", *k); cur = k
        print(f"   {r[ix['Metric Name']]}: {r[ix['Metric Value']]}")
PY
timeout 200 python3 -m gemmtune.cli bench --groups square --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 170 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -A12 "^## Per shape: speedup" $OUT/bench/*.md | head -9; grep -A8 "Tuning wall" $OUT/bench/*.md | head -8
grep -A7 "### square / cube_1024" $OUT/bench/*.md | tail -4
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
gzip -f $OUT/ncu.csv
