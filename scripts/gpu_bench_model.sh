#!/usr/bin/env bash
# Device call: gemmtune bench-model on HF models (transformers is on the GPU image; MiniLM's
# weights travel in .minilm/, carried: see benchmarks/results/*-bench-model/README.md).
# MODELS, PHASES, MODES, TUNE (python dict literal of tune kwargs) override the defaults; PROFILE=1
# profiles each CUDA-graph mode's kernels.
set -u
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1  # after device_env.sh: keep its carried wheels
python3 - <<PY 2>&1 | tee $OUT/bench-model.log
import ast, os, gemmtune.benchmodel as bm
doc = bm.run(os.environ.get("MODELS", "gpt2,minilm,llama-1b,qwen2-0.5b").split(","),
             phases=os.environ.get("PHASES", ",".join(bm.PHASES)).split(","),
             modes=os.environ.get("MODES", ",".join(bm.MODES)).split(","),
             out_dir=os.environ["OUT"], tune_kwargs=ast.literal_eval(os.environ.get("TUNE", "{'fast': True}")),
             minilm_folder=os.environ.get("MINILM") or (".minilm" if os.path.isdir(".minilm") else None),
             profile=os.environ.get("PROFILE") == "1")
PY
