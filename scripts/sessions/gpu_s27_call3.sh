#!/usr/bin/env bash
# Session 27, call 3: --fast's two new picks (topk.with_padded_persistent on large unaligned
# outputs, skinny's GEMV tiles on fp32 Linears at decode) on the random-suite shapes that
# motivated them and on unseen ones of the same classes (benchmarks/results/2026-11-28-h100-s27/
# validate.csv), --fast against the default space and cuBLAS; then an architecture no call has
# run, Mistral-7B's default config (hf:mistral, random weights, bf16), eager against eager + patch,
# un-graphed and from CUDA graphs. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers lightgbm
timeout 300 python3 -m gemmtune.cli bench --suite benchmarks/results/2026-11-28-h100-s27/validate.csv \
  --skip-inductor --skip-tunableop --deadline $(( $(date +%s) + 280 )) \
  --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|left out|rror" $OUT/bench.log | head
grep -A8 "Geomean % of the physical" $OUT/bench/*.md; grep -A8 "^## Geomean speedup" $OUT/bench/*.md
grep -A5 "Tuning wall" $OUT/bench/*.md
grep -E "^(odd|decode|splitk) " $OUT/bench.log | cut -c1-150
rm -f $OUT/bench/*.png
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
timeout 270 python3 -m gemmtune.cli bench-model --models hf:mistral --phases decode_b1,decode_b16,prefill_b1_s512 \
  --modes eager,eager_patch,eager_graph,eager_patch_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11" $OUT/bm.log | grep -E "interleaved|rror|tuned|decode|prefill|Checks" | tail -24
