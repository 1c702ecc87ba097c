#!/usr/bin/env bash
# Session 56, call 1 (GPU only; no carry; ~9 min): #16's last parity row. tiled.py now states
# tl.assume(pid_m >= 0), tl.assume(pid_n >= 0) as Inductor's template does; offline (triton 3.6, sm_90a)
# that turns our static + indexed K loop on 512x4096x4096 into the template's, instruction for instruction
# (112 registers, the next stage's addresses before the wgmma). A/B in separate processes (new, old, new, old;
# --no-assume is the old code), each against the template in the same process; then Nsight Compute at locked
# clocks, template vs ours with and without the assume (compute-sanitizer runs in call 2, on the final tree).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
ROWS=512x4096x4096,2048x6144x4096
for i in 1 2 3 4; do
  flag=""; tag=new; [ $((i % 2)) = 0 ] && flag="--no-assume" && tag=old
  timeout $(( i * 105 - $(date +%s) + T0 )) python3 scripts/parity_inductor.py --static --indexed-k --rounds 7 \
    --only $ROWS $flag --out $OUT/parity_${i}_$tag.json > $OUT/parity_${i}_$tag.log 2>&1
  echo "run $i ($tag) rc=$?"; grep -E "ratio" $OUT/parity_${i}_$tag.log | sed -E 's/ \| ours \{.*//' | sed -E 's/1out nan  old nan  //' | cut -c1-300
done
for tag in new old; do
  env_="PARITY_NO_ASSUME=0"; [ $tag = old ] && env_="PARITY_NO_ASSUME=1"
  timeout 80 env $env_ ncu --profile-from-start off --set full --csv --page details \
    python3 scripts/parity_ncu.py 512x4096x4096:bfloat16:BM64-BN128-BK64-S4-W4-G8:static_ik > $OUT/ncu_$tag.csv 2> $OUT/ncu_$tag.err
  echo "ncu $tag rc=$?"; tail -2 $OUT/ncu_$tag.err
  python3 - $OUT/ncu_$tag.csv <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = next((r for r in rows if "Metric Name" in r), None)
if hdr:
    ki, mi, vi = hdr.index("Kernel Name"), hdr.index("Metric Name"), hdr.index("Metric Value")
    ii = hdr.index("ID")
    want = ("Duration", "Registers Per Thread", "Executed Instructions", "SM Active Cycles", "Warp Cycles Per Issued Instruction")
    for r in rows:
        if len(r) > vi and r[mi] in want:
            print(r[ii], r[ki][:40], r[mi], r[vi])
PY
done
gzip -f $OUT/ncu_*.csv
echo "call took $(( $(date +%s) - T0 )) s"
