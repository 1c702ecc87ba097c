#!/usr/bin/env bash
# Session 50, call 5 (GPU only; no carry; ~9 min): the final tree.
# (1) The -m gpu lane (the store's fp32 precision, the table and epilogue hunts' fixes,
#     fit_stages, the write ceiling).
# (2) What fp32 (TF32 off, 3xTF32) gains in a model: Qwen2-0.5B's config with random weights in
#     float32, prefill 512 and decode b1 / b16, eager against eager + patch, un-graphed and from
#     CUDA graphs; logits and greedy tokens checked by bench-model.
# (3) `gemmtune bench` on two public rows (cube_4096_fp32, small_mn_256): the ceilings measured
#     with the new write ceiling, and the fp32 cube with the BK64 8-warp tile in its space.
# (4) With what is left: 3xTF32 fp32 timings for the rankers, the built-in plan's fp32 shapes
#     spread over its groups, into a fresh store whose rows carry fp32_precision (schema 2).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 240 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|ERROR" $OUT/gpu_tests.txt | tail -15
timeout 170 python3 -m gemmtune.cli bench-model --models qwen2-0.5b --dtype float32 \
  --phases prefill_b1_s512,decode_b1,decode_b16 --modes eager,eager_patch,eager_graph,eager_patch_graph \
  --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11" $OUT/bm.log | grep -E "interleaved|rror|tuned|decode|prefill|Checks|Warn|paths" | tail -16
grep -A14 "^| model" $OUT/bm/*.md | head -30
tar czf $OUT/bm.tgz -C $OUT bm bm.log && rm -rf $OUT/bm $OUT/bm.log
printf 'group,name,M,N,K,dtype\nsquare,cube_4096_fp32,4096,4096,4096,float32\nsplitk,small_mn_256,256,256,16384,bfloat16\n' > $OUT/two.csv
timeout 120 python3 -m gemmtune.cli bench --suite $OUT/two.csv --skip-inductor --skip-tunableop \
  --deadline $(( $(date +%s) + 100 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "left out|rror|Traceback" $OUT/bench.log | head -5
grep -E "^(square|splitk) " $OUT/bench.log | sed -E 's/  gemmtune model adaptive.*//'
grep -iE "write|read bandwidth|floor =" $OUT/bench/*.md | head -8
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench two.csv && rm -rf $OUT/bench
LEFT=$(( (570 - $(date +%s) + T0) / 60 ))
if [ $LEFT -ge 2 ]; then
  timeout $(( LEFT * 60 + 20 )) python3 -m gemmtune.cli collect --dtypes fp32 --order spread --mm-sample 40 --splitk-sample 16 \
    --max-minutes $(( LEFT - 1 )) --hard-stop-minutes $LEFT --out $OUT/collect > $OUT/collect.log 2>&1
  echo "collect rc=$? ($LEFT min)"; tail -4 $OUT/collect.log
  rm -f $OUT/collect/collect.sqlite $OUT/collect/*.sqlite-*; tar czf $OUT/collect.tgz -C $OUT collect collect.log && rm -rf $OUT/collect $OUT/collect.log
fi
gzip -f $OUT/gpu_tests.txt
echo "call took $(( $(date +%s) - T0 )) s"
