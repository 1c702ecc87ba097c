#!/usr/bin/env bash
# Session 9, device call 3: split-K's tile-major workspace (merged from wip-splitk-tilews) against
# the kernels before it, on one GPU in one call. The old kernel files travel in .old/ (carry it) and
# run from a copy of src/. Each run tunes the split-K, skinny and aten families on the same suite
# (the public splitk group, ragged long-K shapes, two decode shapes); scripts/splitk_ab.py compares
# each family's best against its own run's cuBLAS.
set -u
export PYTHONUNBUFFERED=1
rm -rf /tmp/oldsrc && cp -r src /tmp/oldsrc && cp .old/*.py /tmp/oldsrc/gemmtune/kernels/
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  PYTHONPATH=$PWD/src python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
for v in new old; do
  P=$PWD/src; [ $v = old ] && P=/tmp/oldsrc
  PYTHONPATH=$P timeout ${TUNE_S:-230} python3 -m gemmtune.cli tune --suite scripts/suites/splitk_ab.csv \
    --families splitk,skinny,aten --store $OUT/$v.sqlite -q > $OUT/$v.log 2>&1
  echo "$v rc=$?"; tail -2 $OUT/$v.log
done
PYTHONPATH=$PWD/src python3 scripts/splitk_ab.py $OUT/new.sqlite $OUT/old.sqlite --json $OUT/ab.json
