#!/usr/bin/env bash
# Session 12, device call 2 (one GPU, nothing carried): #15's splitk group. Where does a fused
# split-K launch spend its time on small M x N with long K: the streaming, or the reduction?
# scripts/exp_splitk_reduce.py times atomic / det / no-reduction ("part") / sum per config beside
# cuBLAS, then Nsight Compute profiles the best atomic config, its part twin and cuBLAS.
set -u
source scripts/device_env.sh
record_env
timeout ${SWEEP_S:-330} python3 scripts/exp_splitk_reduce.py --out $OUT/splitk_reduce.json --budget-s ${BUDGET_S:-260} \
  > $OUT/sweep.log 2>&1
echo "sweep rc=$?"; grep -v "^#" $OUT/sweep.log | tail -12
timeout ${NCU_S:-150} ncu --profile-from-start off --set full --csv --page details \
  python3 scripts/exp_splitk_reduce.py --ncu $OUT/splitk_reduce.json > $OUT/ncu.csv 2> $OUT/ncu.err
echo "ncu rc=$?"; tail -5 $OUT/ncu.err
python3 - <<'PY'
import csv, io, os
out = os.environ["OUT"]
text = open(f"{out}/ncu.csv").read()
start = text.find('"ID"')
rows = list(csv.DictReader(io.StringIO(text[start:]))) if start >= 0 else []
want = ("Duration", "DRAM Throughput", "Memory Throughput", "L2 Cache Throughput", "Achieved Occupancy",
        "Registers Per Thread", "Grid Size", "Compute (SM) Throughput", "Theoretical Occupancy")
seen = {}
for r in rows:
    if r.get("Metric Name") in want:
        seen.setdefault((r["ID"], r["Kernel Name"][:40]), {})[r["Metric Name"]] = f'{r["Metric Value"]} {r["Metric Unit"]}'
for (i, k), v in seen.items():
    print(i, k, v)
PY
gzip -f $OUT/ncu.csv
