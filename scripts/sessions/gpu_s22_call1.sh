#!/usr/bin/env bash
# Session 22, call 1 (H200): the public suite's decode, splitk and odd groups with Inductor max-autotune
# (scripts/gpu_s15_suite.sh), on the tree with the shipped pooled H200 ranker (session 21) and the
# spaces without GROUP_M / reduction twins (configs.canonical_group_m, skinny_spec.space): the H200
# figures of #15, #16 (odd against Inductor) and #19 (--fast against max-autotune's time). GPU only;
# carry .whl.
set -u
BENCH_GROUPS=decode,splitk,odd BENCH_S=540 DEADLINE_S=480 bash "$(dirname "$0")/../gpu_s15_suite.sh"
