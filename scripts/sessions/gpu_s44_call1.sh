#!/usr/bin/env bash
# Prepared in session 43 for session 44 (GPU only; no carry; ~5 min). Why each tune mode's first shape
# took 3-4.5 s longer than the rest in session 43's bench (call 4: --fast's first shape 4.06 s of
# 24 shapes' 18.8 s; odd's 5.75 of 9.2). Two runs of the same bench: as it is, then with
# GEMMTUNE_FIRST_SHAPE_HERE=1 (the benchmark worker compiles the first shape itself while the
# compile workers start; tuning.tuner.first_shape_here). Each shape's wait for the compile workers
# (ShapeResult.compile_wait_s, new in session 43) against its tune_s, and each mode's wall time.
# If the first shape's extra time is its wait and the flag removes it, make the flag the default.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
for here in 0 1; do
  GEMMTUNE_FIRST_SHAPE_HERE=$here timeout 250 python3 -m gemmtune.cli bench --groups odd,decode --skip-inductor \
    --skip-tunableop --out /tmp/first$here > /tmp/first$here.log 2>&1
  echo "GEMMTUNE_FIRST_SHAPE_HERE=$here bench rc=$?"; grep "candidates in" /tmp/first$here.log
  python3 - /tmp/first$here <<'PY'
import glob, json, sys
d = json.load(open(glob.glob(sys.argv[1] + "/*-bench.json")[0]))
for mode, ran in d["header"]["modes"].items():
    print(mode, {k: round(v, 2) if isinstance(v, float) else v for k, v in ran.items() if k != "kwargs"})
    for r in d["shapes"][:3]:
        m = r["methods"].get(mode, {})
        print(f"   {r['name']:24s} tune_s {m.get('tune_s', 0):6.2f}  compile_wait_s {m.get('compile_wait_s', 0):6.2f}")
PY
done
rm -f /tmp/first*/*.png; tar czf $OUT/first.tgz -C /tmp first0 first1 first0.log first1.log
