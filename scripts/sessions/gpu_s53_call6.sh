#!/usr/bin/env bash
# Session 53, call 6 (GPU only; no carry; ~2 min): scripts/exp_prefetch_b.py on the two even-K
# odd-N parity rows: a standalone tiled kernel with B's next K tile prefetched into registers
# (B's 2-byte-aligned rows cannot go through cp.async, so Triton does not pipeline them) against the
# same kernel without the prefetch, Inductor's template on the same config, and cuBLAS.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env
T0=$(date +%s)
timeout 200 python3 scripts/exp_prefetch_b.py --out $OUT/prefetch_b.json --rounds 7 > $OUT/prefetch_b.log 2>&1
echo "prefetch rc=$?"; grep -vE "^(E|W)[0-9]{4}" $OUT/prefetch_b.log | tail -6
echo "call took $(( $(date +%s) - T0 )) s"
