#!/usr/bin/env bash
# Session 43, call 4 (GPU only; no carry; ~9.5 min): the whole public suite on the current tree, the
# first full run since session 24 (H100) / 22 (H200); the skinny family, -flat strips, pad copies
# and the ranker have changed since. Decode, splitk, prefill and square without Inductor (the
# anchors hold its figures), then the odd group with Inductor (#16: >= Inductor on every odd
# shape). One ceilings measurement for both runs.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 360 python3 -m gemmtune.cli bench --groups decode,splitk,prefill,square --skip-inductor --skip-tunableop \
  --ceilings-file /tmp/ceil.json --deadline $(( T0 + 330 )) --out /tmp/public > /tmp/public.log 2>&1
echo "public rc=$?"
timeout $(( 560 - $(date +%s) + T0 )) python3 -m gemmtune.cli bench --groups odd --skip-tunableop \
  --ceilings-file /tmp/ceil.json --deadline $(( T0 + 520 )) --out /tmp/odd > /tmp/odd.log 2>&1
echo "odd rc=$?"
for d in public odd; do
  grep -A8 "Tuning wall" /tmp/$d/*.md | tail -6; grep -A8 "^## Geomean speedup" /tmp/$d/*.md | tail -7
  grep -A8 "Geomean % of the physical" /tmp/$d/*.md | tail -7
done
rm -f /tmp/public/*.png /tmp/odd/*.png
tar czf $OUT/bench.tgz -C /tmp public odd public.log odd.log
