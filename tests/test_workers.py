"""The WorkerPool on its own: every way a task can fail becomes a result, and the pool
goes on with fresh workers. Faults come from the fault-injection runner
(gemmtune.bench.faults), keyed by real choice ids of a tiny fp16 problem, so the
normal tasks run real Triton kernels (in the interpreter on a CPU machine)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
import torch
import triton

import gemmtune
from gemmtune.bench.workers import WorkerPool
from gemmtune.problem import Problem

FAULT_RUNNER = "gemmtune.bench.faults:handle"
PROBLEM = Problem.from_sizes(16, 16, 64, "fp16")
IDS = [c.id for c in gemmtune.space(PROBLEM, "triton_mm", device="h100")]
HAS_CUDA = torch.cuda.is_available()


def _env(faults: dict | None = None) -> dict:
    env = {"GEMMTUNE_FAULTS": json.dumps(faults or {})}
    if not HAS_CUDA:
        env["TRITON_INTERPRET"] = "1"
    return env


def _task(choice: str) -> dict:
    return {"problem": PROBLEM.key, "choice": choice, "seed": 0}


def _pool(n: int = 1, faults: dict | None = None, timeout: float = 4.0, runner: str = FAULT_RUNNER,
          **kw) -> WorkerPool:
    return WorkerPool(n, timeout=timeout, runner=runner, env=_env(faults), **kw)


def _worker_children() -> list[int]:
    """Live (non-zombie) gemmtune worker processes whose parent is this test process."""
    me = os.getpid()
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        # stat: pid (comm) state ppid ... ; comm may hold spaces, so split after ')'.
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == me and state != "Z" and b"gemmtune.bench.worker" in cmd:
            out.append(int(d.name))
    return out


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def test_problem_space_is_big_enough():
    # The fault test below needs 8 distinct real choice ids.
    assert len(IDS) >= 8 and len(set(IDS)) == len(IDS)


# ---------------------------------------------------------------- faults
@pytest.mark.slow
@needs_proc
def test_faults_become_results_and_the_pool_recovers():
    # Faults first, each followed by a normal task that must still succeed on the
    # (possibly replaced) worker. One worker, so results come back in task order.
    faults = {IDS[0]: "abort", IDS[2]: "hang", IDS[4]: "raise", IDS[6]: "wrong"}
    tasks = [_task(c) for c in IDS[:8]]
    seen: list[int] = []
    t0 = time.monotonic()
    with _pool(1, faults, timeout=4.0, gpus=[]) as pool:
        results = list(pool.map(tasks, on_result=lambda i, t, r: seen.append(i)))
        restarts = pool.restarts
        alive = _worker_children()
        assert len(alive) == 1, f"expected exactly one live worker, got {alive}"
    elapsed = time.monotonic() - t0
    assert _worker_children() == [], "close() left worker processes behind"

    assert len(results) == len(tasks)
    assert [t["choice"] for t, _ in results] == [t["choice"] for t in tasks]
    assert seen == list(range(len(tasks)))
    by_id = {t["choice"]: r for t, r in results}

    r = by_id[IDS[0]]
    assert r["status"] == "crashed", r
    assert "SIGABRT" in r["reason"], r

    r = by_id[IDS[2]]
    assert r["status"] == "timeout", r
    assert "4 s" in r["reason"] and "killed" in r["reason"], r

    r = by_id[IDS[4]]
    assert r["status"] == "error", r
    assert "injected fault: this candidate raises" in r["reason"], r

    r = by_id[IDS[6]]
    assert r["status"] == "wrong", r
    assert "error" in r["reason"], r
    assert r["rel_err"] > 1e-2, r           # one element off by 1000 is far outside tolerance
    assert "device_ms" not in r, r          # a wrong result is never timed

    for c in (IDS[1], IDS[3], IDS[5], IDS[7]):
        r = by_id[c]
        assert r["status"] == "ok", (c, r)
        assert r["device_ms"] > 0 and r["eager_ms"] > 0, (c, r)
        assert r["rel_err"] < 1e-2, (c, r)
        assert r["repeats"] >= 1, (c, r)

    assert restarts == 2, f"abort and hang each cost one worker, got {restarts} restarts"
    # The hang costs the timeout once; everything else is interpreter work on tiny tiles.
    assert elapsed < 60, f"fault run took {elapsed:.1f} s"


def test_unknown_fault_and_bad_problem_key_are_errors_not_crashes():
    # The real runner parses the problem key outside its try block; whatever it
    # raises, the worker must turn it into a result and live on.
    with _pool(1, {IDS[0]: "explode"}, gpus=[]) as pool:
        assert list(pool.map([])) == []
        results = list(pool.map([_task(IDS[0]),
                                 {"problem": "mm:garbage", "choice": IDS[1], "seed": 0},
                                 _task(IDS[1])]))
        assert pool.restarts == 0
    (_, unknown), (_, bad), (_, good) = results
    assert unknown["status"] == "error" and "unknown injected fault 'explode'" in unknown["reason"], unknown
    assert bad["status"] == "error" and bad["reason"], bad
    assert good["status"] == "ok", good


def test_pool_needs_a_worker():
    with pytest.raises(ValueError, match="at least one worker"):
        WorkerPool(0, gpus=[])


# ---------------------------------------------------------------- info / start-up
def test_info_reports_device_and_versions():
    with _pool(1, gpus=[]) as pool:
        info = pool.info()
        assert pool.info() == info  # asking twice is fine
    for key in ("device_name", "capability", "torch", "triton", "gemmtune"):
        assert isinstance(info.get(key), str) and info[key], (key, info)
    assert info["torch"] == torch.__version__
    assert info["triton"] == triton.__version__
    assert info["gemmtune"] == gemmtune.__version__
    if not HAS_CUDA:
        assert info["device_name"] == "cpu (Triton interpreter)"
        assert info["capability"] == "interp"
        assert info["representative"] is False
        assert info["interpreter"] is True


@pytest.mark.parametrize("runner, needle", [
    ("gemmtune.nope:handle", "gemmtune.nope"),              # no such module
    pytest.param("gemmtune.bench.faults:nope", "nope", marks=pytest.mark.slow),  # no such function
])
def test_broken_runner_fails_at_startup_with_a_useful_message(runner, needle):
    t0 = time.monotonic()
    with _pool(1, runner=runner, gpus=[]) as pool:
        with pytest.raises(RuntimeError) as ei:
            pool.info()
    msg = str(ei.value)
    assert "start" in msg, msg               # says it is a start-up failure
    assert needle in msg, msg                # and carries the worker's own error
    assert "Error" in msg, msg               # ModuleNotFoundError / AttributeError
    assert time.monotonic() - t0 < 60        # fails fast, not after the start-up timeout


@pytest.mark.slow
def test_broken_runner_does_not_hang_map():
    # Each task meets a worker that dies at start-up: a crash per task, with the reason.
    with _pool(1, runner="gemmtune.nope:handle", gpus=[]) as pool:
        results = list(pool.map([_task(IDS[1]), _task(IDS[3])]))
    assert [r["status"] for _, r in results] == ["crashed", "crashed"], results
    assert all("gemmtune.nope" in r["reason"] for _, r in results), results


# ---------------------------------------------------------------- idle deaths
@pytest.mark.slow
@needs_proc
def test_worker_dying_while_idle_during_map_is_replaced():
    # Two workers: worker 0 hangs; worker 1 finishes its task and is killed while
    # idle. The pool must notice, start a new worker 1, and still time out worker 0.
    with _pool(2, {IDS[0]: "hang"}, timeout=6.0, gpus=[]) as pool:
        gen = pool.map([_task(IDS[0]), _task(IDS[1])])
        task, res = next(gen)
        assert task["choice"] == IDS[1] and res["status"] == "ok", res
        victim = pool.workers[1].proc
        os.kill(victim.pid, signal.SIGKILL)
        rest = list(gen)
        assert [(t["choice"], r["status"]) for t, r in rest] == [(IDS[0], "timeout")], rest
        assert pool.restarts == 2  # the idle death + the hang
        assert pool.workers[1].proc is not victim
        assert victim.poll() is not None
        assert all(w.proc.poll() is None for w in pool.workers)
        # The replacement works.
        again = list(pool.map([_task(IDS[3]), _task(IDS[5])]))
        assert [r["status"] for _, r in again] == ["ok", "ok"], again
    assert _worker_children() == []


@pytest.mark.slow  # ~4 s of worker restarts; the crash tests above keep the pool's recovery in the fast lane
def test_worker_dying_between_maps_does_not_cost_a_task():
    with _pool(1, gpus=[]) as pool:
        pool.info()
        w = pool.workers[0].proc
        os.kill(w.pid, signal.SIGKILL)
        w.wait(timeout=10)
        [(_, r)] = list(pool.map([_task(IDS[1])]))
        assert r["status"] == "ok", r
        assert pool.workers[0].proc.poll() is None


@pytest.mark.slow  # ~4 s of worker restarts, as the test above
def test_info_after_idle_death_replaces_the_worker():
    with _pool(1, gpus=[]) as pool:
        pool.info()
        w = pool.workers[0].proc
        os.kill(w.pid, signal.SIGKILL)
        w.wait(timeout=10)
        assert pool.info()["gemmtune"] == gemmtune.__version__


# ---------------------------------------------------------------- stopping a map, niceness
def test_stop_event_ends_a_map_early_and_the_pool_goes_on():
    import threading

    stop = threading.Event()
    with _pool(1, {IDS[0]: "hang"}, timeout=60.0, gpus=[]) as pool:
        pool.info()
        hung = pool.workers[0].proc
        threading.Timer(0.5, stop.set).start()
        t0 = time.monotonic()
        results = list(pool.map([_task(IDS[0]), _task(IDS[1])], stop=stop))
        assert time.monotonic() - t0 < 10, "the map should end within about a second of the stop"
        assert results == []                 # nothing finished: nothing to report
        assert hung.poll() is not None       # the worker stuck in the task was killed
        [(_, r)] = list(pool.map([_task(IDS[1])]))  # and replaced when the pool is used again
        assert r["status"] == "ok", r
        assert pool.restarts == 1
    assert _worker_children() == []


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="needs os.getpriority")
def test_nice_workers_lower_their_cpu_priority():
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    with _pool(1, gpus=[], nice=5) as pool:
        pool.info()
        assert os.getpriority(os.PRIO_PROCESS, pool.workers[0].proc.pid) == min(mine + 5, 19)


# ----------------------------------------------------------------- pre-started workers
def _prestarted(env: dict, gpu: str | None = None, runner: str = FAULT_RUNNER, tmp_path: Path | None = None,
                nice: int = 0, name: str = "prestarted.log"):
    from gemmtune_entry.spawn import Prestarted, spawn_worker
    log = tmp_path / name
    return Prestarted(gpu, runner, nice, env, spawn_worker(gpu, runner, nice, env, log), log)


def test_a_compile_pool_adopts_the_compile_workers_started_early_and_the_rest_are_stopped(tmp_path):
    """gemmtune_entry.spawn.prestart also starts compile workers (niced as the compile pool's):
    the pool adopts as many as it needs, and release_unadopted stops the others once it has
    started; a benchmark worker (niceness 0) is never a compile pool's."""
    from gemmtune.tuning.executor import COMPILE_NICE
    from gemmtune.tuning.tuner import release_unadopted
    bench = _prestarted(_env(), tmp_path=tmp_path, name="b.log")
    early = [_prestarted(_env(), tmp_path=tmp_path, nice=COMPILE_NICE, name=f"c{i}.log") for i in range(3)]
    with _pool(2, gpus=[], nice=COMPILE_NICE, prestarted=[bench, *early]) as pool:
        pool.start()
        assert [w.adopted for w in early] == [True, True, False] and not bench.adopted
        assert {w.proc.pid for w in pool.workers} == {early[0].proc.pid, early[1].proc.pid}
        assert release_unadopted([bench, *early]) == 2
        assert bench.proc.poll() is not None and early[2].proc.poll() is not None
        results = [res["status"] for _, res in pool.map([_task(IDS[0]), _task(IDS[1])])]
        assert results == ["ok", "ok"]
    assert all(w.proc.poll() is not None for w in early)


def test_compile_nice_is_one_number():
    from gemmtune.tuning import executor
    from gemmtune_entry import spawn
    assert executor.COMPILE_NICE is spawn.COMPILE_NICE and spawn.COMPILE_NICE > 0


def test_pool_adopts_the_worker_it_would_have_started(tmp_path):
    """gemmtune_entry.spawn: a worker started before the pool (same GPU, runner, niceness and
    environment) is the pool's first worker: no second process starts, and it runs tasks."""
    early = _prestarted(_env(), tmp_path=tmp_path)
    with _pool(gpus=[], prestarted=[early]) as pool:
        assert early.adopted and pool.workers[0].proc is early.proc
        (task, res), = list(pool.map([_task(IDS[0])]))
        assert res["status"] == "ok", res
        assert _worker_children() == [early.proc.pid]
    assert early.proc.poll() is not None  # the pool stopped it
    early.close()  # a no-op for an adopted worker


def test_pool_leaves_a_worker_started_for_another_setting(tmp_path):
    """A pre-started worker with another environment (here: other injected faults) is not
    adopted; the pool starts its own, and ``close`` stops the one left over."""
    early = _prestarted(_env({"x": "crash"}), tmp_path=tmp_path)
    with _pool(gpus=[], prestarted=[early]) as pool:
        assert not early.adopted and pool.workers[0].proc is not early.proc
        (task, res), = list(pool.map([_task(IDS[0])]))
        assert res["status"] == "ok", res
    assert early.proc.poll() is None
    early.close()
    assert early.proc.poll() is not None
    assert not _worker_children()


def test_prestart_only_for_a_tune_with_the_default_pool(monkeypatch):
    """What the ``gemmtune`` entry point starts early: a tune's first worker, on the first
    visible GPU, unless the run goes elsewhere or the pool is sized by hand."""
    from gemmtune_entry.spawn import prestart, prestart_gpu
    gpu = {"CUDA_VISIBLE_DEVICES": "2,3"}
    assert prestart_gpu(["tune", "--shape", "8x8x8:fp16"], gpu) == "2"
    for extra in (["--in-process"], ["--workers", "2"], ["--workers=2"], ["--cluster", "local:2"], ["--help"]):
        assert prestart_gpu(["tune", "--shape", "8x8x8:fp16", *extra], gpu) is None, extra
    assert prestart_gpu(["tune"], {**gpu, "TRITON_INTERPRET": "1"}) is None
    assert prestart_gpu(["tune"], {"CUDA_VISIBLE_DEVICES": "-1"}) is None
    monkeypatch.setenv("PATH", "")  # no nvidia-smi: no GPU to start a worker on
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert prestart_gpu(["tune"], {}) is None and prestart(["tune", "--shape", "8x8x8:fp16"]) == []


def test_entry_point_hands_its_early_worker_to_the_tune(tmp_path, monkeypatch):
    """``gemmtune_entry.main``: the worker started before gemmtune is imported reaches the
    tune's pool and measures there (one worker process in all); the tune's results are right."""
    import gemmtune_entry
    from gemmtune_entry import spawn

    seen = []
    real = spawn.prestart

    def early(argv):
        if HAS_CUDA:
            p = real(argv)[0]
        else:  # no GPU to pre-start on: start the interpreter's worker, as the pool would
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
            p = spawn.Prestarted(None, spawn.DEFAULT_RUNNER, 0, {"TRITON_INTERPRET": "1"},
                                 spawn_worker_interp(tmp_path / "w.log"), tmp_path / "w.log")
        seen.append(p)
        return [p]

    def spawn_worker_interp(log):
        return spawn.spawn_worker(None, spawn.DEFAULT_RUNNER, 0, {"TRITON_INTERPRET": "1"}, log)

    monkeypatch.setattr(spawn, "prestart", early)
    monkeypatch.chdir(tmp_path)
    rc = gemmtune_entry.main(["tune", "--shape", "16x16x32:fp16", "--families", "triton_mm,aten", "-q",
                              "--benchmark-space", "1", "--summary", "s.json"])
    assert rc == 0
    assert seen and seen[0] is not None and seen[0].adopted
    assert seen[0].proc.poll() is not None  # stopped with the pool
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["measured"] == 2 and s["shapes"][0]["tried"] == 2 and s["shapes"][0]["failed"] == 0


def test_a_tune_that_fails_early_does_not_wait_for_its_early_worker(tmp_path, monkeypatch):
    """Bad input ends the command at once: the worker started early (still importing torch)
    is killed, not waited for."""
    import gemmtune_entry
    from gemmtune_entry import spawn

    seen = []

    def early(argv):
        env = {"TRITON_INTERPRET": "1"}
        p = spawn.Prestarted(None, spawn.DEFAULT_RUNNER, 0, env,
                             spawn.spawn_worker(None, spawn.DEFAULT_RUNNER, 0, env, tmp_path / "w.log"),
                             tmp_path / "w.log")
        seen.append(p)
        return [p]

    monkeypatch.setattr(spawn, "prestart", early)
    t0 = time.monotonic()
    assert gemmtune_entry.main(["tune", "--shape", "0x8x8:fp16"]) == 2
    assert time.monotonic() - t0 < 2.0  # a worker's torch import alone takes longer
    assert seen[0].proc.poll() is not None and not seen[0].adopted


def test_prewarm_is_skipped_off_the_gpu_and_never_raises(monkeypatch):
    """runner.prewarm: a worker pays Triton's driver start and cache-key hash after its first
    'info' (while the tuner plans). Off the GPU it does nothing; a driver that fails to start
    is left to the first compile to report, never raised here."""
    import sys

    from gemmtune.bench import runner
    tdriver = sys.modules["triton.runtime.driver"]  # the module (triton.runtime.driver is its object)

    class State:
        device = "cpu"
    assert runner.prewarm(State()) == 0.0
    State.device = "cuda"

    class Broken:
        @property
        def active(self):
            raise RuntimeError("0 active drivers")
    monkeypatch.setattr(tdriver, "driver", Broken())
    assert runner.prewarm(State()) >= 0.0
    if HAS_CUDA:
        monkeypatch.undo()
        assert runner.prewarm(State()) >= 0.0


def test_the_callers_current_gpu_comes_first(monkeypatch):
    """A one-worker pool runs on gpus[0]: where the caller works on cuda:1, that is GPU 1's id (a
    model there is tuned there); where CUDA is not initialised in the caller, the order stays."""
    from gemmtune.bench.workers import current_first

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert current_first(["2", "3"]) == ["2", "3"]
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert current_first(["2", "3"]) == ["3", "2"]     # CUDA_VISIBLE_DEVICES=2,3: device 1 is GPU 3
    assert current_first([]) == [] and current_first(["5"]) == ["5"]


def test_worker_trace_records_each_request_with_its_steps(tmp_path):
    """GEMMTUNE_WORKER_TRACE: one JSON line per request (ready, info, each bench with its verify
    and timing steps), for finding where a tune's seconds go inside its workers."""
    env = dict(_env(), GEMMTUNE_WORKER_TRACE=str(tmp_path / "trace"))
    with WorkerPool(1, timeout=30.0, runner="gemmtune.bench.runner:handle", env=env, gpus=[]) as pool:
        pool.info()
        results = [res for _, res in pool.map([_task("aten"), _task(IDS[0])])]
    assert [r["status"] for r in results] == ["ok", "ok"], results
    files = list((tmp_path / "trace").glob("worker-*.jsonl"))
    assert len(files) == 1, files
    lines = [json.loads(x) for x in files[0].read_text().splitlines()]
    assert [x["op"] for x in lines[:2]] == ["ready", "info"]
    bench = [x for x in lines if x["op"] == "bench"]
    assert sorted(x["choice"] for x in bench) == sorted(["aten", IDS[0]])
    for x in bench:
        assert x["problem"] == PROBLEM.key and x["status"] == "ok" and x["s"] > 0
        assert set(x["steps"]) == {"inputs_s", "first_launch_s", "check_s", "timing_s"}, x
        assert sum(x["steps"].values()) <= x["s"] + 1e-3
    assert bench[0]["t0"] <= bench[1]["t0"]


def test_worker_trace_to_an_unwritable_place_warns_and_the_worker_runs(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    env = dict(_env(), GEMMTUNE_WORKER_TRACE=str(blocker / "trace"))
    with WorkerPool(1, timeout=30.0, runner="gemmtune.bench.runner:handle", env=env, gpus=[]) as pool:
        assert [res["status"] for _, res in pool.map([_task("aten")])] == ["ok"]


def test_driver_gpus_count_the_drivers_entries(tmp_path):
    """The entry point pins pre-started compile workers as the pool will (slot i on GPU i mod n)
    without running nvidia-smi: one /proc/driver/nvidia/gpus entry a GPU."""
    from gemmtune_entry.spawn import _driver_gpus
    for bus in ("0000:19:00.0", "0000:3b:00.0"):
        (tmp_path / bus).mkdir()
    (tmp_path / "not-a-gpu").write_text("")
    assert _driver_gpus(str(tmp_path)) == ["0", "1"]
    assert _driver_gpus(str(tmp_path / "missing")) == []
