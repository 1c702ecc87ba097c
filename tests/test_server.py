"""The warm worker server (``gemmtune worker --serve``): tune calls served by one pool that was
started before them (no worker start-up per call), crashes contained in the server's workers,
and clear errors when no server is there.

CPU: the Triton interpreter (conftest sets it up); the server runs in a thread of the test
process (it never touches CUDA: its pool's workers are subprocesses).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

import gemmtune
from gemmtune.bench.server import RemotePool, ServerError, serve
from gemmtune.problem import Problem
from gemmtune.store import ResultStore

SRC = Path(__file__).resolve().parents[1] / "src"
FAULT_RUNNER = "gemmtune.bench.faults:handle"


@pytest.fixture
def server(request):
    """A served pool on a short socket path (Unix sockets allow ~100 characters)."""
    runner, env = getattr(request, "param", ("gemmtune.bench.runner:handle", None))
    d = tempfile.mkdtemp(prefix="gt-")
    sock = os.path.join(d, "s.sock")
    stop, up = threading.Event(), threading.Event()
    infos = []
    t = threading.Thread(target=serve, args=(sock,), daemon=True,
                         kwargs=dict(runner=runner, env=env, stop=stop, timeout=30,
                                     ready=lambda info: (infos.append(info), up.set())))
    t.start()
    assert up.wait(120), "the server's worker did not start"
    yield sock
    stop.set()
    t.join(10)
    assert not os.path.exists(sock) and not os.path.exists(sock + ".key"), "the server cleans up after itself"


def _tune(sock, store, problem, **kw):
    return gemmtune.tune([problem], families=["triton_mm"], store=store, progress=False, server=sock, **kw)


def test_tune_calls_share_one_warm_pool(server, tmp_path):
    p1 = Problem.from_sizes(16, 16, 32, "fp16")
    p2 = Problem.from_sizes(24, 16, 32, "fp32")
    r1 = _tune(server, tmp_path / "a.sqlite", p1)
    r2 = _tune(server, tmp_path / "b.sqlite", p2)
    for r, p in ((r1, p1), (r2, p2)):
        [s] = r.shapes
        assert s.best is not None and s.failed == 0 and s.tried >= 2
    with RemotePool(server) as pool:
        stats = pool.stats()
    assert stats["workers_started"] == 1 and stats["restarts"] == 0  # no worker started per call
    with ResultStore(tmp_path / "a.sqlite") as db:
        rows = [row for _, row in db.rows(problem_key=p1.key)]
    assert rows and all(row.status == "ok" and row.device_ms > 0 for row in rows)


def _faulty():
    p = Problem.from_sizes(16, 16, 64, "fp16")
    victim = [c.id for c in gemmtune.space(p, "triton_mm", device="h100")][0]
    return p, victim


@pytest.mark.parametrize("server", [(FAULT_RUNNER, {"GEMMTUNE_FAULTS": json.dumps({_faulty()[1]: "abort"})})],
                         indirect=True)
def test_a_crashing_candidate_costs_only_itself(server, tmp_path):
    p, victim = _faulty()
    r = _tune(server, tmp_path / "c.sqlite", p, timeout=20)
    [s] = r.shapes
    assert s.statuses.get("crashed") == 1 and s.best is not None and s.best != victim
    with ResultStore(tmp_path / "c.sqlite") as db:
        rows = {row.choice_id: row for _, row in db.rows(problem_key=p.key)}
    assert rows[victim].status == "crashed" and "SIGABRT" in rows[victim].reason
    # The server replaced its worker and serves the next call.
    r2 = _tune(server, tmp_path / "d.sqlite", Problem.from_sizes(16, 32, 32, "fp16"))
    assert r2.shapes[0].best is not None
    with RemotePool(server) as pool:
        assert pool.stats()["restarts"] >= 1


def test_no_server_is_a_clear_error(tmp_path):
    missing = str(tmp_path / "none.sock")
    with pytest.raises(ServerError, match="no gemmtune worker server at .*gemmtune worker --serve"):
        _tune(missing, tmp_path / "e.sqlite", Problem.from_sizes(16, 16, 32, "fp16"))
    env = dict(os.environ, PYTHONPATH=str(SRC))
    cp = subprocess.run([sys.executable, "-m", "gemmtune.cli", "tune", "--shape", "16x16x32:fp16",
                         "--families", "aten", "--store", str(tmp_path / "f.sqlite"), "--server", missing, "-q"],
                        capture_output=True, text=True, env=env, timeout=120)
    assert cp.returncode == 2 and cp.stderr.strip().count("\n") == 0 and "no gemmtune worker server" in cp.stderr
    cp = subprocess.run([sys.executable, "-m", "gemmtune.cli", "worker"], capture_output=True, text=True,
                        env=env, timeout=60)
    assert cp.returncode == 2 and "--serve" in cp.stderr


def test_a_socket_in_use_is_refused(tmp_path):
    sock = tmp_path / "busy.sock"
    sock.write_text("")
    with pytest.raises(ServerError, match="exists"):
        serve(sock)


# --- the gemmtune command forwarding tune --server to the server (gemmtune_entry) ---

def _entry(cwd, argv, env_extra=None):
    """``gemmtune ARGV`` through gemmtune_entry in a fresh process in ``cwd``; its stdout ends with
    whether torch was imported there."""
    code = ("import sys, gemmtune_entry; rc = gemmtune_entry.main(sys.argv[1:]); "
            "print('TORCH_IMPORTED', 'torch' in sys.modules); sys.exit(rc)")
    env = dict(os.environ, PYTHONPATH=str(SRC), **(env_extra or {}))
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_forwarded_tune_runs_in_the_server_without_importing_torch(server, tmp_path):
    argv = ["tune", "--shape", "16x16x32:fp16", "--families", "triton_mm,aten", "--server", server,
            "--store", "s.sqlite", "--out", "t.json"]
    cp = _entry(tmp_path, argv)
    assert cp.returncode == 0, cp.stderr
    assert "TORCH_IMPORTED False" in cp.stdout  # the client never imported torch (nor gemmtune)
    assert "best choice" in cp.stdout and "16x16x32" in cp.stdout  # the server's output, streamed back
    # Relative paths are the client's: the store and the table are in its working directory.
    assert (tmp_path / "s.sqlite").exists() and json.loads((tmp_path / "t.json").read_text())["entries"]
    with ResultStore(tmp_path / "s.sqlite") as db:
        rows = [row for _, row in db.rows(problem_key=Problem.from_sizes(16, 16, 32, "fp16").key)]
    assert rows and all(row.status == "ok" for row in rows)
    with RemotePool(server) as pool:
        assert pool.stats()["workers_started"] == 1  # the server's own pool ran it: no worker started
    # Forwarding off: the same command runs here (importing torch), against the same server.
    cp = _entry(tmp_path, argv[:2] + ["24x16x32:fp16"] + argv[3:], {"GEMMTUNE_FORWARD": "0"})
    assert cp.returncode == 0, cp.stderr
    assert "TORCH_IMPORTED True" in cp.stdout


def test_gemmtune_server_in_the_environment_forwards_a_tune_that_names_no_server(server, tmp_path):
    argv = ["tune", "--shape", "16x24x32:fp16", "--families", "aten", "--store", "s.sqlite", "-q"]
    cp = _entry(tmp_path, argv, {"GEMMTUNE_SERVER": server})
    assert cp.returncode == 0, cp.stderr
    assert "TORCH_IMPORTED False" in cp.stdout and "no worker server" not in cp.stderr
    with ResultStore(tmp_path / "s.sqlite") as db:
        assert [row for _, row in db.rows(problem_key=Problem.from_sizes(16, 24, 32, "fp16").key)]
    # --in-process is a local request: it runs here even with the variable set.
    cp = _entry(tmp_path, argv + ["--in-process"], {"GEMMTUNE_SERVER": server, "TRITON_INTERPRET": "1"})
    assert cp.returncode == 0, cp.stderr
    assert "TORCH_IMPORTED True" in cp.stdout


def test_gemmtune_server_that_does_not_answer_leaves_the_tune_here_with_a_note(tmp_path):
    missing = str(tmp_path / "none.sock")
    cp = _entry(tmp_path, ["tune", "--shape", "8x8x16:fp16", "--families", "aten", "--store", "s.sqlite", "-q"],
                {"GEMMTUNE_SERVER": missing, "TRITON_INTERPRET": "1"})
    assert cp.returncode == 0, cp.stderr
    assert f"GEMMTUNE_SERVER={missing}: no worker server answers there; tuning in this process" in cp.stderr
    assert "TORCH_IMPORTED True" in cp.stdout and (tmp_path / "s.sqlite").exists()


def test_forwarded_bad_input_is_one_line_and_the_server_stays_up(server, tmp_path):
    cp = _entry(tmp_path, ["tune", "--shape", "24x16:fp16", "--server", server])
    assert cp.returncode == 2
    assert "bad shape '24x16:fp16'" in cp.stderr and "Traceback" not in cp.stderr
    cp = _entry(tmp_path, ["tune", "--shape", "8x8x16:fp16", "--families", "aten", "--server", server, "-q"])
    assert cp.returncode == 0, cp.stderr


def test_the_server_runs_only_tune(server, tmp_path):
    from multiprocessing.connection import Client
    with Client(server, family="AF_UNIX", authkey=Path(server + ".key").read_bytes()) as conn:
        conn.send(("cli", ["demo"], str(tmp_path)))
        got = [conn.recv(), conn.recv()]
    assert got[0][0] == "err" and "only tune" in got[0][1] and got[1] == ("exit", 2)


def test_forward_gives_way_to_the_full_command_where_the_server_cannot_take_it(tmp_path):
    """No server there, or one from before forwarding (it answers 'unknown request'): forward
    returns None, and main runs the command itself, whose error names the missing server."""
    import gemmtune_entry
    from multiprocessing.connection import Listener
    assert gemmtune_entry.forward(str(tmp_path / "none.sock"), ["tune"]) is None
    sock = os.path.join(tempfile.mkdtemp(prefix="gt-"), "old.sock")
    key = b"k" * 32
    Path(sock + ".key").write_bytes(key)
    with Listener(sock, family="AF_UNIX", authkey=key) as listener:
        def old_server():
            with listener.accept() as conn:
                req = conn.recv()
                conn.send(("error", f"unknown request {req!r}"))
        t = threading.Thread(target=old_server, daemon=True)
        t.start()
        assert gemmtune_entry.forward(sock, ["tune", "--server", sock]) is None
        t.join(10)


def test_which_commands_are_forwarded(monkeypatch):
    from gemmtune_entry import server_of
    assert server_of(["tune", "--shape", "8x8x8:fp16", "--server", "/tmp/s"]) == "/tmp/s"
    assert server_of(["tune", "--server=/tmp/s"]) == "/tmp/s"
    assert server_of(["tune", "--shape", "8x8x8:fp16"]) is None  # no server: the local path
    assert server_of(["tune", "--server", "/tmp/s", "--help"]) is None  # help is the local parser's
    assert server_of(["worker", "--serve", "/tmp/s"]) is None and server_of([]) is None
    monkeypatch.setenv("GEMMTUNE_FORWARD", "0")
    assert server_of(["tune", "--server", "/tmp/s"]) is None
    from gemmtune_entry import env_server
    monkeypatch.setenv("GEMMTUNE_SERVER", "/tmp/e")
    assert env_server(["tune", "--shape", "8x8x8:fp16"]) is None  # forwarding off
    monkeypatch.delenv("GEMMTUNE_FORWARD")
    assert env_server(["tune", "--shape", "8x8x8:fp16"]) == "/tmp/e"
    assert env_server(["tune", "--server", "/tmp/s"]) is None  # the command's own server wins
    assert env_server(["tune", "--cluster=local:2"]) is None and env_server(["tune", "-h"]) is None
    assert env_server(["bench", "--preset", "smoke"]) is None


def test_kill_stops_the_server_and_removes_its_socket(tmp_path):
    """SIGTERM (kill; a shell script's background job ignores SIGINT) stops `gemmtune worker --serve`
    as Ctrl-C does: exit 0, the socket and its key file removed."""
    import signal
    import time
    sock = os.path.join(tempfile.mkdtemp(prefix="gt-"), "k.sock")
    env = dict(os.environ, PYTHONPATH=str(SRC), TRITON_INTERPRET="1")
    proc = subprocess.Popen([sys.executable, "-m", "gemmtune.cli", "worker", "--serve", sock], env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(sock) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert os.path.exists(sock), proc.stderr.read() if proc.poll() is not None else "no socket"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not os.path.exists(sock) and not os.path.exists(sock + ".key")


@pytest.mark.parametrize("fast_exit", ["1", "0"])
def test_entry_run_leaves_a_tune_with_everything_written(tmp_path, fast_exit):
    """``python -m gemmtune_entry tune ...`` (what the console script runs) exits straight after
    a tune (GEMMTUNE_FAST_EXIT, on by default): its exit status, store, table and summary must be
    those of the full exit; a failed tune still fails."""
    import sqlite3

    env = dict(os.environ, TRITON_INTERPRET="1", GEMMTUNE_FAST_EXIT=fast_exit, GEMMTUNE_PRESTART="0")
    args = [sys.executable, "-m", "gemmtune_entry", "tune", "--shape", "8x8x8:float16", "--families", "aten",
            "--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "t.json"), "-q",
            "--summary", str(tmp_path / "sum.json")]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "gemmtune tune on" in done.stdout  # the summary table, flushed before the exit
    assert len(json.loads((tmp_path / "sum.json").read_text())["shapes"]) == 1
    entries = json.loads((tmp_path / "t.json").read_text())["entries"]
    assert [e["key"] for e in entries] == ["mm:M8-N8-K8:fp16->fp16:row.a/row.a"]
    with sqlite3.connect(tmp_path / "s.sqlite") as db:
        assert db.execute("select count(*) from results").fetchone()[0] == 1
    bad = subprocess.run(args[:5] + ["8x8:float16"], env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "8x8" in bad.stderr


def test_the_server_warms_its_workers_before_the_first_client(tmp_path, monkeypatch):
    """Before its first client, a server has each worker pay its first-use costs (op 'warm':
    measure.warm, skipped off the GPU with its reason) and reports it in ``info``; the planning is
    warmed by ``tuner.warm_plan``. GEMMTUNE_SERVER_WARMUP=0 sends no warm task."""
    from gemmtune.bench import server as srv
    from gemmtune.tuning.tuner import warm_plan

    d = tempfile.mkdtemp(prefix="gt-")
    sock = os.path.join(d, "s.sock")
    stop, up, infos = threading.Event(), threading.Event(), []
    t = threading.Thread(target=serve, args=(sock,), daemon=True,
                         kwargs=dict(stop=stop, timeout=30, ready=lambda info: (infos.append(info), up.set())))
    t.start()
    assert up.wait(120), "the server's worker did not start"
    stop.set()
    t.join(10)
    [info] = infos
    assert info["warm"] == [{"status": "skipped", "reason": "not on a GPU"}]  # one worker, CPU
    assert warm_plan(info, srv.WARM_SIZES) > 0

    class Pool:
        n, ops = 2, []

        def map(self, tasks, op):
            self.ops.append((op, list(tasks)))
            return [(task, {"status": "ok", "s": 0.1}) for task in self.ops[-1][1]]

    pool = Pool()
    assert srv.warm_workers(pool) == [{"status": "ok", "s": 0.1}] * 2
    [(op, tasks)] = pool.ops
    assert op == "warm" and [t["problem"] for t in tasks] == [Problem.from_sizes(*srv.WARM_SIZES).key] * 2
    monkeypatch.setenv("GEMMTUNE_SERVER_WARMUP", "0")
    assert srv.warm_workers(pool) == [] and len(pool.ops) == 1


def test_a_worker_rejects_an_unknown_op_and_warms_only_on_a_gpu():
    from gemmtune.bench.runner import WorkerState, handle

    state = WorkerState()
    key = Problem.from_sizes(64, 64, 64, "fp16").key
    assert handle("warm", {"problem": key}, state) == {"status": "skipped", "reason": "not on a GPU"}
    res = handle("nonsense", {"problem": key}, state)
    assert res["status"] == "error" and "unknown op 'nonsense'" in res["reason"] and "'warm'" in res["reason"]


def test_a_client_that_comes_during_the_warm_up_waits_for_it(monkeypatch):
    """The socket opens before the warm-up: a client connecting meanwhile is answered once the
    server is warm, instead of finding no server there."""
    import time

    from gemmtune.bench import server as srv

    warming = threading.Event()

    def slow_warm(pool):
        warming.set()
        time.sleep(1.5)
        return []

    monkeypatch.setattr(srv, "warm_workers", slow_warm)
    d = tempfile.mkdtemp(prefix="gt-")
    sock = os.path.join(d, "s.sock")
    stop, readied = threading.Event(), []
    t = threading.Thread(target=serve, args=(sock,), daemon=True,
                         kwargs=dict(stop=stop, timeout=30, ready=lambda info: readied.append(time.monotonic())))
    t.start()
    try:
        assert warming.wait(120), "the server's worker did not start"
        assert os.path.exists(sock)  # open while it warms up
        with RemotePool(sock) as pool:
            info = pool.info()
        answered = time.monotonic()
        assert info["device_name"] and readied and readied[0] <= answered
    finally:
        stop.set()
        t.join(10)
