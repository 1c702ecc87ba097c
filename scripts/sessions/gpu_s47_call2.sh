#!/usr/bin/env bash
# Session 47, call 2 (GPU only; no carry; ~4 min): exp_gemv_oddn.py again with register-prefetched
# variants (-PF: the next rows' loads issued before this step's products), beside call 1's.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
timeout 330 python3 scripts/exp_gemv_oddn.py --out $OUT/gemv_oddn_pf.json --budget-s 240 > $OUT/gemv_oddn_pf.log 2>&1
echo "exp rc=$?"; grep -v "^   not timed" $OUT/gemv_oddn_pf.log | head -30
python3 - <<'PY'
import json, os
d = json.load(open(os.environ["OUT"] + "/gemv_oddn_pf.json"))
for r in d["rows"]:
    t = {k: v for k, v in r["us"].items() if isinstance(v, float)}
    pf = min((v, k) for k, v in t.items() if k.endswith("-PF"))
    nopf = min((v, k) for k, v in t.items() if k.startswith("shift") and not k.endswith("-PF"))
    print(r["N"], r["K"], "best PF", pf, "best plain", nopf, "floor", round(r["floor_us"], 2))
PY
