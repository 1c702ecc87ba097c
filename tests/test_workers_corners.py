"""Worker-pool and server corners found by session 45's CPU hunt and after it (hangs, lost or wrong
results, a server stopped or held by one client, workers left running). Each test failed before its fix."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest

from gemmtune.bench.server import RemotePool, serve
from gemmtune.bench.workers import WorkerPool

# A runner that sleeps task["sleep"] seconds and echoes task["tag"]: which task a result is
# really for. Written to a temporary folder that the workers get on their PYTHONPATH.
ECHO = '''
import os, time
def handle(op, task, state):
    time.sleep(float(task.get("sleep", 0)))
    return {"status": "ok", "tag": task.get("tag"), "pid": os.getpid()}
'''


def _echo_env(d: Path) -> dict:
    (d / "h7_echo_runner.py").write_text(ECHO)
    return {"PYTHONPATH": str(d), "TRITON_INTERPRET": "1"}


def _still_serving(s, said: str = "") -> None:
    """The server thread is up with no error, and a new client is answered."""
    assert s.error is None and s.thread.is_alive(), f"the server stopped: {s.error!r}{said}"
    with RemotePool(s.sock, timeout=30) as pool:
        assert pool.info()


@pytest.mark.slow
def test_a_map_left_mid_run_does_not_hand_its_result_to_the_next_map(tmp_path):
    """A map abandoned while another worker still runs a task (a consumer that stops early: the
    server's client gone mid-map) leaves that worker's task_index set; the next map then gives the
    old task's result to its own task 0 and loses task 0's real result."""
    with WorkerPool(2, timeout=30, runner="h7_echo_runner:handle", env=_echo_env(tmp_path), gpus=[]) as pool:
        pool.info()
        gen = pool.map([{"tag": "A", "sleep": 2}, {"tag": "B", "sleep": 0}])
        task, res = next(gen)
        assert res["tag"] == "B"
        gen.close()  # A still runs in worker 0
        out = list(pool.map([{"tag": "C", "sleep": 4}, {"tag": "D", "sleep": 0}]))
        pairs = sorted((t["tag"], r.get("tag")) for t, r in out)
        assert pairs == [("C", "C"), ("D", "D")], pairs


@pytest.mark.slow
def test_a_client_gone_mid_map_does_not_give_the_next_client_its_results(tmp_path):
    """The same through the warm server (``worker --serve --workers 2``): a client that goes away
    mid-map (Ctrl-C, a killed process) leaves its other task running in the server's pool; the next
    client receives that task's result as its own candidate's (a wrong time in its store)."""
    env = _echo_env(tmp_path)
    d = tempfile.mkdtemp(prefix="gt-h7-")
    sock = os.path.join(d, "s.sock")
    stop, up = threading.Event(), threading.Event()
    t = threading.Thread(target=serve, args=(sock,), daemon=True,
                         kwargs=dict(workers=2, runner="h7_echo_runner:handle", env=env, stop=stop, timeout=30,
                                     ready=lambda info: up.set()))
    os.environ["GEMMTUNE_SERVER_WARMUP"] = "0"
    try:
        t.start()
        assert up.wait(120), "the server's workers did not start"
        first = RemotePool(sock, timeout=30).start()
        gen = first.map([{"tag": "A", "sleep": 3}, {"tag": "B", "sleep": 0}, {"tag": "E", "sleep": 1}])
        task, res = next(gen)
        assert res["tag"] == "B"
        first.close()  # gone: the server's send of E's result fails while A still runs
        time.sleep(1.5)
        with RemotePool(sock, timeout=30) as second:
            out = list(second.map([{"tag": "C", "sleep": 4}, {"tag": "D", "sleep": 0}]))
        pairs = sorted((t["tag"], r.get("tag")) for t, r in out)
        assert pairs == [("C", "C"), ("D", "D")], pairs
    finally:
        import shutil

        os.environ.pop("GEMMTUNE_SERVER_WARMUP", None)
        stop.set()
        t.join(15)
        shutil.rmtree(d, ignore_errors=True)


class _Server:
    """``serve`` in a thread on a short socket path, with the echo runner and no warm-up; ``error``:
    what it raised, if it stopped."""

    def __init__(self, tmp_path: Path, sock: str | None = None, workers: int = 1):
        self.sock = sock or os.path.join(tempfile.mkdtemp(prefix="gt-h7-"), "s.sock")
        self.stop, self.up, self.error = threading.Event(), threading.Event(), None
        env = _echo_env(tmp_path)
        self.thread = threading.Thread(target=self._run, daemon=True, args=(workers, env))

    def _run(self, workers, env):
        try:
            serve(self.sock, workers=workers, runner="h7_echo_runner:handle", env=env, stop=self.stop,
                  timeout=30, ready=lambda info: self.up.set())
        except BaseException as e:  # noqa: BLE001 - the test looks at it
            self.error = e

    def start(self) -> "_Server":
        self.thread.start()
        return self

    def close(self) -> None:
        import shutil

        self.stop.set()
        self.thread.join(15)
        shutil.rmtree(os.path.dirname(self.sock), ignore_errors=True)


@pytest.fixture
def no_warmup(monkeypatch):
    monkeypatch.setenv("GEMMTUNE_SERVER_WARMUP", "0")


@pytest.mark.slow
@pytest.mark.parametrize("request_", [("map", "bench", []), ("cli", ["tune"])], ids=["map-3", "cli-2"])
def test_a_request_of_another_shape_is_refused_and_the_server_stays_up(tmp_path, no_warmup, request_):
    """A client of another gemmtune version (a request tuple of another length) must get an error
    reply, not take the server down: ``_, task_op, tasks, timeout = req`` raised ValueError out of
    ``serve`` (server.py, _serve_client), which stopped the server for every later client."""
    from multiprocessing.connection import Client

    s = _Server(tmp_path).start()
    try:
        assert s.up.wait(120)
        with Client(s.sock, family="AF_UNIX", authkey=Path(s.sock + ".key").read_bytes()) as c:
            c.send(request_)
            try:
                reply = c.recv() if c.poll(10) else None
            except EOFError:
                reply = "EOF: the server closed the connection"

        time.sleep(0.5)
        _still_serving(s, f" (reply {reply!r})")
    finally:
        s.close()


@pytest.mark.slow
def test_a_client_with_a_wrong_key_does_not_stop_the_server(tmp_path, no_warmup):
    """Any local process that can connect (the socket is not mode 0600, only its key file is) and
    presents a wrong key stopped the server: Listener.accept raises AuthenticationError, which
    serve's ``except (TimeoutError, OSError)`` does not catch (server.py, serve's accept loop)."""
    from multiprocessing import AuthenticationError
    from multiprocessing.connection import Client

    s = _Server(tmp_path).start()
    try:
        assert s.up.wait(120)
        with pytest.raises(AuthenticationError):
            Client(s.sock, family="AF_UNIX", authkey=b"not the key" * 3)
        time.sleep(1.5)
        assert s.error is None and s.thread.is_alive(), f"the server stopped: {s.error!r}"
        # gemmtune's own clients holding a key file that is not the server's (another server started
        # or stopped there): one line, or the forward declined, where AuthenticationError was a traceback
        import gemmtune_entry
        from gemmtune.bench.server import ServerError

        key = Path(s.sock + ".key")
        good = key.read_bytes()
        key.write_bytes(b"x" * len(good))
        try:
            with pytest.raises(ServerError, match="refused this client's key"):
                RemotePool(s.sock, timeout=30).start()
            assert gemmtune_entry.forward(s.sock, ["tune", "--shape", "8x8x8:fp16"]) is None
        finally:
            key.write_bytes(good)
        assert s.thread.is_alive()
    finally:
        s.close()


@pytest.mark.slow
def test_a_second_server_started_during_the_first_ones_start_up_leaves_the_first_reachable(tmp_path, no_warmup):
    """``worker --serve S`` twice within the first one's start-up (its workers import torch before
    it binds S): the second passed the "S exists" check, overwrote S.key, failed to bind ("Address
    already in use") and its ``finally`` removed S and S.key, the first server's. The first kept
    running, said it was serving, and no client could reach it."""
    first = _Server(tmp_path).start()
    second = _Server(tmp_path, sock=first.sock)
    time.sleep(0.3)
    second.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not all(s.up.is_set() or s.error for s in (first, second)):
            time.sleep(0.1)
        time.sleep(1.0)
        alive = [s for s in (first, second) if s.error is None and s.thread.is_alive()]
        assert len(alive) == 1, [repr(s.error) for s in (first, second)]
        assert os.path.exists(first.sock), "the running server's socket was removed by the one that failed"
        with RemotePool(first.sock, timeout=30) as pool:
            assert pool.info()
    finally:
        first.close()
        second.close()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_trace_that_cannot_be_written_mid_run_does_not_fail_the_tune(tmp_path, monkeypatch):
    """GEMMTUNE_WORKER_TRACE is a diagnostic: a worker whose trace write fails (a full disk) goes on
    (bench.worker._trace catches OSError), but the tuner's ``note`` (tuning/tuner.py, tuner_trace)
    let the OSError out and the whole tune failed with 'No space left on device'."""
    import gemmtune
    from gemmtune.problem import Problem

    trace = tmp_path / "trace"
    trace.mkdir()
    (trace / f"tuner-{os.getpid()}.jsonl").symlink_to("/dev/full")  # opens, every write fails: ENOSPC
    monkeypatch.setenv("GEMMTUNE_WORKER_TRACE", str(trace))
    r = gemmtune.tune([Problem.from_sizes(16, 16, 16, "fp16")], families=["aten"], store=tmp_path / "s.sqlite",
                      out=tmp_path / "t.json", progress=False, in_process=True)
    assert r.shapes[0].best == "aten"


@pytest.mark.slow
def test_a_forwarded_tune_to_a_server_started_on_a_relative_path_does_not_wait_for_itself(tmp_path):
    """``gemmtune worker --serve s.sock`` (a relative path, in its folder) and a forwarded
    ``gemmtune tune --server /abs/s.sock`` from another folder: the server chdirs to the client's
    folder before ``served()`` compares realpaths (bench/server.py, _run_cli then served), so its
    own relative "s.sock" resolves to the client's folder, the tune does not borrow the pool, and
    connects back to the server, which serves one client at a time: client and server hang for good
    (and SIGTERM no longer stops the server: its accept loop never comes round)."""
    import signal
    import subprocess
    import sys

    src = str(Path(__file__).resolve().parents[1] / "src")
    env = dict(os.environ, PYTHONPATH=src, TRITON_INTERPRET="1", GEMMTUNE_SERVER_WARMUP="0")
    srv_dir = Path(tempfile.mkdtemp(prefix="gt-h7-"))
    cli_dir = tmp_path / "client"
    cli_dir.mkdir()
    log = open(srv_dir / "server.log", "wb")
    server = subprocess.Popen([sys.executable, "-m", "gemmtune.cli", "worker", "--serve", "s.sock"], cwd=srv_dir,
                              env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while b"serving" not in (srv_dir / "server.log").read_bytes():
            assert server.poll() is None and time.monotonic() < deadline, (srv_dir / "server.log").read_text()
            time.sleep(0.2)
        try:
            client = subprocess.run([sys.executable, "-m", "gemmtune_entry", "tune", "--shape", "16x16x16:fp16",
                                     "--families", "aten", "--store", "c.sqlite", "--out", "t.json",
                                     "--server", str(srv_dir / "s.sock")],
                                    cwd=cli_dir, env=env, capture_output=True, text=True, timeout=15)
        except subprocess.TimeoutExpired:
            pytest.fail("the forwarded tune hung: the server connected back to itself")
        assert client.returncode == 0, client.stderr[-2000:]
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(10)
        log.close()
        import shutil
        shutil.rmtree(srv_dir, ignore_errors=True)


@pytest.mark.slow
def test_a_forwarded_tune_from_a_folder_the_server_cannot_enter_is_refused_and_the_server_stays_up(tmp_path, no_warmup):
    """A forwarded ``gemmtune tune`` whose working directory the server cannot enter (the client's
    own mount namespace, a container sharing /tmp, or a folder removed meanwhile): ``os.chdir(cwd)``
    in bench/server.py _run_cli runs outside its ``except Exception``, so FileNotFoundError left
    ``serve`` and stopped the server for every client; this one got "closed the connection"."""
    from multiprocessing.connection import Client

    s = _Server(tmp_path).start()
    try:
        assert s.up.wait(120)
        got = []
        with Client(s.sock, family="AF_UNIX", authkey=Path(s.sock + ".key").read_bytes()) as c:
            c.send(("cli", ["tune", "--shape", "16x16x16:fp16", "--families", "aten"], str(tmp_path / "gone")))
            try:
                while c.poll(20):
                    got.append(c.recv())
                    if got[-1][0] == "exit":
                        break
            except EOFError:
                got.append("EOF")
        time.sleep(0.5)
        assert s.error is None and s.thread.is_alive(), f"the server stopped: {s.error!r} (client got {got!r})"
        assert got and got[-1][0] == "exit" and got[-1][1] != 0, got
    finally:
        s.close()


@pytest.fixture
def short_request_wait(monkeypatch):
    """The server's wait for a client's request (bench.server.REQUEST_WAIT_S) cut to half a second,
    so that a test that waits it out is fast."""
    from gemmtune.bench import server

    monkeypatch.setattr(server, "REQUEST_WAIT_S", 0.5, raising=False)


def _silent_client(sock: str, authenticated: bool):
    """A client that connects and sends nothing: a bare socket that does not even begin the key
    handshake, or a client past the handshake that never asks anything."""
    if authenticated:
        from multiprocessing.connection import Client

        return Client(sock, family="AF_UNIX", authkey=Path(sock + ".key").read_bytes())
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    return s


def _info_in_thread(sock: str) -> tuple[threading.Thread, list]:
    """A well-behaved client asking ``info`` in a thread (it may wait for good); the list gets its answer."""
    got = []

    def ask():
        with RemotePool(sock, timeout=30) as pool:
            got.append(pool.info())

    t = threading.Thread(target=ask, daemon=True)
    t.start()
    return t, got


@pytest.mark.slow
@pytest.mark.parametrize("authenticated", [False, True], ids=["bare-socket", "after-handshake"])
def test_a_client_that_sends_nothing_is_dropped_and_the_next_one_served(tmp_path, no_warmup, short_request_wait,
                                                                        capsys, authenticated):
    """The server answers one client at a time, and its accept loop read the key handshake
    (Listener.accept) and then the first request (_serve_client) with no time limit: a client that
    connected and sent nothing (a stopped process, a stray ``nc -U``) held every later client in the
    listen queue, for good."""
    s = _Server(tmp_path).start()
    silent = None
    try:
        assert s.up.wait(120)
        silent = _silent_client(s.sock, authenticated)
        other, got = _info_in_thread(s.sock)
        other.join(5)  # half a second for the silent one, then this client's handshake and answer
        assert got, "a client that sends nothing held every other client"
        assert s.error is None and s.thread.is_alive(), f"the server stopped: {s.error!r}"
        assert "sent nothing" in capsys.readouterr().err
    finally:
        if silent is not None:
            silent.close()  # (before the fix: what let the server go on)
        s.close()


@pytest.mark.slow
def test_the_wait_for_a_request_bounds_neither_the_work_nor_the_pause_between_requests(tmp_path, no_warmup,
                                                                                      short_request_wait):
    """Only the wait for a client's first request is bounded: a task that runs longer than that
    wait, and a client that pauses longer between requests (a tune planning its next shape), are
    served as before."""
    s = _Server(tmp_path).start()
    try:
        assert s.up.wait(120)
        with RemotePool(s.sock, timeout=30) as pool:
            assert pool.info()
            time.sleep(0.8)
            out = list(pool.map([{"tag": "long", "sleep": 0.8}]))
        assert [r.get("tag") for _, r in out] == ["long"], out
        assert s.error is None and s.thread.is_alive()
    finally:
        s.close()


@pytest.mark.slow
def test_a_client_that_hangs_up_during_the_key_handshake_does_not_stop_the_server(tmp_path, no_warmup):
    """A client that reads the server's challenge and closes before answering it (a process killed
    as it connected): Listener.accept raised EOFError, which the accept loop's ``except
    (TimeoutError, OSError)`` does not catch, and the server stopped for every client."""
    s = _Server(tmp_path).start()
    try:
        assert s.up.wait(120)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.connect(s.sock)
            assert c.recv(256)  # the challenge
        time.sleep(1.0)
        _still_serving(s)
    finally:
        s.close()


def test_a_pool_whose_start_fails_part_way_stops_the_workers_it_started(tmp_path, monkeypatch):
    """WorkerPool.start built its list of workers in one expression: when the 3rd of 4 could not be
    started (a process limit, no memory), the 2 started were in no list that close() sees (nor was
    close() called: ``with WorkerPool()`` does not exit what failed to enter). They ran on, on a GPU
    each holding a CUDA context, for as long as anything held the failed pool (its exception's
    traceback in a notebook, a caller's variable), and a retried start() began a second set."""
    from gemmtune.bench import workers

    started = []
    real = workers.spawn_worker

    def spawn(*args):
        if len(started) == 2:
            raise BlockingIOError(11, "Resource temporarily unavailable")  # fork refused: a process limit
        started.append(real(*args))
        return started[-1]

    monkeypatch.setattr(workers, "spawn_worker", spawn)
    pool = WorkerPool(4, timeout=30, runner="h7_echo_runner:handle", env=_echo_env(tmp_path), gpus=[])
    try:
        with pytest.raises(OSError) as e:
            pool.start()
        assert len(started) == 2
        running = [p.pid for p in started if p.poll() is None]
        assert not running, f"workers left running after the failed start: {running}"
        # one error that says which worker failed, why, and what became of the others
        assert "worker 3 of 4" in str(e.value) and "Resource temporarily unavailable" in str(e.value), e.value
        assert pool.workers == []
    finally:
        for p in started:
            if p.poll() is None:  # (before the fix)
                os.killpg(p.pid, 9)
                p.wait(10)
        pool.close()
