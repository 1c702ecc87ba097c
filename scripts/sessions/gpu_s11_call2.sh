#!/usr/bin/env bash
# Session 11, second device call (one GPU; abtrees/<commit>/{src,scripts} made with `git archive`,
# untracked, travel with the tree): 1. the GPU tests of call 1 again without -x (call 1 stopped on a
# test that built torch.device("cuda") against tensors on cuda:0; bind now reads them as one GPU);
# 2. the parity harness A/B on one machine: before session 10's tiled changes (95ab540), with the
# prologue change only (35e60a4), and now; 3. Nsight Compute on ours vs Inductor's template vs cuBLAS.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-out}; mkdir -p "$OUT"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
PYTHONPATH=$PWD/src timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_tile_cstore.py \
  tests/test_kernels.py tests/test_static.py tests/test_epilogue.py tests/test_pad.py > $OUT/tests.log 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests.log
mkdir -p $OUT/ab
for tree in abtrees/95ab540 abtrees/35e60a4 . abtrees/95ab540; do
  tag=$(basename $(cd $tree && pwd)); [ "$tree" = . ] && tag=now
  timeout 150 python3 $tree/scripts/parity_inductor.py --small --static --same-out --limit ${PARITY_N:-4} \
    --out $OUT/ab/parity-$tag.json > $OUT/ab/parity-$tag.log 2>&1
  echo "== $tag rc=$?"; grep -E "ratio" $OUT/ab/parity-$tag.log | cut -c1-170
done
PYTHONPATH=$PWD/src timeout 200 ncu --profile-from-start off --set full --csv --page details \
  python3 scripts/parity_ncu.py 512x4096x4096:bfloat16:BM64-BN128-BK64-S4-W4-G8 1024x1024x1024:bfloat16:BM64-BN128-BK64-S4-W4-G8 \
  > $OUT/ab/ncu.csv 2> $OUT/ab/ncu.err
echo "ncu rc=$?"; tail -3 $OUT/ab/ncu.err; wc -l $OUT/ab/ncu.csv
tar -czf $OUT/ab.tgz -C $OUT ab && rm -rf $OUT/ab
