#!/usr/bin/env bash
# Everything gemmtune does on a lent GPU, in one call of the device tool.
#   bash scripts/gpu_run.sh [check] [faults] [tune] [inductor] ...   (default: check faults)
# check:    every test marked gpu (tests/test_gpu.py, the CUDA timer, the bench on a GPU; CHECK_S
#           bounds it, default 300) + the demo
# faults:   inject an illegal-memory-access kernel into a real tuning run
# tune:     gemmtune tune on the public suite, default space (store + table + summary)
# inductor: torch.compile max-autotune on the same suite: tuning time, kernel time
# lut:      a gemmtune table exported to Inductor's lookup table steers torch.compile
# dispatch: the dispatcher benchmarks with Triton-only hint kernels (--exclude-aten: the seed
#           experiment, and binaries that save/load must carry); DISPATCH_ARGS adds flags
# edge:     scripts/bench_edge.py, wrapped vs masked edge loads (EDGE_S bounds it, default 240)
# topk:     #5's tuning wall time at k = 1/5/20 and exhaustive vs Inductor (TOPK_S, default 420;
#           TOPK_SUITE, default benchmarks/suites/topk-exhaustive.csv; topk-tiny-mn-32.csv: the shape left
#           unfinished on 2026-11-23). On the H200, tiny_mn_32
#           needs about 300 s alone (its exhaustive mode took 146 s), llama3_8b_gateup_m16 ~150 s.
# collect:  #5's bulk timings (gemmtune collect) for the rest of the call (CALL_S, default 585 s
#           from the script's start), into out/collect-work/collect.sqlite, which stays on a warm
#           machine from call to call (out/ is git-ignored); a fresh machine starts it from
#           COLLECT_SEED (default data/collect/collect.sqlite.gz; none: an empty store). Skipped when this call's GPU tests failed: a timer
#           bug would spoil the data. COLLECT_ARGS adds flags.
#
# Several GPUs: the phases above run on GPU ${FG_GPU:-0}, pinned to that GPU's share of the CPU
# cores. COLLECT_BG_GPUS (e.g. "1") starts collectors on those other GPUs, each on its own share
# of the cores, at the start of the call and for all of it, beside the phases; the collect phase
# adds one on GPU FG_GPU (so it must be the last phase named). They share one store and claim shapes (gemmtune collect --claims), so no
# shape is measured twice; the store is exported once, when all have ended.
# Results go to $OUT (or ./out when run by hand). Wheels in .whl/ (pytest, rich, ...)
# are installed to /tmp/site first when present: the GPU machine has no registry.
# .whl/ is not in git; make it once per machine, then pass carry=[".whl"] to the device:
#   echo /.whl/ >> .git/info/exclude
#   pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     pytest pluggy iniconfig rich markdown-it-py mdurl pygments hypothesis sortedcontainers attrs
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
phases=${*:-check faults}
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
} 2>&1 | tee "$OUT/env.txt"
rc=0; check_rc=0
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l); (( ngpu > 0 )) || ngpu=1
ncpu=$(nproc); per=$(( ncpu / ngpu )); (( per > 0 )) || per=1
cores() { echo "$(( $1 * per ))-$(( $1 * per + per - 1 ))"; }  # GPU i's share of the cores
FG_GPU=${FG_GPU:-0}
WORK=out/collect-work; STORE=$WORK/collect.sqlite
collect_prepare() {  # once per call, before any collector: the store and an empty claims folder
  mkdir -p "$WORK"; rm -rf "$WORK/claims"; mkdir -p "$WORK/claims"
  # COLLECT_SEED: the store a fresh machine starts from (default: the H200 store; "none": empty,
  # e.g. the first call on another kind of GPU).
  local seed=${COLLECT_SEED:-data/collect/collect.sqlite.gz}
  if [[ ! -f $STORE && $seed != none ]]; then gunzip -c "$seed" > "$STORE.tmp" && mv "$STORE.tmp" "$STORE"; fi
}
pin() {  # pin CORES CMD...: run CMD on those cores (taskset), or unpinned where taskset is missing
  if command -v taskset >/dev/null; then taskset -c "$@"; else shift; "$@"; fi
}
collectors=()
collect_start() {  # collect_start GPU: one collector on that GPU until the call's end, in the background
  local g=$1 left=$(( ${CALL_S:-585} - SECONDS ))
  if (( left < 150 )); then echo "collect: only ${left} s left in this call, none started on GPU $g"; return; fi
  # Batches are sized to end 70 s before the call does; the watchdog stops a batch that
  # overruns 25 s before (the rows are already in the store), so nothing measured is lost.
  # 16 shapes a batch: every batch is one tune() call that starts its workers anew (about
  # 7.8 s of fixed cost per tune() on the H200, benchmarks/results/2026-11-23-h200-topk/),
  # and calls 6-8's 8-shape batches took 20-80 s each.
  ( CUDA_VISIBLE_DEVICES=$g pin "$(cores "$g")" python3 -m gemmtune.cli collect --store "$STORE" \
    --claims "$WORK/claims" --no-export --progress-name "collect-progress-gpu$g.json" --batch 16 \
    --compile-workers $(( per > 4 ? per - 2 : 2 )) \
    --max-minutes "$(awk "BEGIN{print ($left - 70) / 60}")" \
    --hard-stop-minutes "$(awk "BEGIN{print ($left - 25) / 60}")" ${COLLECT_ARGS:-} 2>&1 \
    | grep --line-buffered -v "^W1\|^I1\|AUTOTUNE" | sed -u "s/^/[gpu$g] /" | tee -a "$OUT/collect.log" | tail -20 ) &
  collectors+=($!)
}
collect_finish() {  # wait for every collector, then export the store once
  local p; for p in "${collectors[@]}"; do wait "$p" || rc=1; done
  collectors=()
  python3 -m gemmtune.cli collect --store "$STORE" --export-only >/dev/null || rc=1
  # The CSV is made again from the store on any machine (gemmtune collect --export-only).
  rm -f "$OUT"/collect-*.csv.gz
}
if [[ -n ${COLLECT_BG_GPUS:-} ]]; then
  collect_prepare
  for g in ${COLLECT_BG_GPUS//,/ }; do collect_start "$g"; done
fi
# Foreground phases: one GPU and its share of the cores, so background collectors keep theirs.
export CUDA_VISIBLE_DEVICES=$FG_GPU
(( ngpu > 1 )) && command -v taskset >/dev/null && taskset -cp "$(cores "$FG_GPU")" $$ >/dev/null
for ph in $phases; do
  echo "=== $ph ==="
  case $ph in
    check)
      # tee before tail: the log under $OUT survives a call cut off at its limit
      timeout -s INT -k 10 "${CHECK_S:-300}" python3 -m pytest tests -q -m gpu -p no:cacheprovider --durations=15 2>&1 \
        | tee "$OUT/gpu_tests.log" | tail -60; (( PIPESTATUS[0] == 0 )) || { rc=1; check_rc=1; }
      # The demo's output goes into the same log: $OUT brings back at most 8 files.
      python3 -m gemmtune.cli demo --shape 333x4097x1025 2>&1 | tee -a "$OUT/gpu_tests.log" | tail -8 \
        || { rc=1; check_rc=1; } ;;
    faults)
      python3 scripts/gpu_faults.py 2>&1 | tee "$OUT/faults.txt" || rc=1 ;;
    tune)
      python3 -m gemmtune.cli tune --preset public --space default --store "$OUT/public.sqlite" \
        --out "$OUT/public-table.json" --summary "$OUT/tune-run.json" -q ${TUNE_ARGS:-} 2>&1 | tee "$OUT/tune.txt" || rc=1
      python3 -m gemmtune.cli report --store "$OUT/public.sqlite" --run-summary "$OUT/tune-summary.json" \
        --tune-json "$OUT/tune-run.json" | tail -45 || rc=1 ;;
    inductor)
      python3 scripts/inductor_compare.py --preset public --out "$OUT/inductor.json" ${INDUCTOR_ARGS:-} 2>&1 \
        | grep -v "^W1\|^I1\|AUTOTUNE\|^  triton_\|^  mm \|^  bmm\|^  decompose\|SingleProcess\|benchmarking" | tail -50 || rc=1 ;;
    lut)
      python3 scripts/gpu_lut.py 2>&1 | tail -40 | tee "$OUT/lut.txt" || rc=1 ;;
    dispatch)
      python3 scripts/bench_dispatch.py --exclude-aten --oracle --families triton_mm,splitk \
        --oracle-families triton_mm,splitk --saveload-families triton_mm,splitk \
        --sections table,saveload,overhead,sweep --max-minutes "${DISPATCH_MINUTES:-7}" \
        --store /tmp/bench_dispatch.sqlite --out "$OUT" ${DISPATCH_ARGS:-} 2>&1 \
        | grep -v "^W1\|^I1\|AUTOTUNE\|^  triton_\|^  mm \|SingleProcess" | tail -60 || rc=1 ;;
    edge)
      timeout -s INT -k 10 "${EDGE_S:-240}" python3 scripts/bench_edge.py --out "$OUT" 2>&1 | tee "$OUT/edge.txt" \
        | tail -30; (( PIPESTATUS[0] == 0 )) || rc=1 ;;
    topk)
      # One bench per shape (its own process and deadline), so a shape that runs long costs
      # only itself; the finished ones are merged into one report under $OUT.
      suite=${TOPK_SUITE:-benchmarks/suites/topk-exhaustive.csv}; t0=$SECONDS; budget=${TOPK_S:-420}; i=0
      n=$(( $(wc -l < "$suite") - 1 ))
      rm -rf /tmp/topk; mkdir -p /tmp/topk
      while IFS= read -r row; do
        # An equal share of what is left for each shape still to run.
        left=$(( (budget - (SECONDS - t0) - 15) / (n - i) ))
        if (( left < 60 )); then echo "topk: ${left} s left, not started: $row"; rc=1; break; fi
        i=$((i + 1)); mkdir -p /tmp/topk/$i; { head -1 "$suite"; echo "$row"; } > /tmp/topk/$i/suite.csv
        echo "--- topk $row (deadline ${left} s)"
        timeout -s INT -k 20 "$left" python3 -m gemmtune.cli bench --deadline $(( $(date +%s) + left - 5 )) \
          --suite /tmp/topk/$i/suite.csv --extra-modes top20,exhaustive \
          --out /tmp/topk/$i 2>&1 | grep --line-buffered -v "^W1\|^I1\|AUTOTUNE\|^  triton_\|^  mm \|SingleProcess\|benchmarking" \
          | tail -15; (( PIPESTATUS[0] == 0 )) || rc=1
      done < <(tail -n +2 "$suite")
      if compgen -G "/tmp/topk/*/*-bench.json" >/dev/null; then
        # One tarball: $OUT brings back at most 8 files, and collectors may run beside this.
        python3 -m gemmtune.cli report --merge /tmp/topk/*/*-bench.json --out /tmp/topk/merged || rc=1
        tar czf "$OUT/topk.tgz" -C /tmp/topk . || rc=1
      else
        echo "topk: no bench JSON was written"; rc=1
      fi ;;
    collect)
      if (( check_rc != 0 )); then echo "collect: skipped, this call's GPU tests failed"; rc=1; continue; fi
      (( ${#collectors[@]} )) || collect_prepare
      collect_start "$FG_GPU" ;;
    *) echo "unknown phase $ph"; rc=2 ;;
  esac
done
if (( ${#collectors[@]} )); then
  (( check_rc == 0 )) || echo "collect: this call's GPU tests FAILED while background collectors ran; check their rows"
  collect_finish
fi
exit $rc
