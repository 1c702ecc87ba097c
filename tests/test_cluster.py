"""Tuning on a Dask cluster (gemmtune.cluster) on the CPU: a local cluster of two worker
processes running the Triton interpreter, a tiny suite.

What must hold: the store ends up with the same rows (in kind) as a plain ``tune`` run; a
worker that dies mid-task has its shape re-run and recorded once; a driver killed part-way
leaves what it wrote, and a rerun finishes the rest without duplicating or losing anything;
results from a worker on another device are never written.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed", reason="dask[distributed] is not installed "
                                  "(pip install 'gemmtune[cluster]')")

import dask  # noqa: E402

import gemmtune  # noqa: E402
from gemmtune.cluster import parse_cluster, run_task, tune_cluster  # noqa: E402
from gemmtune.problem import Problem  # noqa: E402
from gemmtune.store import ResultStore  # noqa: E402

SRC = Path(__file__).resolve().parents[1] / "src"
FAMILIES = ["decompose_k"]  # 2-4 candidates per shape (cuBLAS + split counts): seconds in the interpreter
# Odd sizes and both dtypes; 9 candidates in all.
PROBLEMS = [Problem.from_sizes(16, 16, 256, "fp16"), Problem.from_sizes(32, 16, 512, "fp32"),
            Problem.from_sizes(8, 24, 1024, "fp16")]
N_CANDIDATES = 9


def restart_slower_than_lost_worker_timeout():
    """The cluster must keep a nanny that is restarting its dead worker (cluster.NannyCluster):
    SpecCluster closed it ``lost-worker-timeout`` (15 s) after the death when no worker of its
    name was registered then, and a restart took 16.7 s on 2 loaded cores. A 0 s timeout makes
    every restart "slow", so the tests that kill a worker check this on any machine."""
    return dask.config.set({"distributed.deploy.lost-worker-timeout": "0s"})


def _rows(path) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT device_name, capability, problem_key, choice_id, status, device_ms, created_at "
                          "FROM results ORDER BY problem_key, choice_id").fetchall()


def _rows_so_far(path) -> list[tuple]:
    """_rows while the run may still be creating the store: its file exists a moment before
    its table does."""
    try:
        return _rows(path)
    except sqlite3.OperationalError:
        return []


def test_parse_cluster():
    assert parse_cluster("local:4") == ("local", 4)
    assert parse_cluster("tcp://10.1.2.3:8786") == ("address", "tcp://10.1.2.3:8786")
    for bad in ("local:0", "local", "nowhere"):
        with pytest.raises(ValueError, match="cluster"):
            parse_cluster(bad)


def test_cli_rejects_a_bad_address(tmp_path, capsys):
    from gemmtune import cli
    assert cli.main(["tune", "--shape", "16x16x64:fp16", "--cluster", "local:0",
                     "--store", str(tmp_path / "s.sqlite"), "-q"]) == 2
    assert "local:N" in capsys.readouterr().err


def test_cluster_matches_plain_tune_and_resumes(client, tmp_path):
    a, b = tmp_path / "cluster.sqlite", tmp_path / "plain.sqlite"
    r = gemmtune.tune(PROBLEMS, families=FAMILIES, store=a, out=tmp_path / "t.json", cluster=client,
                      progress=False)
    assert (r.measured, r.reused, r.rejected) == (N_CANDIDATES, 0, [])
    # The reference measured in this process (in_process: the same runner, no worker start-up;
    # conftest set TRITON_INTERPRET=1 before gemmtune's import): the rows are compared, not how
    # a plain tune reaches its worker.
    plain = gemmtune.tune(PROBLEMS, families=FAMILIES, store=b, progress=False, in_process=True)
    got, want = _rows(a), _rows(b)
    # Same context, problems, choices and statuses; the timings are the interpreter's, so not compared.
    assert [row[:5] for row in got] == [row[:5] for row in want]
    assert all(row[4] == "ok" for row in got)
    assert [s.best is not None for s in r.shapes] == [True] * len(PROBLEMS)
    assert r.table_path is not None and set(r.table.entries) == {p.key for p in PROBLEMS}
    assert r.context == plain.context

    # Resume: nothing left to measure, nothing rewritten.
    again = gemmtune.tune(PROBLEMS, families=FAMILIES, store=a, cluster=client, progress=False)
    assert (again.measured, again.reused) == (0, N_CANDIDATES)
    assert _rows(a) == got



def test_cluster_reports_what_a_partial_table_covers(client, tmp_path, capsys):
    """As a plain tune does (tuning.tuner.report_coverage): the line naming the shapes the table
    does not cover, and the counts in the result."""
    import triton
    import torch
    from gemmtune.configs import Choice
    from gemmtune.table import LookupTable, TableChoice, provenance

    prov = provenance("cpu (Triton interpreter)", "interp", torch.__version__, triton.__version__,
                      gemmtune.__version__, "by-hand")
    lut = LookupTable(prov, {PROBLEMS[0].key: [TableChoice(Choice.parse("aten"))]})
    r = gemmtune.tune(PROBLEMS, families=FAMILIES, store=tmp_path / "s.sqlite", table=lut, cluster=client)
    assert (f"[gemmtune] the lookup table covers 1 of the 3 shapes; the other 2 have no entry and are tuned in "
            f"full: {PROBLEMS[1].key}, {PROBLEMS[2].key}") in capsys.readouterr().err
    assert (r.table_coverage.covered, r.table_coverage.total) == (1, 3)

def test_worker_killed_mid_task_is_rerun_once(client, tmp_path):
    marker = tmp_path / "killed"
    victim = PROBLEMS[1].key

    def dying(task):  # a nested function: cloudpickle sends it by value to the workers
        if any(p == victim for p, _ in task["items"]) and not marker.exists():
            marker.write_text(str(os.getpid()))
            os._exit(1)  # the Dask worker process dies mid-task, as a lost host would
        return run_task(task)

    store = tmp_path / "s.sqlite"
    with restart_slower_than_lost_worker_timeout():
        r = tune_cluster(PROBLEMS, cluster=client, families=FAMILIES, store=store, progress=False, task_fn=dying)
        assert marker.exists(), "the fault never fired"
        assert (r.measured, r.rejected) == (N_CANDIDATES, [])
        rows = _rows(store)
        assert len(rows) == N_CANDIDATES == len({(row[2], row[3]) for row in rows})
        assert sum(row[2] == victim for row in rows) == 3
        client.wait_for_workers(2, timeout=120)  # its nanny started a fresh worker


def test_results_from_another_device_are_rejected(client, tmp_path):
    victim = PROBLEMS[0].key

    def elsewhere(task):  # the worker reports another device for this task: in its reply and its events
        from gemmtune.cluster import _plugin

        plugin = _plugin(task["plugin"])
        real = plugin.info()
        if any(p == victim for p, _ in task["items"]):
            plugin._info = dict(real, device_name="NVIDIA A100-SXM4-80GB", capability="8.0")
        try:
            return run_task(task)
        finally:
            plugin._info = real

    store = tmp_path / "s.sqlite"
    r = tune_cluster(PROBLEMS, cluster=client, families=FAMILIES, store=store, progress=False, task_fn=elsewhere,
                     retries=1)
    assert len(r.rejected) == 1 and "NVIDIA A100" in r.rejected[0] and victim in r.rejected[0]
    assert {row[2] for row in _rows(store)} == {p.key for p in PROBLEMS[1:]}
    assert r.measured == N_CANDIDATES - 2


DRIVER = """
import sys, time
from pathlib import Path
from gemmtune.cluster import run_task, tune_cluster
from gemmtune.problem import Problem

