#!/usr/bin/env bash
# Device call 2 of session 8: call 1 found compile + coordinate-descent tuning (1.400 ms) far ahead
# of compile (1.662) and of patch + compile + cdt (1.590) on Llama-1B decode b1 (H100). Profile
# each graph mode's kernels (now per mode, so a time limit keeps them) to see which kernels
# differ. Carry .whl.
set -u
export TEST_S=${TEST_S:-60} PROFILE=1
MODES=${MODES:-compile_graph,compile_cdt_graph,patch_compile_cdt_graph} LLAMA_S=${LLAMA_S:-420} \
  bash scripts/sessions/gpu_s6_call2.sh
grep -E "profile|interleaved" $OUT/bm/bench-model.log | tail -20
python3 - <<PY
import json
d = json.load(open("$OUT/bm/bench-model.json"))
for m in d["models"]:
    for p, modes in m.get("graph_profile", {}).items():
        for mode, r in modes.items():
            print(mode, p, round(r["us"], 1), "gemm", round(r["gemm_us"], 1), "kernels", r["kernels"])
            for k in r["top"]:
                print("   ", k["class"], round(k["us"], 1), k["per_replay"], k["name"])
PY
