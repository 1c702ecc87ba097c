#!/usr/bin/env bash
# Session 32, call 3: call 2 again with its GPU test fixed (q and k/v widths), at decode batch 16
# target's comparison. GPU tests of the compiled fused group against fp64, then Llama-1B decode b16
# from CUDA graphs: fused + patched + compile with coordinate-descent tuning against max-autotune,
# replays interleaved. GPU only; no carry.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 100 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_fuse_compile.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -6
timeout 470 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b16 \
  --modes fuse_patch_compile_cdt_graph,max_autotune_graph --out $OUT/bm > $OUT/bm.log 2>&1
echo "bench-model rc=$?"; grep -v "^E11\|^W11" $OUT/bm.log | grep -E "interleaved|rror|FAIL|first calls|merged" | tail -8
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/bm/bench-model.json"))
for m in d["models"]:
    for k, v in m.get("modes", {}).items():
        print(k, {x: v.get(x) for x in ("fused_merged", "first_calls_s", "setup_s")})
PY
tar czf $OUT/bm.tgz -C $OUT bm && rm -rf $OUT/bm
