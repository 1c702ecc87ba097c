#!/usr/bin/env bash
# Wheels of Dask distributed and its dependencies for the GPU machine (python 3.12, x86_64, no
# package registry), into .whl/ (git-ignored), to carry with the device call (carry=[".whl"]);
# scripts/gpu_cluster.sh installs them into /tmp/site. Run it here, where pip can reach the
# registry. Pure-Python wheels where there are some; cp312 manylinux x86_64 builds otherwise
# (msgpack, psutil, tornado, pyyaml, markupsafe). (importlib_metadata is only needed below 3.12.)
# Every dependency distributed imports is fetched, even those the GPU image may already have
# (jinja2, pyyaml, click, fsspec, ...): --no-deps on the GPU side installs exactly this list.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download --dest .whl --only-binary=:all: --platform manylinux2014_x86_64 \
  --python-version 3.12 --implementation cp --abi cp312 --no-deps \
  "dask>=2024" "distributed>=2024" cloudpickle toolz partd locket fsspec msgpack psutil tornado zict tblib \
  sortedcontainers pyyaml click jinja2 markupsafe urllib3 packaging
ls -1 .whl | grep -Ei 'dask|distributed|cloudpickle|toolz|partd|locket|fsspec|msgpack|psutil|tornado|zict|tblib|sorted|yaml|click|jinja|markupsafe|urllib3|packaging'
