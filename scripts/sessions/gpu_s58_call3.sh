#!/usr/bin/env bash
# Session 58, call 3 (GPU only; no carry; ~8 min): 1. #17: a patched 16-layer Llama against a copy, single decode
# steps paired (diag_linear_host.py --paired-steps; call 1's rounds of 50 steps spread +-10%). 2. The public suite,
# every group, cuBLAS interleaved, on the tree with the operand fix and version 0.2.0 (no Inductor or TunableOp: time).
# 3. fuzz_tune on 40 random problems: every winner re-checked against fp64 on fresh, misaligned and other-layout
# operands, directly and behind a dispatcher.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
left() { echo $(( 560 - $(date +%s) + T0 )); }
timeout 120 python3 scripts/diag_linear_host.py --device cuda --dtype bfloat16 --features 2048 --rounds 3 --no-layers \
  --paired-steps 600 > $OUT/llama_paired.log 2>&1; echo "llama rc=$?"; grep -v Warn $OUT/llama_paired.log | tail -4
B=$(( $(left) - 150 ))
timeout $B python3 -m gemmtune.cli bench --skip-inductor --skip-tunableop --deadline $(( $(date +%s) + B - 25 )) \
  --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|left out|rror" $OUT/bench.log | grep -v "^E12" | head
grep -A12 "Geomean % of the physical" $OUT/bench/*.md; grep -A12 "^## Geomean speedup" $OUT/bench/*.md
grep -A6 "Tuning wall" $OUT/bench/*.md | head -8
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench; gzip -f $OUT/bench.log
F=$(( $(left) - 5 )); [ $F -gt 40 ] && { timeout $F python3 scripts/fuzz_tune.py --n 40 --seed 58 --out $OUT/fuzz > $OUT/fuzz.log 2>&1
  echo "fuzz rc=$?"; tail -6 $OUT/fuzz.log; tar czf $OUT/fuzz.tgz -C $OUT fuzz 2>/dev/null && rm -rf $OUT/fuzz; }
echo "call took $(( $(date +%s) - T0 )) s"