def held(task, release=sys.argv[3]):  # bound here: on the worker sys.argv is the worker's
    # The largest shape waits until the test lets go (or 30 s): the driver dies meanwhile.
    if any(p.startswith("mm:M8-N24-K1024") for p, _ in task["items"]):
        t = time.monotonic()
        while not Path(release).exists() and time.monotonic() - t < 30:
            time.sleep(0.1)
    return run_task(task)

ps = [Problem.from_sizes(16, 16, 256, "fp16"), Problem.from_sizes(32, 16, 512, "fp32"),
      Problem.from_sizes(8, 24, 1024, "fp16")]
tune_cluster(ps, cluster=sys.argv[1], families=["decompose_k"], store=sys.argv[2], progress=False, task_fn=held)
"""


def test_driver_killed_then_rerun_resumes(client, tmp_path):
    store, release = tmp_path / "s.sqlite", tmp_path / "release"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, client.scheduler.address, str(store), str(release)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            # The two small shapes (5 candidates) are in: kill -9 the driver mid-run.
            if store.exists() and len(_rows_so_far(store)) >= 5:
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[0].decode()[-3000:]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        release.write_text("go")
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    before = _rows(store)
    assert {row[2] for row in before} == {p.key for p in PROBLEMS[:2]}, "the held shape must not be in yet"
    r = tune_cluster(PROBLEMS, cluster=client, families=FAMILIES, store=store, progress=False)
    assert (r.measured, r.reused) == (N_CANDIDATES - len(before), len(before))
    after = _rows(store)
    assert len(after) == N_CANDIDATES == len({(row[2], row[3]) for row in after})
    assert set(before) <= set(after), "a rerun must not rewrite what the killed run recorded"
    with ResultStore(store) as db:
        assert db.count() == N_CANDIDATES


def test_cost_orders_larger_shapes_and_more_candidates_first():
    from gemmtune.cluster import shape_cost
    from gemmtune.device import DeviceInfo
    from gemmtune.model import AnalyticModel

    model = AnalyticModel(DeviceInfo.lookup("h100"))
    big, small = Problem.from_sizes(4096, 4096, 4096, "bf16"), Problem.from_sizes(16, 16, 256, "fp16")
    assert shape_cost(big, 4, model) > shape_cost(small, 4, model) > 0
    assert shape_cost(small, 8, model) == pytest.approx(2 * shape_cost(small, 4, model))


def test_a_worker_dying_while_starting_is_left_out(client, tmp_path, monkeypatch):
    """A worker that dies before its pools answer must not stall the run (its info task is
    pinned to it and would wait forever): it is warned about and left out."""
    from gemmtune.cluster import start_workers, worker_info

    marker = tmp_path / "died"

    def dying(name):
        # Both workers run this at once: an exclusive create lets exactly one of them die
        # (exists() then write_text() let both through in 3 of 12 tries on an idle machine).
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return worker_info(name)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os._exit(1)

    client.wait_for_workers(2, timeout=120)
    # The client's cached scheduler_info as its 2 s periodic refresh leaves it: totals, no
    # workers. start_workers read it to tell the living workers and, now and then, left out
    # a healthy one; it must ask the scheduler instead, whatever the cache holds.
    totals_only = {**client.scheduler_info(), "workers": {}}
    monkeypatch.setattr(client, "scheduler_info", lambda *args, **kwargs: totals_only)
    with restart_slower_than_lost_worker_timeout():
        with pytest.warns(RuntimeWarning, match="died or did not answer"):
            _, ctx, good, info = start_workers(client, info_fn=dying, timeout=61.0)
        assert marker.exists() and len(good) == 1
        assert ctx.device_name == info["device_name"]
        client.wait_for_workers(2, timeout=120)  # its nanny started a fresh worker


def test_collect_says_so_when_its_budget_was_spent_before_the_first_batch(client, tmp_path, capsys, monkeypatch):
    """``--max-minutes`` counts from the process's start (a device call's). From Python, in a
    process older than that (a notebook, a test worker), collect planned no batch and ended with
    exit 0 and not a word; it now names the cause."""
    import importlib

    from gemmtune import cli
    collect_run = importlib.import_module("gemmtune.collect.run")  # (gemmtune.collect.run is also the function)
    monkeypatch.setattr(collect_run, "process_age_s", lambda: 9 * 60.0)
    run = collect_run.run
    argv = ["collect", "--groups", "square", "--limit-shapes", "1", "--dtypes", "fp16", "--mm-sample", "1",
            "--splitk-sample", "0", "--pad-sample", "0", "--new-sample", "0", "--hard-stop-minutes", "0",
            "--no-export", "--out", str(tmp_path / "o"), "--store", str(tmp_path / "s.sqlite")]
    args = cli.build_parser().parse_args(argv)
    args.cluster = client
    assert run(args) == 0
    err = capsys.readouterr().err
    assert "--max-minutes 8 was spent before the first batch" in err and "nothing measured" in err, err


def test_collect_on_the_cluster_records_each_candidate_once_and_resumes(client, tmp_path):
    """``gemmtune collect --cluster``: this process plans and writes, the cluster's workers
    measure; a second run over the same store finds nothing left."""
    import json

    from gemmtune import cli
    from gemmtune.collect import run

    argv = ["collect", "--groups", "square", "--limit-shapes", "2", "--dtypes", "fp16", "--mm-sample", "2",
            "--splitk-sample", "1", "--pad-sample", "1", "--new-sample", "0", "--hard-stop-minutes", "0",
            "--no-export",
            # collect's budget counts from its process's start (a device call's): here an xdist
            # worker that may be many minutes old, where the default 8 planned no batch at all
            # (shapes_done 0 in two loaded CI runs, session 48)
            "--max-minutes", "10000"]
    first, second = tmp_path / "one", tmp_path / "two"
    store = tmp_path / "collect.sqlite"
    args = cli.build_parser().parse_args(argv + ["--out", str(first), "--store", str(store)])
    args.cluster = client  # from Python a Client is taken as it is (the CLI takes an address)
    assert run(args) == 0
    prog = json.loads((first / "collect-progress.json").read_text())
    assert (prog["cluster"], prog["cluster_workers"], prog["shapes_done"]) == ("client", 2, 2)
    rows = _rows(store)
    assert rows and len(rows) == prog["measured_this_call"] == len({(r[2], r[3]) for r in rows})
    assert {r[0] for r in rows} == {prog["context"]["device_name"]} and all(r[4] == "ok" for r in rows)

    args = cli.build_parser().parse_args(argv + ["--out", str(second), "--store", str(store)])
    args.cluster = client
    assert run(args) == 0
    again = json.loads((second / "collect-progress.json").read_text())
    assert (again["batches"], again["measured_this_call"], again["shapes_done"]) == (0, 0, 2)
    assert _rows(store) == rows


def test_collect_cluster_refuses_per_gpu_collectors(tmp_path, capsys):
    from gemmtune import cli
    assert cli.main(["collect", "--cluster", "local:2", "--gpus", "0,1", "--out", str(tmp_path)]) == 2
    assert "--cluster" in capsys.readouterr().err
