#!/usr/bin/env bash
# Session 49, call 5 (GPU only; no carry; ~2 min): is a row-major B what holds fp32 3xTF32 back?
# Session 48 saw 56 TFLOP/s on 4096^3 with a row-major B and 89 on 512x4096x4096 with a
# column-major one: two shapes, two configs. Here the same shapes in both layouts, triton_mm's
# default space each, and the cost of the K-major copy a pad+ path would make of B.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
cat > $OUT/x3.csv <<'CSV'
group,name,M,N,K,dtype,layout_a,layout_b
square,c4096_rr,4096,4096,4096,float32,row,row
square,c4096_rc,4096,4096,4096,float32,row,col
square,c2048_rr,2048,2048,2048,float32,row,row
square,c2048_rc,2048,2048,2048,float32,row,col
prefill,p1024_rr,1024,4096,4096,float32,row,row
prefill,p1024_rc,1024,4096,4096,float32,row,col
CSV
timeout 200 python3 -m gemmtune.cli tune --suite $OUT/x3.csv --families triton_mm,aten --store /tmp/x3.sqlite \
  --out /tmp/x3.json --summary $OUT/x3_summary.json > $OUT/x3.log 2>&1
echo "tune rc=$?"; grep -E "│ [a-z0-9]" $OUT/x3.log | cut -c1-160
python3 - <<'PY' 2>&1 | tee $OUT/copy.txt
import torch
for n in (2048, 4096):
    b = torch.randn(n, n, device="cuda")
    for _ in range(3): b.t().contiguous()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20): b.t().contiguous()
    e.record(); torch.cuda.synchronize()
    print(f"K-major copy of a {n}x{n} fp32 B (torch, b.t().contiguous()): {s.elapsed_time(e) / 20 * 1000:.1f} us")
PY
python3 -c "
from gemmtune.store import ResultStore
with ResultStore('/tmp/x3.sqlite') as s: s.export('$OUT/x3-rows.csv')
"
echo "call took $(( $(date +%s) - T0 )) s"
