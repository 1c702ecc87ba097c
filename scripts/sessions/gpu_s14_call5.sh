#!/usr/bin/env bash
# Session 14, call 5: (1) the GPU test of compiling on meta operands, after the fix that makes
# meta operands pick the GPU's split-K mode and persistent program count; (2) peak GPU memory
# while 16 compile workers compile lm-head shapes, meta operands off then on; (3) the public
# suite's prefill and square groups again (call 4's compile workers had compiled the persistent
# kernel with the CPU's program count on meta operands, so the benchmark worker compiled again).
# GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/test_gpu.py -k "meta" > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; tail -3 $OUT/gpu_tests.txt
for META in 0 1; do
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > $OUT/mem-meta$META.txt &
  SMI=$!
  GEMMTUNE_COMPILE_ON_META=$META GEMMTUNE_PRESTART=0 timeout 70 python3 -m gemmtune.cli tune \
    --shape 64x256000x3584:bf16 --shape 128x152064x5120:bf16 --shape 3x3584x14336:bf16 \
    --families triton_mm,splitk,persistent_tma --timing quick --compile-workers 16 --store /tmp/mem$META.sqlite \
    --summary $OUT/mem-meta$META.json > $OUT/mem-meta$META.log 2>&1
  echo "meta=$META rc=$? peak MiB: $(sort -n $OUT/mem-meta$META.txt | tail -1)"; kill $SMI
  python3 - "$OUT/mem-meta$META.json" <<'PY' || true
import json, sys, collections
d = json.load(open(sys.argv[1]))
print({s["key"][:28]: dict(collections.Counter(s.get("statuses", {}))) if isinstance(s.get("statuses"), list) else s.get("statuses") for s in d["shapes"]})
PY
done
BENCH_S=${BENCH_S:-400} DEADLINE_S=${DEADLINE_S:-360} BENCH_GROUPS=${BENCH_GROUPS:-prefill,square} bash scripts/gpu_s14_suite.sh
