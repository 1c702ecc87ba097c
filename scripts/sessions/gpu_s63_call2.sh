#!/usr/bin/env bash
# Prepared in session 62 (no device time that session), for the next session (GPU only; no carry; ~8.5 min).
# Session 62 made compile_route route retired layers' GEMMs only in compiles whose steps replay from CUDA graphs
# (Inductor's cudagraphs on, or compile_route.graphed(), which bench-model's graph modes compile under, each
# patched compiled mode's graph twin with a torch.compile backend of its own). Session 61 measured the un-graphed
# patch + compile of Llama-1B decode b1 at 0.59x plain compile with its retired layers routed. Expected now: the
# un-graphed patch_compile near compile (its retired layers are Inductor's), patch_compile_graph still routed
# (session 61: 1.085x max_autotune_graph). The report's "Given back" line counts routed / left to Inductor.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_retire.py > $OUT/pytest_gpu.log 2>&1
echo "pytest -m gpu rc=$? t=$(( $(date +%s) - T0 )) s"; tail -2 $OUT/pytest_gpu.log
timeout 420 python3 -m gemmtune.cli bench-model --models llama-1b --dtype bfloat16 --phases decode_b1 \
  --modes eager,eager_patch,compile,patch_compile,compile_graph,patch_compile_graph,max_autotune_graph \
  --eager-rounds 21 --out $OUT/bm-llama-1b > $OUT/bm-llama-1b.log 2>&1
echo "bench-model rc=$? t=$(( $(date +%s) - T0 )) s"
grep -E "Given back|interleaved|CUDA graphs|decode_b1 \|" $OUT/bm-llama-1b/bench-model.md | cut -c1-1500
grep -E "first calls" $OUT/bm-llama-1b.log | cut -c1-300
tar czf $OUT/bm-llama-1b.tgz -C $OUT bm-llama-1b bm-llama-1b.log && rm -rf $OUT/bm-llama-1b $OUT/bm-llama-1b.log
echo "call took $(( $(date +%s) - T0 )) s"
