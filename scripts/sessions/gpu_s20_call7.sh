#!/usr/bin/env bash
# Session 20, call 7, the final tree (the H100 ranker retrained on fp32, the one-launch pad pair,
# the wider run-off for short kernels): the public suite's decode, splitk and odd groups with
# Inductor max-autotune (scripts/gpu_s15_suite.sh). GPU only; carry .whl.
set -u
BENCH_GROUPS=decode,splitk,odd BENCH_S=520 DEADLINE_S=470 bash "$(dirname "$0")/../gpu_s15_suite.sh"
