#!/usr/bin/env bash
# Set up gemmtune in ./.venv on a fresh machine.
# Without a GPU this installs torch's CPU build (2.13.0) and runs Triton kernels in the
# interpreter; on a GPU machine whose python already has CUDA torch, use that python:
#   GEMMTUNE_PYTHON=/path/to/python bash scripts/setup.sh   (keeps its torch)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${GEMMTUNE_PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  if [ -n "${GEMMTUNE_PYTHON:-}" ]; then "$PY" -m venv --system-site-packages .venv; else "$PY" -m venv .venv; fi
fi
.venv/bin/python -m pip install -q --upgrade pip
if ! .venv/bin/python -c 'import torch' 2>/dev/null; then
  # Pinned: an open range pulls a multi-GB CUDA build; 2.13.0 is the CPU build.
  .venv/bin/python -m pip install -q torch==2.13.0
fi
.venv/bin/python -m pip install -q -e '.[test,report]'
echo "gemmtune installed in .venv ($(.venv/bin/python -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'))"
