#!/usr/bin/env bash
# The side-by-side benchmark (`gemmtune bench`) on a lent GPU, in one call of the device tool.
#   bash scripts/bench_gpu.sh [BATCH ...]    BATCH: comma-separated groups (default: each group alone)
#   e.g. bash scripts/bench_gpu.sh decode,prefill square          # and in a second call: splitk odd
# Each batch is its own `gemmtune bench --groups BATCH` process under a deadline, so the call
# ends inside the device tool's 10 minutes (BENCH_BUDGET_S, default 540 s of its 600). A crash
# or a timeout costs one batch, not the run, and a batch cut off by the deadline keeps the shapes
# it finished (the JSON is rewritten after every shape). Batches left without time are named at
# the end: run them in another call, then merge the parts here with
#   gemmtune report --merge A-bench.json B-bench.json --out benchmarks/results/<date>-<gpu>-bench
# The parts are merged under $OUT into one <date>-<gpu>-torch..-triton..-bench.json and its
# Markdown (PNG plots too where matplotlib is installed; otherwise draw them later with
# `gemmtune report FILE`). BENCH_ARGS: extra flags for every batch ("--skip-inductor --repeats 10").
# Wheels in .whl/ (pytest, rich, nvidia-matmul-heuristics, ...) are installed to /tmp/site first,
# as scripts/gpu_run.sh does: the GPU machine has no registry.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT/parts"
start=$SECONDS
budget=${BENCH_BUDGET_S:-540}
min_batch=${BENCH_MIN_BATCH_S:-90}   # a batch needs at least this (start-up, ceilings, one shape)
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
  python3 -c 'import nvMatmulHeuristics' 2>/dev/null && echo "nvidia-matmul-heuristics: installed" || echo "nvidia-matmul-heuristics: not installed (nvMMH rows will say skipped)"
} 2>&1 | tee "$OUT/env.txt"
status=0
left_out=()
for batch in ${*:-decode prefill splitk odd square}; do
  left=$(( budget - (SECONDS - start) - 30 ))   # 30 s stay for merging and rendering
  if (( left < min_batch )); then
    echo "=== $batch: skipped, ${left} s left"; left_out+=("$batch"); status=1; continue
  fi
  echo "=== $batch (deadline ${left} s) ==="
  # SIGINT first: the bench's finally blocks close the tuner's worker processes.
  timeout -s INT -k 20 "$left" python3 -m gemmtune.cli bench --groups "$batch" --out "$OUT/parts" ${BENCH_ARGS:-} 2>&1 \
    | grep --line-buffered -v "^W1\|^I1\|AUTOTUNE\|^  triton_\|^  mm \|^  bmm\|^  decompose\|SingleProcess\|benchmarking" \
    | tee -a "$OUT/bench.log"
  rc=${PIPESTATUS[0]}
  case $rc in
    0) ;;
    124|130) echo "batch $batch cut off by the deadline: its JSON keeps the shapes it finished"; status=1 ;;
    *) echo "batch $batch exited $rc"; status=1 ;;
  esac
done
if compgen -G "$OUT/parts/*-bench.json" >/dev/null; then
  python3 -m gemmtune.cli report --merge "$OUT"/parts/*-bench.json --out "$OUT" || status=1
fi
echo "batches left out for lack of time: ${left_out[*]:-none}; $(( SECONDS - start )) s in all"
exit $status
