#!/usr/bin/env bash
# The GPU test module (bf16 and every family on the real GPU) and the demo, in one call:
#   device run: bash scripts/gpu_check.sh      (results under $OUT)
exec bash "$(dirname "$0")/gpu_run.sh" check
