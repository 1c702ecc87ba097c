#!/usr/bin/env bash
# Session 55, call 3 (GPU only; no carry; ~5 min): is Inductor's template in #16's parity table running the
# forced config? max-autotune turns coordinate descent on, and in torch 2.11 it applies to template kernels:
# at the first run it may re-tune num_warps / num_stages. The rows where our carried form ran > 1.02x (and
# two controls), timed with coordinate descent on (as before) and off, 5 rounds each; each row records how
# many coordesc benchmarks ran.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
ROWS=512x4096x4096,1024x1024x1024,2048x4096x16,1000x1000x1000,300x20001x512,2048x6144x4096
for mode in on off; do
  flag=""; end=270; [ $mode = off ] && flag="--no-coordesc" && end=540
  timeout $(( end - $(date +%s) + T0 )) python3 scripts/parity_inductor.py --static --indexed-k \
    --wrap-odd --rounds 5 --only $ROWS $flag --out $OUT/parity_cd_$mode.json > $OUT/parity_cd_$mode.log 2>&1
  echo "coordesc $mode rc=$?"; grep -E "ratio|rror" $OUT/parity_cd_$mode.log | grep -v "^E1" | sed -E 's/ \| ours \{.*//' \
    | sed -E 's/1out nan  old nan  //' | cut -c1-360
done
echo "call took $(( $(date +%s) - T0 )) s"
