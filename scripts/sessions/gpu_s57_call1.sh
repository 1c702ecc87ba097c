#!/usr/bin/env bash
# Session 57, call 1 (GPU only; no carry; ~7 min): shapes nobody chose. A random suite with a seed no call has
# used (scripts/random_suite.py --seed 57), the five public classes plus the tall and small-K classes the public
# suite has no row of: --fast, the default space and model top-5 against cuBLAS, interleaved, no Inductor or
# TunableOp (time). Looks for picks slower than cuBLAS and classes left far from the floor. Then #17's host cost:
# a converted layer on its F.linear path against nn.Linear, and a patched 16-layer Llama decode step against a copy,
# with CUDA tensors (scripts/diag_linear_host.py; on the CPU machine the converted call was 0.57 us cheaper).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers lightgbm
T0=$(date +%s)
python3 scripts/random_suite.py --seed 57 --per-group decode=6,splitk=4,odd=5,prefill=3,square=3,tall=3,smallk=3 \
  --out $OUT/rand.csv
timeout 400 python3 -m gemmtune.cli bench --suite $OUT/rand.csv --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 360 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|left out|rror" $OUT/bench.log | head
grep -A12 "Geomean % of the physical" $OUT/bench/*.md; grep -A12 "^## Geomean speedup" $OUT/bench/*.md
grep -A5 "Tuning wall" $OUT/bench/*.md
rm -f $OUT/bench/*.png
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
gzip -f $OUT/bench.log
timeout 120 python3 scripts/diag_linear_host.py --device cuda --dtype bfloat16 --features 2048 --rounds 31 \
  > $OUT/linear_host.log 2>&1; echo "linear_host rc=$?"; grep -v Warn $OUT/linear_host.log | tail -9
echo "call took $(( $(date +%s) - T0 )) s"
