#!/usr/bin/env bash
# For the next session's first device call (written in session 8, not yet run): the verdict on
# issue 17's Llama decode target after the M=1 hand-back to Inductor (torch_ops.gemv_to_inductor):
# compile + cdt, patch + compile + cdt and max-autotune, each step replayed from a CUDA graph,
# interleaved and profiled (every kernel). max-autotune's compile is ~290 s on an H100, so this
# needs the whole 600 s call. First the GPU tests of the hand-back and the profile. Carry .whl.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 90 python3 -m pytest -q tests/test_eager.py tests/test_benchmodel.py -k "m1_layers or profile" > $OUT/tests_m1.log 2>&1
echo "m1/profile tests rc=$?"; tail -3 $OUT/tests_m1.log
unset TEST_S; export PROFILE=1
MODES=${MODES:-compile_cdt_graph,patch_compile_cdt_graph,max_autotune_graph} LLAMA_S=${LLAMA_S:-470} \
  bash scripts/sessions/gpu_s6_call2.sh
python3 - <<PY
import json
d = json.load(open("$OUT/bm/bench-model.json"))
for m in d["models"]:
    for k, v in m["modes"].items():
        print(k, {p: round(r["ms"], 3) for p, r in v.get("phases", {}).items()}, round(v.get("first_calls_s", 0), 1), v.get("failed", ""))
    print(m.get("graph_interleaved"))
    for p, modes in m.get("graph_profile", {}).items():
        for mode, r in modes.items():
            print(mode, p, round(r["us"], 1), "gemm", round(r["gemm_us"], 1), "kernels", r["kernels"])
PY
