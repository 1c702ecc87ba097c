#!/usr/bin/env bash
# Session 50, call 6 (GPU only; no carry; ~3 min): why call 5's fp32 Qwen2-0.5B prefill ran 0.84x
# eager un-graphed with patch while its CUDA-graph replay ran 1.54x. The same phase, eager against
# eager + patch, with bench-model's --profile: each mode's device time per un-graphed call (GEMM
# against the rest, the heaviest kernels), so host-bound issue tells itself from slower kernels.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 200 python3 -m gemmtune.cli bench-model --models qwen2-0.5b --dtype float32 --phases prefill_b1_s512 \
  --modes eager,eager_patch --profile --eager-rounds 7 --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11" $OUT/bm.log | grep -E "interleaved|rror|profile|device|GEMM|host|kernel" | tail -24
grep -iE -A12 "profile" $OUT/bm/*.md | head -60
tar czf $OUT/bm.tgz -C $OUT bm bm.log && rm -rf $OUT/bm $OUT/bm.log
echo "call took $(( $(date +%s) - T0 )) s"
