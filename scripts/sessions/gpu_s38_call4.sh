#!/usr/bin/env bash
# Session 38, after call 2 ran out of its 580 s: its first mode (fuse_patch_compile_pdl, timed
# un-graphed) spent most of the call in the greedy check, whose 32 steps recompile a static-shape
# graph per KV length. This call keeps only the graph modes (no greedy check: each is its base
# mode's model): #17 with PDL on both sides through bench-model, Llama-1B decode b1, fused + tuned
# with -pdl twins and Inductor's PDL, against max-autotune with Inductor's PDL and the same fused
# winners without PDL, CUDA graphs, replayed interleaved, profiled.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
unset GEMMTUNE_GEMV_HANDBACK_MIN_BYTES
M=${MODEL:-llama-1b}
timeout 560 python3 -m gemmtune.cli bench-model --models $M --phases decode_b1 --profile \
  --modes fuse_patch_compile_graph,fuse_patch_compile_pdl_graph,max_autotune_pdl_graph \
  --out $OUT/bm_$M > $OUT/bm_$M.log 2>&1
echo "bench-model $M rc=$?"; grep -v "^E11\|^W11" $OUT/bm_$M.log | grep -E "interleaved|replay|FAILED|rror|first calls" | tail -12
