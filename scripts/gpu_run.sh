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
# topk:     #5's tuning wall time at k = 1/5/20 and exhaustive vs Inductor (TOPK_S, default 420)
# collect:  #5's bulk timings (scripts/collect.py) for the rest of the call (CALL_S, default 585 s
#           from the script's start), into out/collect-work/collect.sqlite, which stays on a warm
#           machine from call to call (out/ is git-ignored); a fresh machine starts it from
#           data/collect/collect.sqlite.gz. Skipped when this call's GPU tests failed: a timer
#           bug would spoil the data. COLLECT_ARGS adds flags.
# Results go to $OUT (or ./out when run by hand). Wheels in .whl/ (pytest, rich, ...)
# are installed to /tmp/site first when present: the GPU machine has no registry.
# .whl/ is not in git; make it once per machine, then pass carry=[".whl"] to the device:
#   echo /.whl/ >> .git/info/exclude
#   pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     pytest pluggy iniconfig rich markdown-it-py mdurl pygments hypothesis sortedcontainers attrs
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
phases=${*:-check faults}
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
} 2>&1 | tee "$OUT/env.txt"
rc=0; check_rc=0
for ph in $phases; do
  echo "=== $ph ==="
  case $ph in
    check)
      # tee before tail: the log under $OUT survives a call cut off at its limit
      timeout -s INT -k 10 "${CHECK_S:-300}" python3 -m pytest tests -q -m gpu -p no:cacheprovider --durations=15 2>&1 \
        | tee "$OUT/gpu_tests.log" | tail -60; (( PIPESTATUS[0] == 0 )) || { rc=1; check_rc=1; }
      # The demo's output goes into the same log: $OUT brings back at most 8 files.
      python3 -m gemmtune.cli demo --size 333x4097x1025 2>&1 | tee -a "$OUT/gpu_tests.log" | tail -8 \
        || { rc=1; check_rc=1; } ;;
    faults)
      python3 scripts/gpu_faults.py 2>&1 | tee "$OUT/faults.txt" || rc=1 ;;
    tune)
      python3 -m gemmtune.cli tune --preset public --space default --store "$OUT/public.sqlite" \
        --out "$OUT/public-table.json" --summary "$OUT/tune-run.json" -q ${TUNE_ARGS:-} 2>&1 | tee "$OUT/tune.txt" || rc=1
      python3 scripts/summarize_store.py "$OUT/public.sqlite" "$OUT/tune-summary.json" "$OUT/tune-run.json" | tail -45 || rc=1 ;;
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
      suite=benchmarks/suites/topk-exhaustive.csv; t0=$SECONDS; budget=${TOPK_S:-420}; i=0
      n=$(( $(wc -l < "$suite") - 1 ))
      rm -rf /tmp/topk; mkdir -p /tmp/topk
      while IFS= read -r row; do
        # An equal share of what is left for each shape still to run.
        left=$(( (budget - (SECONDS - t0) - 15) / (n - i) ))
        if (( left < 60 )); then echo "topk: ${left} s left, not started: $row"; rc=1; break; fi
        i=$((i + 1)); mkdir -p /tmp/topk/$i; { head -1 "$suite"; echo "$row"; } > /tmp/topk/$i/suite.csv
        echo "--- topk $row (deadline ${left} s)"
        GEMMTUNE_BENCH_DEADLINE=$(( $(date +%s) + left - 5 )) timeout -s INT -k 20 "$left" \
          python3 -m gemmtune.cli bench --suite /tmp/topk/$i/suite.csv --extra-modes top20,exhaustive \
          --out /tmp/topk/$i 2>&1 | grep --line-buffered -v "^W1\|^I1\|AUTOTUNE\|^  triton_\|^  mm \|SingleProcess\|benchmarking" \
          | tail -15; (( PIPESTATUS[0] == 0 )) || rc=1
      done < <(tail -n +2 "$suite")
      if compgen -G "/tmp/topk/*/*-bench.json" >/dev/null; then
        python3 -m gemmtune.cli report --merge /tmp/topk/*/*-bench.json --out "$OUT" || rc=1
      else
        echo "topk: no bench JSON was written"; rc=1
      fi ;;
    collect)
      if (( check_rc != 0 )); then echo "collect: skipped, this call's GPU tests failed"; rc=1; continue; fi
      left=$(( ${CALL_S:-585} - SECONDS ))
      if (( left < 150 )); then echo "collect: only ${left} s left in this call, not started"; continue; fi
      # Batches are sized to end 70 s before the call does; the watchdog stops a batch that
      # overruns 25 s before, exporting the store (a few seconds) so nothing measured is lost.
      mkdir -p out/collect-work
      python3 scripts/collect.py --store out/collect-work/collect.sqlite \
        --resume-from data/collect/collect.sqlite.gz --batch 8 \
        --max-minutes "$(awk "BEGIN{print ($left - 70) / 60}")" \
        --hard-stop-minutes "$(awk "BEGIN{print ($left - 25) / 60}")" ${COLLECT_ARGS:-} 2>&1 \
        | grep --line-buffered -v "^W1\|^I1\|AUTOTUNE" | tail -25; (( PIPESTATUS[0] == 0 )) || rc=1
      # The CSV is made again from the store on any machine (collect.py --export-only): the
      # store and the progress file are the two files this phase brings back.
      rm -f "$OUT"/collect-*.csv.gz ;;
    *) echo "unknown phase $ph"; rc=2 ;;
  esac
done
exit $rc
