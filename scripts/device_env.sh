# Sourced by the device scripts (gpu_run.sh, gpu_cluster.sh, gpu_cluster_collect.sh): from the
# repository root, $OUT made, the wheels carried in .whl/ (if any) installed into /tmp/site (the
# GPU machine reaches no package registry), and this source tree first on PYTHONPATH.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
