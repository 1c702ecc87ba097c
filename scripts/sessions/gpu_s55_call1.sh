#!/usr/bin/env bash
# Session 55, call 1 (GPU only; no carry; ~9 min): the prefetched B of triton_static's indexed_wrap form
# now addressed as column pointers plus a row offset (offline sm_90a, triton 3.6: the static K loop
# 401 -> 213 SASS instructions on 300x20001x512, 380 -> 192 on 96x50257x768). (1) compute-sanitizer
# over triton_static's cases; (2) the static forms' GPU tests; (3) the odd rows' parity against
# Inductor's template, same config, 5 rounds; (4) gemmtune bench on the odd group (no Inductor).
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 70 compute-sanitizer --tool memcheck python3 scripts/sanitize_kernels.py triton_static > $OUT/sanitize.log 2>&1
echo "sanitize rc=$?"; grep -E "ERROR SUMMARY|sanitize:|FAIL|mismatch" $OUT/sanitize.log | tail -4
timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_static_forms.py > $OUT/gpu_static_forms.txt 2>&1
echo "static forms rc=$?"; tail -2 $OUT/gpu_static_forms.txt
timeout 150 python3 scripts/parity_inductor.py --small --odd --static --indexed-k --wrap-odd --rounds 5 \
  --only 96x50257x768,300x20001x512,333x4097x1025,777x1531x2049,1021x2053x509 \
  --out $OUT/parity_odd.json > $OUT/parity_odd.log 2>&1
echo "parity rc=$?"; grep -E "ratio" $OUT/parity_odd.log | sed -E 's/ \| ours \{.*//' | cut -c1-330
timeout $(( 560 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --groups odd --skip-tunableop --skip-inductor \
  --deadline $(( T0 + 540 )) --out $OUT/bench > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -E "left out|rror" $OUT/bench.log | grep -v "^E12" | head -5
grep -A8 "Geomean % of the physical" $OUT/bench/*.md; grep -A8 "^## Geomean speedup" $OUT/bench/*.md
grep -E "^\| odd \|" $OUT/bench/*.md | head -8
rm -f $OUT/bench/*.png; tar czf $OUT/bench.tgz -C $OUT bench && rm -rf $OUT/bench
gzip -f $OUT/sanitize.log
echo "call took $(( $(date +%s) - T0 )) s"
