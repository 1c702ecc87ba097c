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

# $OUT/env.txt (and stdout): date, GPU and driver, and the versions of torch, triton and the
# modules named ("transformers lightgbm ..."; a missing one says so instead of failing).
record_env() {
  { date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 - "$@" <<'PY'
import importlib, sys
out = []
for name in ["torch", "triton", *sys.argv[1:]]:
    try:
        out.append(f"{name} {importlib.import_module(name).__version__}")
    except Exception as e:  # noqa: BLE001 - recorded, not fatal
        out.append(f"{name} missing ({type(e).__name__})")
print(", ".join(out))
PY
  } > "$OUT/env.txt" 2>&1
  cat "$OUT/env.txt"
}

# all-MiniLM-L6-v2 travels in .minilm/ with its weights xz-compressed (the tree's 64 MiB limit):
# unpacked into /tmp/minilm, and MINILM names it for bench-model.
unpack_minilm() {
  if [ -f .minilm/model.safetensors.xz ]; then
    rm -rf /tmp/minilm && cp -r .minilm /tmp/minilm && unxz /tmp/minilm/model.safetensors.xz && export MINILM=/tmp/minilm
  fi
}

# One `gemmtune tune` process, timed whole and traced: `timed_tune I LABEL [VAR=value ...] -- TUNE_ARGS...`
# runs it with those variables in its environment, its store, table, log and trace under /tmp (s$I, t$I,
# l$I, tr$I), and prints "run I LABEL rc=... process wall ... s; <the tune's last line>". (Session 44's
# calls 6 and 9 wrote this loop out; the scripts after them call it.)
timed_tune() {
  local i=$1 label=$2; shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  rm -rf /tmp/tr$i
  local t0 t1 rc
  t0=$(date +%s.%N)
  env "${envs[@]}" GEMMTUNE_WORKER_TRACE=/tmp/tr$i timeout 150 python3 -m gemmtune_entry tune "$@" \
    --store /tmp/s$i.sqlite --out /tmp/t$i.json > /tmp/l$i.log 2>&1
  rc=$?; t1=$(date +%s.%N)
  echo "run $i $label rc=$rc process wall $(python3 -c "print(round($t1-$t0,2))") s; $(tail -1 /tmp/l$i.log)"
}
