#!/usr/bin/env bash
# Session 12, device call 10 (one GPU; carry .minilm and .whl, data/collect moved aside): tune(in_process=True)
# on the GPU. 1) the in-process test and a CLI tune --in-process; 2) MiniLM through bench-model with
# --in-process-tuning beside max-autotune (its tuning was 0.134x max-autotune's compile with a worker).
set -u
source scripts/device_env.sh
unpack_minilm
record_env transformers sentence_transformers lightgbm
mkdir -p $OUT/r $OUT/mini
timeout 60 python3 scripts/sanitize_fixup.py > $OUT/r/fixup.log 2>&1; echo "fixup rc=$?"; tail -1 $OUT/r/fixup.log
timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/test_tune.py -k in_process > $OUT/r/tests.log 2>&1
echo "tests rc=$?"; tail -2 $OUT/r/tests.log
( cd /tmp && /usr/bin/time -f "%e s wall, in-process" python3 -m gemmtune.cli tune --shape 512x4096x4096:bf16 --fast \
    --in-process --store /tmp/ip.sqlite --out /tmp/ip.json ) > $OUT/r/cli.log 2>&1
echo "cli rc=$?"; tail -4 $OUT/r/cli.log
OUT=$OUT/mini timeout 300 python3 - <<'PY' > $OUT/mini/bench-model.log 2>&1
import os, gemmtune.benchmodel as bm
bm.run(["minilm"], phases=["embed_64"], modes=["compile_graph", "patch_compile_graph", "max_autotune_graph"],
       out_dir=os.environ["OUT"], tune_kwargs={"fast": True, "in_process": True}, minilm_folder=os.environ.get("MINILM"))
PY
echo "minilm rc=$?"; grep -E "^minilm|rror|interleaved" $OUT/mini/bench-model.log | grep -v "^E11" | tail -8
python3 -c "
import json; m=json.load(open('$OUT/mini/bench-model.json'))['models'][0]
print({k: m.get(k) for k in ('tune_s','tune_call_s','tune_startup_s','winners')}, {k: v.get('first_calls_s') for k, v in m['modes'].items()})"
rm -f $OUT/mini/bench-model.md
grep -v "^E11" $OUT/mini/bench-model.log | gzip > $OUT/mini/bench-model.log.gz && rm $OUT/mini/bench-model.log
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
