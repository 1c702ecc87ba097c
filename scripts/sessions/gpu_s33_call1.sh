#!/usr/bin/env bash
# Prepared at the end of session 32 for session 33's first device call (~5 min): what session 32
# mended on the CPU after its last GPU call. The fuse_compile GPU tests (torch 2.11's dynamo folded
# a traced is_exporting() to True, which left every fused group unmerged; the check now reads the
# flag), then the README's decode recipe as written (gpu_s32_call4.py --no-cudagraphs: coordinate
# descent only), its logits against the unfused eager model. GPU only; no carry.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
timeout 120 python3 -m pytest -q -n 4 -p no:cacheprovider -m gpu tests/test_fuse_compile.py tests/test_fuse.py \
  tests/test_nn_transforms.py > $OUT/gpu_tests.txt 2>&1
echo "gpu tests rc=$?"; grep -E "FAILED|passed|failed|Error" $OUT/gpu_tests.txt | tail -6
timeout 300 python3 scripts/sessions/gpu_s32_call4.py --no-cudagraphs > $OUT/recipe.log 2>&1
echo "recipe rc=$?"; grep -v "^W11\|^E11\|Warning\|warn" $OUT/recipe.log | tail -6
