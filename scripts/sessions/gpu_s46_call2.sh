#!/usr/bin/env bash
# Session 46, call 2 (GPU only; no carry; ~9 min): triton_static's K-loop forms as a tuned choice
# (#16). First the forms' tests on the GPU (bf16 at real odd sizes, the dispatcher's prepared
# launch), then `gemmtune bench` with Inductor max-autotune on the public odd group and on five odd
# shapes outside it (benchmarks/suites/odd-unseen.csv): what --fast and the default pick now, and
# each shape's sweep (the forms' own times beside the carried form's, in one tuning run).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 150 python3 -m pytest -q -n 4 -p no:cacheprovider tests/test_static_forms.py tests/test_static.py > $OUT/forms_tests.txt 2>&1
echo "forms tests rc=$?"; tail -4 $OUT/forms_tests.txt
timeout $(( 560 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --groups odd --skip-tunableop \
  --ceilings-file /tmp/ceil.json --deadline $(( T0 + 330 )) --out /tmp/odd > /tmp/odd.log 2>&1
echo "odd rc=$?"
timeout $(( 575 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --suite benchmarks/suites/odd-unseen.csv --skip-tunableop \
  --ceilings-file /tmp/ceil.json --deadline $(( T0 + 540 )) --out /tmp/odd2 > /tmp/odd2.log 2>&1
echo "odd-unseen rc=$?"
for d in odd odd2; do
  grep -A8 "Tuning wall" /tmp/$d/*.md | tail -6; grep -A8 "^## Geomean speedup" /tmp/$d/*.md | tail -7
done
python3 - /tmp/odd/*.json /tmp/odd2/*.json <<'PY'
import json, sys
for f in sys.argv[1:]:
    for s in json.load(open(f))["shapes"]:
        for mode in ("gemmtune_fast", "gemmtune"):
            m = s["methods"].get(mode, {})
            forms = [w for w in m.get("sweep", []) if w["choice"].startswith("triton_static")]
            print(s["name"], mode, m.get("choice"), round(m.get("kernel", {}).get("ms", 0) * 1e3, 2),
                  [(w["choice"].split(":")[1], round(w["ms"] * 1e3, 2)) for w in forms])
PY
rm -f /tmp/odd/*.png /tmp/odd2/*.png
tar czf $OUT/bench.tgz -C /tmp odd odd2 odd.log odd2.log
