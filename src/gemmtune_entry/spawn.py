"""Starting a benchmark worker process, without torch: used by ``gemmtune.bench.workers``
(WorkerPool) and by the ``gemmtune`` entry point, which starts a one-shape tune's worker
before it imports torch itself (``prestart``).

Why pre-start: measured on an H100 machine (2026-11-26, benchmarks/results/2026-11-26-h100-cold-start),
a cold ``gemmtune tune --fast`` imported torch and gemmtune for 4-5 s and only then started its
worker, which imported them again and opened a CUDA context for another 3.6-5.2 s before the
first candidate could run. Started first, the worker's start-up runs beside the parent's
import (the GPU machines have the cores for both); WorkerPool adopts it (``Prestarted``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .bytecode import apply_to_env, cache_prefix, torch_origin

# The task handler a worker uses unless told otherwise (module:function); gemmtune.bench
# re-exports it.
DEFAULT_RUNNER = "gemmtune.bench.runner:handle"
# The source tree holding this package and gemmtune: workers must import this very gemmtune,
# also when it runs from a checkout.
SRC = str(Path(__file__).resolve().parents[1])


def _listed_gpus(cuda_visible_devices: str) -> list[str]:
    """The GPU ids a CUDA_VISIBLE_DEVICES value names (none for '' or -1)."""
    return [g for g in cuda_visible_devices.split(",") if g.strip() and g.strip() != "-1"]


def visible_gpus() -> list[str]:
    """GPU ids this process may use, without initialising CUDA in the parent."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return _listed_gpus(env)
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return [line.strip() for line in out.stdout.splitlines() if line.strip()]
    except (OSError, subprocess.SubprocessError):
        return []


