#!/usr/bin/env bash
# Session 7 (2026-11-25): the first timings on an H100 (issue 19: the shipped models should cover
# both GPUs). bf16, the collection plan dealt round-robin over its groups (--order spread) so that
# a few calls cover every class of problem; fewer configs per shape than the H200 collection
# (40 triton_mm, 20 split-K, 12 of each newer family) so that more shapes fit and the newer
# families are not outnumbered 10 to 1. The first call starts from an empty store; later ones
# resume from data/collect/h100/collect.sqlite.gz, the store the previous call returned.
set -u
cd "$(dirname "$0")/.."
seed=data/collect/h100/collect.sqlite.gz
[[ -f $seed ]] || seed=none
python3 -c 'import torch; n = torch.cuda.get_device_name(); print(n); assert "H100" in n, "not an H100: " + n' || exit 3
COLLECT_SEED=$seed CALL_S=${CALL_S:-580} \
  COLLECT_ARGS="--dtypes ${DTYPES:-bf16} --order spread --mm-sample 40 --splitk-sample 20 --pad-sample 8 --new-sample 12 ${EXTRA_ARGS:-}" \
  bash scripts/gpu_run.sh collect
rc=$?
ls -la "$OUT"
exit $rc
