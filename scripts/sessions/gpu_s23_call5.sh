#!/usr/bin/env bash
# Session 23, call 5: the public suite's decode, splitk and odd groups with Inductor max-autotune
# (held outputs) and the dispatcher's eager times, on the final tree. GPU only; carry .whl.
set -u
BENCH_GROUPS=decode,splitk,odd BENCH_S=560 DEADLINE_S=500 bash "$(dirname "$0")/../gpu_s15_suite.sh"
