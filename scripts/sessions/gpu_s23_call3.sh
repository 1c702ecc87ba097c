#!/usr/bin/env bash
# Session 23, call 3: an A/B/C of the tiled kernel's K loop against Inductor's template, same configs,
# each tree in its own process on one machine (scripts/parity_inductor.py --small --static):
#   A: the carried loop as it was (per-element i32 offset tensors added to every iteration);
#   B: the offsets fixed, the scalar base pointers advanced (kernels.tiled, session 23);
#   C: B, and an odd N along a row-major B wraps (rn % N) where N >= BLOCK_N instead of masking.
# Offline (sm_90a, scripts/parity_ir.py) B and C cut the K loop's SASS on the unaligned rows to
# Inductor's level. Then compute-sanitizer memcheck on C's triton_mm / triton_static launches.
# The variants are patches in benchmarks/results/2026-11-27-h100-s23/ab/. GPU only; carry .whl.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env lightgbm
# Tree A is the checkout's own kernels: run this from a checkout of commit 88bdae2 (the tree the call
# ran; later commits changed kernels/tiled.py). B and C are A plus the patches in ab/.
AB=$PWD/benchmarks/results/2026-11-27-h100-s23/ab
ROOT=$PWD
for t in A B C; do
  rm -rf /tmp/tree_$t && mkdir -p /tmp/tree_$t && cp -r src scripts /tmp/tree_$t/
  case $t in
    B) patch -s -p1 -d /tmp/tree_$t < $AB/B-tiled.patch;;
    C) patch -s -p1 -d /tmp/tree_$t < $AB/B-tiled.patch && patch -s -p1 -d /tmp/tree_$t < $AB/C-launch_args.patch;;
  esac
  (cd /tmp/tree_$t && PYTHONPATH=/tmp/tree_$t/src:/tmp/site timeout 170 python3 scripts/parity_inductor.py --small --static \
     --out $OUT/parity_$t.json > $OUT/parity_$t.log 2>&1; echo "parity $t rc=$?")
  grep -E "^[0-9]+x" $OUT/parity_$t.log | awk '{printf "%s %s %s ours %s inductor %s cublas %s ratio %s static %s\n", "'$t'", $1, $3, $5, $8, $11, $14, $16}'
done
cd /tmp/tree_C && PYTHONPATH=/tmp/tree_C/src:/tmp/site timeout 150 compute-sanitizer --tool memcheck python3 scripts/sanitize_kernels.py triton_mm,triton_static \
  > $OUT/sanitize_C.log 2>&1; echo "sanitize rc=$?"; tail -4 $OUT/sanitize_C.log
cd $ROOT
tar czf $OUT/parity.tgz -C $OUT parity_A.json parity_B.json parity_C.json && rm -f $OUT/parity_?.json
