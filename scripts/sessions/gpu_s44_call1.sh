#!/usr/bin/env bash
# Prepared in session 43 for session 44 (GPU only; no carry; ~3 min). Why each tune mode's first shape
# took 3-4.5 s longer than the rest in session 43's bench (call 4: --fast's first shape 4.06 s of
# 24 shapes' 18.8 s; odd's 5.75 of 9.2): the per-shape wait for the compile workers, new in session
# 43 (ShapeResult.compile_wait_s), against each shape's tune_s. If the first shape's time is its wait,
# the compile workers' start-up is on the critical path (a first shape compiled by the benchmark
# worker itself would take it off); if not, the benchmark worker's own first-use costs are.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 300 python3 -m gemmtune.cli bench --groups odd,decode --skip-inductor --skip-tunableop \
  --out /tmp/first > /tmp/first.log 2>&1
echo "bench rc=$?"; grep "candidates in" /tmp/first.log
python3 - <<'PY'
import glob, json
d = json.load(open(glob.glob("/tmp/first/*-bench.json")[0]))
for mode, ran in d["header"]["modes"].items():
    print(mode, {k: round(v, 2) if isinstance(v, float) else v for k, v in ran.items() if k != "kwargs"})
    for r in d["shapes"]:
        m = r["methods"].get(mode, {})
        print(f"   {r['name']:24s} tune_s {m.get('tune_s', 0):6.2f}  compile_wait_s {m.get('compile_wait_s', 0):6.2f}")
PY
rm -f /tmp/first/*.png; tar czf $OUT/first.tgz -C /tmp first first.log
