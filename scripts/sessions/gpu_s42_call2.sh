#!/usr/bin/env bash
# Session 42, call 2 (~8 min; GPU only; no carry).
# 1. Where the benchmark worker's 5.6-5.8 s start-up goes (session 41, call 6): the import of
#    torch, of gemmtune's runner, CUDA's first context, with the machine's PYTHONDONTWRITEBYTECODE
#    as it is and with bytecode written under a cache prefix (the second of two runs).
# 2. #17 with --in-process-tuning on Qwen2-0.5B decode b1 (call 1's 200 s timeout cut both models
#    off after their tuning: 10.7 s for Qwen2, 8.5 s for Llama-1B, against 119 and 143 s of
#    max-autotune compile).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
echo "PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-unset}"
stamp() { python3 - "$@" <<'PY'
import subprocess, sys, time
t0 = time.perf_counter(); subprocess.run(sys.argv[1:], check=False); print(f"{time.perf_counter() - t0:6.2f} s  {' '.join(sys.argv[1:])[-90:]}")
PY
}
for round in 1 2; do
  stamp python3 -c "import torch"
  stamp python3 -c "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"
  stamp python3 -c "import gemmtune.bench.runner"
  stamp python3 -c "import gemmtune.bench.runner, torch; torch.zeros(1, device='cuda'); import triton"
  stamp env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=/tmp/pyc python3 -c "import gemmtune.bench.runner, torch; torch.zeros(1, device='cuda'); import triton"
done
python3 -X importtime -c "import gemmtune.bench.runner" 2> $OUT/importtime.txt
sort -t'|' -k2 -n -r $OUT/importtime.txt | head -25
timeout 420 python3 -m gemmtune.cli bench-model --models qwen2-0.5b --phases decode_b1 --in-process-tuning \
  --modes max_autotune_pdl_graph,fuse_patch_compile_pdl_graph --out $OUT/bm_inproc_qwen2-0.5b > $OUT/bm_inproc_qwen2-0.5b.log 2>&1
echo "bench-model --in-process-tuning qwen2-0.5b rc=$?"
grep -E "own tuning|first calls|interleaved" $OUT/bm_inproc_qwen2-0.5b/bench-model.md | cut -c1-400
