#!/usr/bin/env bash
# Device call 3 of session 8: with torch_ops.gemv_to_inductor (an M=1 gemmtune::mm handed back to
# Inductor under coordinate-descent tuning), Llama-1B decode b1 under CUDA graphs: compile and
# compile + cdt, each plain and patched, interleaved and profiled. First the GPU tests of the
# lowering and of the profile. Carry .whl.
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 90 python3 -m pytest -q tests/test_eager.py tests/test_benchmodel.py -k "m1_layers or profile" > $OUT/tests_m1.log 2>&1
echo "m1/profile tests rc=$?"; tail -3 $OUT/tests_m1.log
unset TEST_S; export PROFILE=1
MODES=${MODES:-compile_graph,compile_cdt_graph,patch_compile_graph,patch_compile_cdt_graph} LLAMA_S=${LLAMA_S:-420} \
  bash scripts/sessions/gpu_s6_call2.sh
python3 - <<PY
import json
d = json.load(open("$OUT/bm/bench-model.json"))
for m in d["models"]:
    print(m.get("graph_interleaved"))
    for p, modes in m.get("graph_profile", {}).items():
        for mode, r in modes.items():
            print(mode, p, round(r["us"], 1), "gemm", round(r["gemm_us"], 1), "kernels", r["kernels"])
            for k in r["top"][:6]:
                print("   ", k["class"], round(k["us"], 1), k["per_replay"], k["name"])
PY
