#!/usr/bin/env bash
# Prepared at the end of session 38 for session 39 (~9 min; GPU only; no carry).
# 0. (Moved to call 1 in session 39.) What the pointwise kernels between a decode step's GEMVs cost: scripts/exp_pdl.py's norm -> GEMV
#    chain (sessions 36-37: PDL strips 369 us, cuBLAS 459, floor 224) with the norm folded into the
#    GEMV (folded, folded_pdl: no norm kernel; ~1 min). If folded_pdl beats pdl_prefetch by far,
#    folding a model's RMSNorm into the GEMV that follows it (g into W's columns, 1/rms(x) as a
#    one-slice strip's epilogue) is the next decode feature.
# Why do the GEMV strips lose to cuBLAS on the widest decode GEMVs (fused gate_up, LM heads), and
# does the default space's cap of 32 programs per SM, which refuses every strip there, cost us?
# 1. scripts/exp_gemv_wide.py: 12 decode GEMVs of Llama-1B / Llama-8B / Qwen2-0.5B, the default
#    space's CUDA-core configs against wider (BN 16), 8-warp and pipelined (S2, S3) strips, L2-cold
#    CUDA graphs, cuBLAS before and after, every output against fp64 (~5 min).
# 2. Nsight Compute on 1 x 16384 x 2048: cuBLAS, the default space's best and the sweep's best
#    (SpeedOfLight, Occupancy, LaunchStats, WarpStateStats, MemoryWorkloadAnalysis): where the
#    strips' time goes (DRAM throughput, achieved occupancy, stall reasons, waves).
# If a strip outside the space's rules wins, relax the cap for one-slice strips (skinny_spec.constraint);
# if S2/S3 or BN 16 win, add them to _DEFAULT_GEMV and the exhaustive space; then retrain nothing
# until the store has them (gemmtune collect), and measure bench-model decode_b1 (Llama, Qwen2).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 330 python3 scripts/exp_gemv_wide.py --out $OUT/gemv_wide.json --budget-s 270 > $OUT/gemv_wide.log 2>&1
echo "exp_gemv_wide rc=$?"; grep -v "^#.*precompiled" $OUT/gemv_wide.log | tail -14
ids=$(python3 - <<'PY'
import json, os
rows = {(r["M"], r["N"], r["K"]): r for r in json.load(open(os.environ["OUT"] + "/gemv_wide.json"))["rows"]}
r = rows.get((1, 16384, 2048), {})
print(",".join(dict.fromkeys(c for c in (r.get("default_best"), *(r.get("sweep_top5") or [])[:1]) if c)))
PY
)
echo "ncu choices: $ids"
if [ -n "$ids" ]; then
  timeout 110 ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis --launch-skip 2 --launch-count 12 \
    python3 scripts/exp_gemv_wide.py --ncu-run 1x16384x2048 --choices "$ids" > $OUT/ncu_gemv.txt 2>&1
  echo "ncu rc=$?"; grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Achieved Occupancy|Waves Per SM|Registers Per" $OUT/ncu_gemv.txt | head -40
fi
