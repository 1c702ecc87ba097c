#!/usr/bin/env bash
# Session 57, call 2 (GPU only; no carry; ~9 min): the -m gpu lane on the tree with this session's merges (capture's
# records, the out-overlap check in run_choice / prepare_choice, from_sizes keys, times_ms keys); then the tall class (M in the thousands, N <= 64: MoE routers,
# LoRA down-projections, value and classifier heads), where call 1's random suite kept cuBLAS on N = 8 at 55% and
# 81% of the floor. Which tile could beat it: triton_mm's exhaustive space (small BLOCK_M, 16-wide N tiles), the
# other families' default spaces, and skinny on each shape's transpose (C^T = B^T A^T: M' = N <= 64, a decode
# problem on a K-contiguous B when A is row-major), each against cuBLAS in the same tune.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 240 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15; gzip -f $OUT/gpu_tests.txt
cat > $OUT/tall.csv <<'CSV'
group,name,M,N,K,dtype,layout_a,layout_b
tall,t_2305x8x7168_rr,2305,8,7168,bfloat16,row,row
tall,t_5456x8x5120_rc,5456,8,5120,bfloat16,row,col
tall,t_8192x1x4096_rr,8192,1,4096,bfloat16,row,row
tall,t_4096x16x4096_rc,4096,16,4096,bfloat16,row,col
tall,t_16384x4x2048_rr,16384,4,2048,bfloat16,row,row
tall,t_8192x32x3584_rc,8192,32,3584,bfloat16,row,col
tall,t_12288x64x2048_rr,12288,64,2048,bfloat16,row,row
tall,t_6000x2x8192_rc,6000,2,8192,bfloat16,row,col
CSV
# The transposes: (N, M, K), A' = B^T, B' = A^T (a row-major operand's transpose is column-major).
python3 - $OUT/tall.csv $OUT/twin.csv <<'PY'
import csv, sys
flip = {"row": "col", "col": "row"}
rows = list(csv.DictReader(open(sys.argv[1])))
with open(sys.argv[2], "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    for r in rows:
        w.writerow(dict(r, name=r["name"] + "_T", M=r["N"], N=r["M"], layout_a=flip[r["layout_b"]], layout_b=flip[r["layout_a"]]))
PY
left() { echo $(( ${BUDGET:-380} - $(date +%s) + T0 )); }
run() { local tag=$1; shift; local t=$(left); [ "$t" -gt 20 ] || { echo "$tag skipped: no time"; return; }; timeout $(( t < 150 ? t : 150 )) python3 -m gemmtune.cli tune "$@" --store $OUT/$tag.sqlite --out $OUT/$tag.json > $OUT/$tag.log 2>&1; echo "$tag rc=$? $(tail -1 $OUT/$tag.log)"; }
run twin --suite $OUT/twin.csv --families skinny,triton_mm,aten
run mm_ex --suite $OUT/tall.csv --families triton_mm,aten --space exhaustive
run others --suite $OUT/tall.csv --families splitk,decompose_k,persistent_tma,triton_static,aten
python3 - $OUT <<'PY' | tee $OUT/summary.txt
import sqlite3, sys, collections
out = sys.argv[1]
for tag in ("mm_ex", "others", "twin"):
    try:
        rows = sqlite3.connect(f"{out}/{tag}.sqlite").execute(
            "SELECT problem_key, choice_id, device_ms FROM results WHERE status='ok' AND device_ms IS NOT NULL").fetchall()
    except Exception as e:
        print(tag, "no store:", e); continue
    by = collections.defaultdict(dict)
    for key, cid, ms in rows:
        fam = cid.split(":")[0]
        if fam not in by[key] or ms < by[key][fam][1]:
            by[key][fam] = (cid, ms)
    print(f"== {tag}")
    for key, fams in sorted(by.items()):
        aten = fams.get("aten", (None, float("nan")))[1]
        best = sorted(fams.values(), key=lambda t: t[1])
        print(key, f"aten {aten*1e3:.2f} us |", "; ".join(f"{c} {ms*1e3:.2f} ({aten/ms:.2f}x)" for c, ms in best[:4]))
PY
gzip -f $OUT/*.log
echo "call took $(( $(date +%s) - T0 )) s"
