#!/usr/bin/env bash
# Device call: compile our triton_mm and Inductor's template (same config) for a few shapes in a
# fresh Triton cache, and bring back every TTGIR / PTX they produced (ir.tgz) for side-by-side reading.
set -u
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/ir-cache
rm -rf $TRITON_CACHE_DIR
python3 - <<'PY'
import sys, torch
sys.path.insert(0, "src")
sys.argv = ["x", "--out", "/tmp/parity-ir.json"]
import importlib.util
spec = importlib.util.spec_from_file_location("parity", "scripts/parity_inductor.py")
par = importlib.util.module_from_spec(spec); spec.loader.exec_module(par)
par.CASES[:] = [c for c in par.CASES if (c[0], c[1], c[2]) in {(1000, 1000, 1000), (4096, 4096, 4096), (333, 4097, 1025)} and c[3] == "bfloat16"]
par.main()
PY
cd $TRITON_CACHE_DIR && find . -name "*.ttgir" -o -name "*.ptx" -o -name "*.json" | tar czf $OUT/ir.tgz -T -
ls -la $OUT
