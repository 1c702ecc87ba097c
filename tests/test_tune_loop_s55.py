"""Tuning-loop hunt, session 55: the worker pool's reading of its workers' pipes, and the progress
lines of a run whose output is not a terminal. Each test failed before its fix."""

from __future__ import annotations

import io
import sys

import pytest

from gemmtune.bench import workers
from gemmtune.bench.workers import WorkerPool
from gemmtune.problem import Problem

PROBLEM = Problem.from_sizes(8, 8, 64, "fp16")


def _task(choice: str) -> dict:
    return {"problem": PROBLEM.key, "choice": choice, "seed": 0}


def _env(path) -> dict:
    # The directory goes on the workers' PYTHONPATH (after gemmtune's own source).
    return {"TRITON_INTERPRET": "1", "PYTHONPATH": str(path)}


# ------------------------------------------------------------ output before the worker is ready
@pytest.fixture
def noisy_site(tmp_path):
    """A site hook that prints to stdout while the worker starts, before it moves its own output
    to stderr (the worker imports gemmtune and torch first): a bare number, then a banner."""
    (tmp_path / "sitecustomize.py").write_text('print(42)\nprint("banner: hello from a site hook")\n')
    return tmp_path


def test_start_up_output_on_the_workers_stdout_is_not_taken_for_the_first_result(noisy_site):
    """The first line was filed as the first task's result: a bare number failed the map with
    AttributeError, a banner became 'error: garbled worker reply' and the real result was dropped."""
    with WorkerPool(1, timeout=120, env=_env(noisy_site), gpus=[]) as pool:
        (task, res), = list(pool.map([_task("aten")]))
    assert task["choice"] == "aten"
    assert res["status"] == "ok" and res["device_ms"] > 0, res


def test_start_up_output_on_the_workers_stdout_is_not_taken_for_its_device_report(noisy_site):
    """info() returned the first line as the device report: the tuner then failed on it."""
    with WorkerPool(1, timeout=120, env=_env(noisy_site), gpus=[]) as pool:
        info = pool.info()
    assert info.get("device_name") == "cpu (Triton interpreter)", info


# ------------------------------------------------------------ a pipe that closes before the exit
LINGER_RUNNER = '''
import os, stat, time
from gemmtune.bench import runner

def handle(op, task, state):
    if task.get("choice") == "aten":
        # Close the reply pipe (the one FIFO besides stdin) and live on: a worker whose teardown
        # (a GPU context after a fault) outlasts its pipe.
        for fd in os.listdir("/proc/self/fd"):
            try:
                if int(fd) > 2 and stat.S_ISFIFO(os.fstat(int(fd)).st_mode):
                    os.close(int(fd))
            except OSError:
                pass
        time.sleep(600)
    return runner.handle(op, task, state)
'''


def test_a_worker_that_closes_its_pipe_and_lingers_is_a_crash_not_a_failed_tune(tmp_path, monkeypatch):
    """The pool waited 10 s for the worker to exit and let subprocess.TimeoutExpired out of the map:
    the whole tune failed. Now the candidate is a crash, the worker is killed and replaced, and the
    next candidate is measured."""
    (tmp_path / "linger_runner.py").write_text(LINGER_RUNNER)
    monkeypatch.setattr(workers, "EXIT_WAIT_S", 1.0, raising=False)
    with WorkerPool(1, timeout=120, env=_env(tmp_path), gpus=[], runner="linger_runner:handle") as pool:
        results = {t["choice"]: r for t, r in pool.map([_task("aten"), _task("decompose_k:s2")])}
        assert pool.restarts == 1
    assert results["aten"]["status"] == "crashed", results["aten"]
    assert "closed its reply pipe" in results["aten"]["reason"], results["aten"]
    assert results["decompose_k:s2"]["status"] == "ok", results["decompose_k:s2"]


# ------------------------------------------------------------ the worker's warm-up and the first timeout
SLOW_WARM_RUNNER = '''
import time
from gemmtune.bench import runner

_prewarm = runner.prewarm

def _slow_prewarm(state):
    time.sleep(WARM_S)  # a cold Triton driver start / cache hash on a busy host
    return _prewarm(state)

runner.prewarm = _slow_prewarm  # what the worker calls as its warm-up

def handle(op, task, state):
    return runner.handle(op, task, state)
'''


@pytest.mark.parametrize("info_first", [True, False], ids=["after-info", "no-info"])
def test_the_workers_warm_up_is_not_on_the_first_candidates_clock(tmp_path, info_first):
    """The task's clock started when the worker said ready, and it warmed up (runner.prewarm) after
    that, after its first 'info' (the tuner's order), with the first candidate already sent: a warm-up
    longer than the timeout killed a fast first candidate as a timeout. Now the worker says warm once
    it has warmed up (before its first task where no 'info' came first) and the clock starts there."""
    (tmp_path / "slow_warm_runner.py").write_text(SLOW_WARM_RUNNER.replace("WARM_S", "6.0"))
    with WorkerPool(1, timeout=3.0, env=_env(tmp_path), gpus=[], runner="slow_warm_runner:handle") as pool:
        if info_first:
            assert pool.info().get("device_name") == "cpu (Triton interpreter)"
        results = [res for _, res in pool.map([_task("aten"), _task("decompose_k:s2")])]
        assert [r["status"] for r in results] == ["ok", "ok"], results
        assert pool.restarts == 0


def test_a_worker_that_never_finishes_warming_up_is_a_timeout_within_its_start_up_allowance(tmp_path):
    (tmp_path / "slow_warm_runner.py").write_text(SLOW_WARM_RUNNER.replace("WARM_S", "600.0"))
    with WorkerPool(1, timeout=1.0, startup_timeout=20.0, env=_env(tmp_path), gpus=[],
                    runner="slow_warm_runner:handle") as pool:
        (_, res), = list(pool.map([_task("aten")]))
    assert res["status"] == "timeout" and "never finished warming up" in res["reason"], res


# ------------------------------------------------------------ progress lines off a terminal
def test_a_shapes_eta_comes_from_its_own_rate_not_the_runs_elapsed_time(monkeypatch):
    """A shape started 1000 s into a run, one of its 10 candidates done 10 s later: the ETA was the
    run's 1010 s x 9 = 9090 s; it is 90 s."""
    from gemmtune.tuning import progress

    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    buf = io.StringIO()
    with progress.Progress(True, stream=buf, every_s=0.0, tty=False) as bar:
        clock[0] = 1000.0
        t = bar.task("  late_shape", 10)
        clock[0] = 1010.0
        bar.advance(t)
    last = buf.getvalue().splitlines()[-1]
    assert last == "[gemmtune]   late_shape: 1/10 (1010 s elapsed, ETA 90 s)", last


def test_progress_without_any_stderr_runs_silently(monkeypatch):
    """sys.stderr is None under pythonw or a daemon started without one: Progress called
    None.isatty() and the tune failed before its first candidate."""
    from gemmtune.tuning.progress import Progress
    monkeypatch.setattr(sys, "stderr", None)
    with Progress(True) as prog:
        t = prog.task("shape", 2)
        prog.advance(t)
        prog.advance(t)
    assert not prog.enabled and not prog.tty
