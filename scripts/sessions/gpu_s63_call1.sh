#!/usr/bin/env bash
# Prepared in session 62 (which had 98 s of device time: no call), for the next session's first call (GPU only;
# no carry; ~9.5 min). #17's open rows after session 61's retire: "eager + patch never slower than eager" was
# re-measured on Llama-1B and GPT-2 only. 1) the -m gpu tests of retire, the host path and the gate; 2) bench-model,
# un-graphed eager modes paired against the unpatched deep copy (31 rounds) on the two models not re-measured,
# Qwen2-0.5B (prefill and decode) and MiniLM's
# sizes (embed_64; benchmarks/models/minilm-l6-sizes.json with random weights: its real weights do not fit the 64 MiB tree); 3) GPT-2 decode b16, where session 61 call 3b's gate kept
# one layer's tuned path on a 1.24 ms step gain that its own timing could not explain: eager_gate.SLACK (2x the
# layers' own savings) now refuses such a gain; the report's gate line says "implausible" where it did.
set -u
source "$(dirname "$0")/../device_env.sh"
record_env transformers
T0=$(date +%s)
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_retire.py tests/test_eager_gate.py \
  tests/test_nn_hot_shape.py tests/test_nn_host_path.py > $OUT/pytest_gpu.log 2>&1
echo "pytest -m gpu rc=$? t=$(( $(date +%s) - T0 )) s"; tail -4 $OUT/pytest_gpu.log
run_bm() {  # tag entry phases modes seconds
  local tag=$1; shift
  timeout $4 python3 -m gemmtune.cli bench-model --models $1 --dtype bfloat16 \
    --phases $2 --modes $3 --eager-rounds 31 --out $OUT/bm-$tag > $OUT/bm-$tag.log 2>&1
  echo "bench-model $1 rc=$? t=$(( $(date +%s) - T0 )) s"
  set -- $tag
  grep -E "Step gate|Given back|interleaved|implausible" $OUT/bm-$1/bench-model.md | cut -c1-1200
  grep -E "eager paths|given back|first calls|retired" $OUT/bm-$1.log | cut -c1-300
  tar czf $OUT/bm-$1.tgz -C $OUT bm-$1 bm-$1.log && rm -rf $OUT/bm-$1 $OUT/bm-$1.log
}
run_bm qwen2-0.5b qwen2-0.5b prefill_b1_s512,decode_b1,decode_b16 eager,eager_copy,eager_patch 240
run_bm minilm-sizes config:benchmarks/models/minilm-l6-sizes.json embed_64 eager,eager_copy,eager_patch 120
LEFT=$(( 560 - $(date +%s) + T0 ))
[ $LEFT -ge 90 ] && run_bm gpt2 gpt2 decode_b16 eager,eager_copy,eager_patch $LEFT
echo "call took $(( $(date +%s) - T0 )) s"
