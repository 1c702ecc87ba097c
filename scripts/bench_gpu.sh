#!/usr/bin/env bash
# The side-by-side benchmark (`gemmtune bench`) on a lent GPU, in one call of the device tool.
#   bash scripts/bench_gpu.sh                 # the whole public suite (29 shapes), one process
#   bash scripts/bench_gpu.sh square odd      # named batches (comma-separated groups), one process each
# Issue #7: the whole suite -- cuBLAS, Inductor max-autotune-no-cudagraphs with its tuning time,
# gemmtune default / --fast / model top-5, nvMMH top-1 / top-5, every output verified against
# fp64, repeats and spread stored -- in ONE device call of at most 10 minutes.
#
# By default everything runs as one batch: one bench process, one measurement of the ceilings,
# one start-up of the tuner's worker pools per mode (5, not 5 per batch), one report. BENCH_BUDGET_S
# (default 590 s of the call's 600) bounds the script; the bench gets a hard deadline (SIGINT,
# then SIGKILL 20 s later) and, 5 s before it, a soft one (--deadline: it starts
# no shape that the longest shape so far says would end past it, notes the shapes left out and
# still writes its JSON and report). The JSON is rewritten after every shape, so after a hard
# stop what finished stays and is rendered here; should even that be cut off at 600 s, the JSON
# still comes back under $OUT (render it with `gemmtune report FILE`). Shapes left out: measure
# them in another call with named batches, then
#   gemmtune report --merge A-bench.json B-bench.json --out benchmarks/results/<date>-<gpu>-bench
# With several batches, the first measures the ceilings and writes $OUT/parts/ceilings.json;
# the later ones read them (--ceilings-file) instead of measuring again.
#
# Measured (2026-11-22, H200, benchmarks/results/2026-11-22-h200-bench-onecall): the whole
# suite as one batch took 530 s of the call (ceilings 2 s, tuning 231 s, measuring 273 s),
# so it fits one 600 s call with about a minute to spare. The JSON records each shape's
# tune_s and measure_s and the header's phases_s. (The first run, three batches in two
# calls, took 707 s: each batch paid its own ceilings and tuner start-ups.)
#
# Wheels in .whl/ (pytest, rich, nvidia-matmul-heuristics, ...) are installed to /tmp/site first,
# as scripts/gpu_run.sh does: the GPU machine has no registry. BENCH_ARGS: extra flags for every
# batch ("--skip-inductor --repeats 10").
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
start=$SECONDS
budget=${BENCH_BUDGET_S:-590}
reserve=15                           # kept after the last batch for rendering / merging
min_batch=${BENCH_MIN_BATCH_S:-90}   # a batch needs at least this (start-up, ceilings, one shape)
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  python3 - <<'EOF'
import importlib.util, sys
print("nvidia-matmul-heuristics:", "installed" if importlib.util.find_spec("nvMatmulHeuristics")
      else "not installed (nvMMH rows will say skipped)")
import torch, triton
print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())
EOF
} 2>&1 | tee "$OUT/env.txt"

batches=("$@")
single=$(( ${#batches[@]} <= 1 ))
status=0
left_out=()
if (( ! single )); then
  mkdir -p "$OUT/parts"
fi
ceilings=(); (( single )) || ceilings=(--ceilings-file "$(cd "$OUT/parts" && pwd)/ceilings.json")
for batch in "${batches[@]:-all}"; do
  left=$(( budget - (SECONDS - start) - reserve ))
  if (( left < min_batch )); then
    echo "=== $batch: skipped, ${left} s left"; left_out+=("$batch"); status=1; continue
  fi
  if (( single )); then dest=$OUT; else dest=$OUT/parts; fi
  mkdir -p "$dest"
  groups=(); [[ $batch != all ]] && groups=(--groups "$batch")
  echo "=== $batch (deadline ${left} s) ==="
  # Soft deadline 5 s before the hard one: no new shape that would likely not finish.
  # SIGINT first at the hard one: the bench's finally blocks close the tuner's worker processes.
  timeout -s INT -k 20 "$left" python3 -m gemmtune.cli bench "${groups[@]}" --out "$dest" \
    --deadline $(( $(date +%s) + left - 5 )) "${ceilings[@]}" ${BENCH_ARGS:-} 2>&1 \
    | grep --line-buffered -v "^W1\|^I1\|AUTOTUNE\|^  triton_\|^  mm \|^  bmm\|^  decompose\|SingleProcess\|benchmarking" \
    | tee -a "$OUT/bench.log"
  rc=${PIPESTATUS[0]}
  case $rc in
    0) ;;
    124|130|137) echo "batch $batch cut off by the deadline: its JSON keeps the shapes it finished"; status=1 ;;
    *) echo "batch $batch exited $rc"; status=1 ;;
  esac
  if (( single )) && (( rc != 0 )); then  # the bench did not get to render its report
    for f in "$OUT"/*-bench.json; do [[ -e $f ]] && python3 -m gemmtune.cli report "$f" || status=1; done
  fi
done
if (( ! single )) && compgen -G "$OUT/parts/*-bench.json" >/dev/null; then
  python3 -m gemmtune.cli report --merge "$OUT"/parts/*-bench.json --out "$OUT" || status=1
fi
grep -h "^deadline:" "$OUT/bench.log" 2>/dev/null && status=1
echo "batches left out for lack of time: ${left_out[*]:-none}; $(( SECONDS - start )) s in all"
exit $status
