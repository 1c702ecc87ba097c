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
        cmd += ["--nice", str(nice)]
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


def prestart(argv: list[str]) -> Prestarted | None:
    """Start the benchmark worker that ``gemmtune ARGV`` will use (see ``prestart_gpu``), or None."""
    gpu = prestart_gpu(argv)
    if gpu is None:
        return None
    logdir = tempfile.TemporaryDirectory(prefix="gemmtune-prestart-")
    log_path = Path(logdir.name) / "worker.log"
    try:
        proc = spawn_worker(gpu, DEFAULT_RUNNER, 0, {}, log_path)
    except OSError:
        logdir.cleanup()
        return None  # the pool starts its own and reports what fails
    return Prestarted(gpu, DEFAULT_RUNNER, 0, {}, proc, log_path, logdir)


__all__ = ["DEFAULT_RUNNER", "Prestarted", "prestart", "prestart_gpu", "spawn_worker", "visible_gpus",
           "worker_env"]
