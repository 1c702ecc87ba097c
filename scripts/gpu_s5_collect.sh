#!/usr/bin/env bash
# Device call 1 of session 5 (2026-11-25): timings of the families the shipped model has none of
# (skinny, persistent_tma, triton_static; `gemmtune collect --new-sample 8`) on the bf16 plan,
# resumed from data/collect/collect.sqlite.gz, for the rest of the call. Same H200 and software
# as the store's earlier rows, so they train one model. DTYPES overrides the dtypes (default bf16).
set -u
cd "$(dirname "$0")/.."
CALL_S=${CALL_S:-580} COLLECT_ARGS="--dtypes ${DTYPES:-bf16} --new-sample 8 ${EXTRA_ARGS:-}" \
  bash scripts/gpu_run.sh collect
rc=$?
ls -la "$OUT"
exit $rc
