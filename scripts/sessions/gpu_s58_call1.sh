#!/usr/bin/env bash
# Session 58, call 1 (GPU only; no carry; ~9.5 min):
# 1. cuBLAS routes on one-row / one-column GEMMs (scripts/sessions/exp_gemv_routes.py): torch.mm, torch.mv and the
#    transposed torch.mm, which session 57 saw at 1.89x cuBLAS on 8192x1x4096 where the best Triton tile was 1.65x.
# 2. The -m gpu lane on the tree with session 57's last changes (dispatchers and scaled_mm on run_choice_unchecked).
# 3. gemmtune bench --groups decode,splitk with the 127-leaf ranker (not benched since it shipped).
# 4. #17: a patched 16-layer Llama decode step at batch 1 against a copy (diag_linear_host.py's whole-step half,
#    which timed out at 120 s in session 57 after the layer half; fewer rounds here).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers lightgbm
T0=$(date +%s)
left() { echo $(( 570 - $(date +%s) + T0 )); }
timeout 90 python3 scripts/sessions/exp_gemv_routes.py $OUT/routes.csv > $OUT/routes.log 2>&1
echo "routes rc=$?"; cat $OUT/routes.log | grep -v Warn | tail -20
timeout 240 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15; gzip -f $OUT/gpu_tests.txt
echo "at $(( $(date +%s) - T0 )) s"
B=$(( $(left) - 100 )); [ $B -gt 60 ] && {
timeout $B python3 -m gemmtune.cli bench --groups decode,splitk --skip-tunableop --skip-inductor \
  --deadline $(( $(date +%s) + B - 25 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "left out|rror" $OUT/bench.log | grep -v "^E12" | head -5
grep -A8 "Geomean % of the physical" $OUT/bench/*.md; grep -A8 "^## Geomean speedup" $OUT/bench/*.md
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench; gzip -f $OUT/bench.log; }
L=$(( $(left) - 5 )); [ $L -gt 30 ] && { timeout $L python3 scripts/diag_linear_host.py --device cuda --dtype bfloat16 \
  --features 2048 --rounds 9 --no-layers > $OUT/llama_step.log 2>&1; echo "llama rc=$?"; grep -v Warn $OUT/llama_step.log | tail -5; }
echo "call took $(( $(date +%s) - T0 )) s"
