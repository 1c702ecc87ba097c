#!/usr/bin/env bash
# Last device call of session 4 (2026-11-24), after the house refactor (issue 18) merged: the
# gpu-marked tests across the suite; the fp8 Inductor lookup-table check (issue 20's export);
# the refactored CLI end to end on the GPU (tune --fast, bench on a few shapes, bench-model on
# GPT-2 decode).
set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > $OUT/env.txt 2>&1
timeout 200 python3 -m pytest -q -m gpu tests -p no:cacheprovider > $OUT/gpu-tests.log 2>&1
echo "gpu tests rc=$?"; grep -E "passed|failed|FAILED|Error" $OUT/gpu-tests.log | tail -8
timeout 120 python3 scripts/check_inductor_fp8_lut.py > $OUT/fp8-lut.log 2>&1
echo "fp8 lut rc=$?"; grep -v "^E1124\|^W1124\|^  \|AUTOTUNE\|SingleProcess" $OUT/fp8-lut.log | tail -8 | cut -c1-300
timeout 60 python3 -m gemmtune.cli tune --shape 777x1531x2049:fp16 --fast --out $OUT/t.json --store $OUT/t.sqlite > $OUT/tune.log 2>&1
echo "tune rc=$?"; tail -4 $OUT/tune.log | cut -c1-200
timeout 150 python3 -m gemmtune.cli bench --groups splitk,odd --limit 4 --skip-inductor --skip-tunableop \
  --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "^(splitk|odd) " $OUT/bench.log | sed 's/  */ /g' | cut -c1-200
rm -f $OUT/bench/*.png
mkdir -p $OUT/bm
OUT=$OUT/bm MODELS=gpt2 PHASES=decode_b1 MODES=eager,eager_patch timeout 150 bash scripts/gpu_bench_model.sh > /dev/null 2>&1
echo "bench-model rc=$?"; grep -E "^gpt2|rror" $OUT/bm/bench-model.log | tail -8 | cut -c1-200
rm -f $OUT/bm/*.png
