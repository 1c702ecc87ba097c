#!/usr/bin/env bash
# Session 23, call 1: how --fast, the default space and model top-5 generalise, on 16 shapes that no
# store holds (benchmarks/suites/validate-s23.csv: MoE experts and Linear decode, ViT / Whisper / Qwen
# mid-M, small M x N with long K, LoRA's N=16 and K=16, primes, an odd vocabulary, ragged K, fp32),
# with Inductor max-autotune and cuBLAS interleaved; then session 22's four --fast misses again
# (benchmarks/suites/recheck-s22-misses.csv), first timed with topk.with_padded_cublas and the
# bench JSON's sweeps. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
timeout 420 python3 -m gemmtune.cli bench --suite benchmarks/suites/validate-s23.csv \
  --skip-tunableop --deadline $(( $(date +%s) + 400 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"
timeout 120 python3 -m gemmtune.cli bench --suite benchmarks/suites/recheck-s22-misses.csv --skip-inductor \
  --skip-tunableop --deadline $(( $(date +%s) + 100 )) --out $OUT/recheck > $OUT/recheck.log 2>&1
echo "recheck rc=$?"
for d in bench recheck; do
  grep -A7 "Tuning wall" $OUT/$d/*.md | head -9; grep -A8 "Geomean % of the physical" $OUT/$d/*.md
  grep -A24 "^## Per shape: speedup" $OUT/$d/*.md | head -24
  rm -f $OUT/$d/*.png; tar czf $OUT/$d.tgz -C $OUT $d && rm -rf $OUT/$d
done