def worker_env(gpu: str | None, extra: dict[str, str], base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a worker pinned to ``gpu``: ``base`` (default: this process's),
    then ``extra``, the GPU, unbuffered output and this source tree first on PYTHONPATH; and a
    bytecode cache prefix where Python keeps no bytecode for torch (``gemmtune_entry.bytecode``:
    4.5 s of a worker's start-up against 2.3 s with it, on the H200 machine).

    >>> env = worker_env("1", {"TRITON_INTERPRET": "1"}, base={"PYTHONPATH": "/x"})
    >>> env["CUDA_VISIBLE_DEVICES"], env["TRITON_INTERPRET"], env["PYTHONPATH"] == SRC + os.pathsep + "/x"
    ('1', '1', True)
    """
    env = dict(os.environ if base is None else base)
    env.update(extra)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return apply_to_env(env, cache_prefix(env, torch_origin()))


def spawn_worker(gpu: str | None, runner: str, nice: int, extra_env: dict[str, str],
                 log_path: Path) -> subprocess.Popen:
    """``python -m gemmtune.bench.worker`` pinned to ``gpu``, its stderr into ``log_path``; its
    stdin and stdout are the protocol's pipes (gemmtune.bench.worker)."""
    cmd = [sys.executable, "-m", "gemmtune.bench.worker", "--runner", runner]
    if nice:
        # Through nice(1) where there is one: lowered from its first instruction, so its torch import
        # (2-3 s) does not compete with the benchmark worker's start and the tuner's own; --nice acts
        # only once the worker's imports are done.
        tool = shutil.which("nice")
        cmd = [tool, "-n", str(nice), *cmd] if tool else cmd + ["--nice", str(nice)]
    with open(log_path, "wb") as log:
        return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                env=worker_env(gpu, extra_env),
                                start_new_session=True)  # a hung worker's children die with its group


@dataclass
class Prestarted:
    """A benchmark worker started before the pool that will use it. WorkerPool adopts it when
    it would have started the same worker (same GPU, runner, niceness and extra environment)
    and sets ``adopted``; ``close()`` stops it otherwise."""
    gpu: str | None
    runner: str
    nice: int
    extra_env: dict[str, str]
    proc: subprocess.Popen
    log_path: Path
    _logdir: tempfile.TemporaryDirectory = field(repr=False, default=None)
    adopted: bool = False

    def matches(self, gpu: str | None, runner: str, nice: int, extra_env: dict[str, str]) -> bool:
        return (not self.adopted and self.proc.poll() is None and (self.gpu, self.runner, self.nice)
                == (gpu, runner, nice) and dict(self.extra_env) == dict(extra_env))

    def close(self) -> None:
        """Stop the worker unless a pool adopted it (the pool stops those), and remove its log.
        Killed, not asked: it holds nothing yet, and it may still be importing torch (seconds)
        when a tune ends early, e.g. on bad input."""
        if not self.adopted:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: ptxas children too
                except (ProcessLookupError, PermissionError):
                    self.proc.kill()
                self.proc.wait(timeout=10)
            for f in (self.proc.stdin, self.proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
        if self._logdir is not None:
            self._logdir.cleanup()


# Options of ``tune`` under which its pool is not one default worker per GPU, so that nothing
# is pre-started: the work goes elsewhere (a server, a cluster, this process) or the pool is
# sized by hand.
_NOT_DEFAULT_POOL = ("--server", "--cluster", "--in-process", "--workers", "-h", "--help")


def prestart_gpu(argv: list[str], environ: dict[str, str] | None = None) -> str | None:
    """The GPU whose worker ``gemmtune ARGV`` will start first, when it is worth starting it now:
    a ``tune`` whose pool is the default one, on a machine with an NVIDIA driver, and
    ``GEMMTUNE_PRESTART`` not 0. The first visible GPU: CUDA_VISIBLE_DEVICES's first id, else
    0, nvidia-smi's first index, as ``visible_gpus`` lists them (no nvidia-smi call here).

    >>> prestart_gpu(["tune", "--shape", "8x8x8:fp16"], {"CUDA_VISIBLE_DEVICES": "3,5"})
    '3'
    >>> prestart_gpu(["tune", "--shape", "8x8x8:fp16", "--server=/tmp/s"], {"CUDA_VISIBLE_DEVICES": "3"})
    >>> prestart_gpu(["bench"], {"CUDA_VISIBLE_DEVICES": "0"}), prestart_gpu(["tune"], {"CUDA_VISIBLE_DEVICES": ""})
    (None, None)
    >>> prestart_gpu(["tune"], {"CUDA_VISIBLE_DEVICES": "0", "GEMMTUNE_PRESTART": "0"})
    """
    environ = os.environ if environ is None else environ
    if not argv or argv[0] != "tune" or environ.get("GEMMTUNE_PRESTART", "1") == "0":
        return None
    if any(a.split("=", 1)[0] in _NOT_DEFAULT_POOL for a in argv[1:]):
        return None
    if environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return None  # the CPU interpreter: workers run with a different environment
    cvd = environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:  # the pool's first GPU, as visible_gpus lists it
        ids = _listed_gpus(cvd)
        return ids[0] if ids else None
    return "0" if shutil.which("nvidia-smi") else None


# The niceness of compile workers (gemmtune.tuning.executor.COMPILE_NICE says why; kept equal to it
# by a test): a pre-started one must be the worker the compile pool would start, to be adopted.
COMPILE_NICE = 10
# The default compile pool's upper bound: executor.compile_pool_size's min(cpus, 16), and a cluster host's.
MAX_COMPILE_WORKERS = 16


def usable_cpus() -> int:
    """CPU cores this process may run on: its affinity set where the OS has one (a process
    pinned with taskset, e.g. one collector per GPU), else the machine's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity API on this OS
        return os.cpu_count() or 1


def prestart_compile_count(argv: list[str], environ: dict[str, str] | None = None, cpus: int | None = None) -> int:
    """How many compile workers to start beside the benchmark worker for ``gemmtune ARGV`` (see
    ``prestart_gpu``; 0 where none is pre-started): ``--compile-workers N`` where N > 1, none for a
    single ``--shape`` with ``--fast`` (its few compiles run in the benchmark worker:
    executor.compile_pool_size), else the default pool's bound, min(cpus, 16). The tune's compile
    pool adopts those it would have started and the rest are stopped when it has started.
    ``GEMMTUNE_PRESTART_COMPILE=0`` turns this off.

    Why: the compile pool started once the tune had imported torch and gemmtune, and its
    workers then imported them again: in a 12-shape ``tune --fast`` on an H200 (session 44, worker
    and tuner traces) they were ready 2.7-3.3 s after the pre-started benchmark worker, which
    waited for the first shape's compiles (1.0 s) after timing cuBLAS.

    >>> env = {"CUDA_VISIBLE_DEVICES": "0"}
    >>> prestart_compile_count(["tune", "--preset", "public", "--fast"], env, cpus=32)
    16
    >>> prestart_compile_count(["tune", "--shape", "8x8x8:fp16", "--fast"], env, cpus=32)
    0
    >>> prestart_compile_count(["tune", "--shape", "8x8x8:fp16"], env, cpus=4)
    4
    >>> prestart_compile_count(["tune", "--suite", "s.csv", "--compile-workers", "3"], env, cpus=32)
    3
    >>> prestart_compile_count(["tune", "--suite", "s.csv", "--compile-workers=1"], env, cpus=32)
    0
    >>> prestart_compile_count(["tune", "--suite", "s.csv"], dict(env, GEMMTUNE_PRESTART_COMPILE="0"), cpus=32)
    0
    """
    environ = os.environ if environ is None else environ
    if prestart_gpu(argv, environ) is None or environ.get("GEMMTUNE_PRESTART_COMPILE", "1") == "0":
        return 0
    args = argv[1:]
    for i, a in enumerate(args):
        name, eq, value = a.partition("=")
        if name == "--compile-workers":
            value = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            try:
                n = int(value)
            except ValueError:
                return 0  # the tune reports the bad value
            return n if n > 1 else 0
    shapes = sum(a == "--shape" or a.startswith("--shape=") for a in args)
    if shapes == 1 and "--fast" in args and not any(a.split("=", 1)[0] in ("--suite", "--preset") for a in args):
        return 0
    return min(cpus if cpus is not None else usable_cpus(), MAX_COMPILE_WORKERS)


def _driver_gpus(root: str = "/proc/driver/nvidia/gpus") -> list[str]:
    """GPU ids as ``visible_gpus`` lists them without CUDA_VISIBLE_DEVICES ("0" .. "n-1"), from the
    NVIDIA driver's /proc entries (one a GPU), where there are any: nvidia-smi, which
    ``visible_gpus`` runs, takes 50-100 ms on the critical path of the command's start.

    >>> _driver_gpus("/nonexistent")
    []
    """
    try:
        n = sum(1 for e in os.scandir(root) if e.is_dir())
    except OSError:
        return []
    return [str(i) for i in range(n)]


def _started(gpu: str | None, nice: int, name: str) -> Prestarted | None:
    logdir = tempfile.TemporaryDirectory(prefix="gemmtune-prestart-")
    log_path = Path(logdir.name) / name
    try:
        proc = spawn_worker(gpu, DEFAULT_RUNNER, nice, {}, log_path)
    except OSError:
        logdir.cleanup()
        return None  # the pool starts its own and reports what fails
    return Prestarted(gpu, DEFAULT_RUNNER, nice, {}, proc, log_path, logdir)


def prestart(argv: list[str]) -> list[Prestarted]:
    """Start the benchmark worker that ``gemmtune ARGV`` will use (see ``prestart_gpu``) and its
    compile workers (``prestart_compile_count``), each pinned as the tune's pools would pin them;
    none where nothing is worth starting."""
    gpu = prestart_gpu(argv)
    if gpu is None:
        return []
    first = _started(gpu, 0, "worker.log")
    if first is None:
        return []
    out = [first]
    n = prestart_compile_count(argv)
    if n:
        cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
        gpus = _listed_gpus(cvd) if cvd is not None else _driver_gpus() or visible_gpus()
        for slot in range(n):
            w = _started(gpus[slot % len(gpus)] if gpus else gpu, COMPILE_NICE, f"compile{slot}.log")
            if w is None:
                break
            out.append(w)
    return out


__all__ = ["COMPILE_NICE", "DEFAULT_RUNNER", "MAX_COMPILE_WORKERS", "Prestarted", "prestart", "prestart_compile_count",
           "prestart_gpu", "spawn_worker", "usable_cpus", "visible_gpus", "worker_env"]
