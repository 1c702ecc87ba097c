#!/usr/bin/env bash
# Session 16, call 5: (1) warm one-shape --fast through a worker server, with and without
# precompile, against max-autotune; (2) whether this machine's torch has a bytecode cache, and the
# cold runs again with one (PYTHONPYCACHEPREFIX, warmed by one run of each process first), as an
# installed torch would have. GPU only; carry .whl (lightgbm).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
mkdir -p $OUT/warm
OUT=$OUT/warm timeout ${WARM_S:-260} bash scripts/warm_precompile.sh > $OUT/warm.log 2>&1
echo "warm rc=$?"; cat $OUT/warm/warm.txt
python3 - <<'PY' 2>&1 | tee $OUT/pyc.txt
import os, sys, importlib.util
import torch
d = os.path.dirname(torch.__file__)
pyc = importlib.util.cache_from_source(os.path.join(d, "__init__.py"))
print("dont_write_bytecode", sys.flags.dont_write_bytecode, "| torch dir writable", os.access(d, os.W_OK),
      "| torch/__init__ pyc exists", os.path.exists(pyc), "|", pyc)
print({k: v for k, v in os.environ.items() if k.startswith("PYTHON")})
PY
export PYTHONPYCACHEPREFIX=/tmp/pyc-$$
python3 scripts/maxautotune_once.py 64x64x64:bf16 > /dev/null 2>&1
python3 -m gemmtune_entry tune --shape 64x64x64:bf16 --fast --store /tmp/pyc-warm.sqlite -q > /dev/null 2>&1
python3 -c "import time; t=time.perf_counter(); import torch; print(f'import torch with a bytecode cache {time.perf_counter()-t:.2f} s')" | tee -a $OUT/pyc.txt
mkdir -p $OUT/cold
OUT=$OUT/cold MODES=cold timeout ${COLD_S:-280} bash scripts/cold_timeline.sh > $OUT/cold.log 2>&1
echo "cold (bytecode cache) rc=$?"; cat $OUT/cold/cold.txt; grep -h "import\|context" $OUT/cold/parts.txt
tar czf $OUT/runs.tgz -C $OUT warm cold && rm -rf $OUT/warm $OUT/cold
