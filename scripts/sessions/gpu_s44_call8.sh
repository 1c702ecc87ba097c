#!/usr/bin/env bash
# Session 44, call 8 (GPU only; no carry; ~4 min): call 7's Llama-1B part again, after the fix of
# tune_model's pre-started workers (a list now; call 7's bench-model crashed on it). Llama-1B decode
# b1 with PDL, fold off and on, the fold's -flat-sum strips summing x^2 at every K step; each run's
# tuning call and its worker start-up (tune_model now pre-starts the compile workers too).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
for f in 0 1; do
  GEMMTUNE_FOLD_NORMS=$f timeout 220 python3 -m gemmtune.cli bench-model --models llama-1b --phases decode_b1 --profile \
    --modes fuse_patch_compile_pdl_graph --out /tmp/bm_pdlfold$f > /tmp/bm_pdlfold$f.log 2>&1
  echo "fold=$f rc=$?"; grep -E "\| fuse_patch" /tmp/bm_pdlfold$f/bench-model.md | cut -c1-240; tail -3 /tmp/bm_pdlfold$f.log | cut -c1-300
  python3 - /tmp/bm_pdlfold$f/bench-model.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["models"][0]
print("step ms", m["modes"]["fuse_patch_compile_pdl_graph"]["phases"]["decode_b1"]["ms"],
      {k: m.get(k) for k in ("fuse_tune_s", "fuse_tune_call_s", "fuse_tune_startup_s", "tune_s", "tune_call_s", "tune_startup_s") if k in m})
PY
done
tar czf $OUT/s44c8.tgz -C /tmp bm_pdlfold0 bm_pdlfold1 bm_pdlfold0.log bm_pdlfold1.log
