#!/usr/bin/env bash
# Session 49, call 1 (GPU only; no carry; ~7 min): a class no suite has held. Tall-skinny GEMMs
# (M large, N <= 64: MoE routers, LoRA down-projections, value and classifier heads) and their
# opposite, a tiny K (LoRA up-projections): cuBLAS, torch.compile max-autotune, --fast and the
# default space side by side, % of the physical floor per method. Shapes from model configs
# (hidden 2048-5120, 8-64 experts, LoRA ranks 16-64), not from any tuned row.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
cat > $OUT/tall.csv <<'CSV'
group,name,M,N,K,dtype,layout_a,layout_b
tall,router_8192x8x4096_bf16_rc,8192,8,4096,bfloat16,row,col
tall,router_4096x64x2048_bf16_rc,4096,64,2048,bfloat16,row,col
tall,lora_a_4096x16x4096_bf16_rc,4096,16,4096,bfloat16,row,col
tall,head_16384x1x2048_bf16_rc,16384,1,2048,bfloat16,row,col
tall,lora_a_2048x32x5120_fp16_rr,2048,32,5120,float16,row,row
tall,router_32768x8x2048_bf16_rc,32768,8,2048,bfloat16,row,col
tall,cls_8192x4x1024_fp32_rc,8192,4,1024,float32,row,col
smallk,lora_b_4096x4096x16_bf16_rc,4096,4096,16,bfloat16,row,col
smallk,lora_b_8192x5120x64_bf16_rr,8192,5120,64,bfloat16,row,row
CSV
timeout 420 python3 -m gemmtune.cli bench --suite $OUT/tall.csv --skip-tunableop \
  --deadline $(( T0 + 400 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "candidates in|left out|rror" $OUT/bench.log | head
grep -E "^tall|^smallk" $OUT/bench.log | head -20
grep -A8 "Geomean % of the physical" $OUT/bench/*.md; grep -A8 "^## Geomean speedup" $OUT/bench/*.md
rm -f $OUT/bench/*.png
tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
echo "call took $(( $(date +%s) - T0 )) s"
