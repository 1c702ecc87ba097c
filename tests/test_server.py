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
