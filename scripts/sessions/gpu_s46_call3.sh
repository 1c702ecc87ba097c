#!/usr/bin/env bash
# Session 46, call 3 (GPU only; no carry; ~9 min): the final tree. compute-sanitizer memcheck over
# the tiled kernels' odd-N paths (triton_static's new forms among them: an odd N wrapped without a
# mask must read nothing past B), the whole -m gpu lane (with the warm-server and pool fixes), the
# public odd group with Inductor (the default mode now times the fastest tile's other forms:
# plan.refine_forms), and fuzz_tune seed 48 (--fast's first-pick forms behind dispatchers).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 python3 scripts/sanitize_kernels.py triton_static,triton_mm \
  > $OUT/sanitizer.txt 2>&1
echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|WRONG|wrote past|all ok" $OUT/sanitizer.txt | tail -4
timeout 300 python3 -m pytest -q -n 8 -m gpu tests -p no:cacheprovider > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; tail -3 $OUT/gpu_tests.txt
timeout $(( 545 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --groups odd --skip-tunableop \
  --deadline $(( T0 + 480 )) --out /tmp/odd > /tmp/odd.log 2>&1
echo "odd rc=$?"
grep -A8 "Tuning wall" /tmp/odd/*.md | tail -6; grep -A6 "^## Geomean speedup" /tmp/odd/*.md | tail -4
python3 - /tmp/odd/*.json <<'PY'
import json, sys
for s in json.load(open(sys.argv[1]))["shapes"]:
    print(s["name"], {k: (v.get("choice"), round(v["kernel"]["ms"] * 1e3, 2)) for k, v in s["methods"].items()
                      if isinstance(v, dict) and v.get("status") == "ok" and "kernel" in v})
PY
rm -f /tmp/odd/*.png; tar czf $OUT/bench.tgz -C /tmp odd odd.log
timeout $(( 590 - $(date +%s) + T0 )) python3 scripts/fuzz_tune.py --n 30 --seed 48 --out $OUT/fuzz48 > $OUT/fuzz48.log 2>&1
echo "fuzz_tune seed 48 rc=$?"; tail -6 $OUT/fuzz48.log
