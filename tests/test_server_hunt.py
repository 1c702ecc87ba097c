"""A CPU bug hunt of the commands no earlier hunt covered: the warm benchmark server
(``gemmtune worker --serve``, ``tune --server``: stale and foreign socket paths, two servers on one
path, a server killed mid-request), ``gemmtune inspect`` (resource counts, refused and malformed
choice ids, --arch), ``gemmtune space``, ``gemmtune demo`` and ``gemmtune predict`` without --eval.
One test per defect found; each names it in a one-line comment."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _cli(*argv, cwd=None, timeout=60, env_extra=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(SRC), **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "gemmtune.cli", *argv], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=timeout)


def test_inspect_counts_spills_in_the_stack_frame(tmp_path):
    # Defect: inspect said "spill B 0" for a kernel spilling thousands of bytes (ptxas puts spills in
    # the stack frame, cuobjdump's STACK, and only LOCAL was read).
    from gemmtune.kernelinfo import resources
    tool = tmp_path / "cuobjdump"
    tool.write_text("#!/bin/sh\necho 'Resource usage:'\necho ' Function _tiled_mm_kernel:'\n"
                    "echo '  REG:255 STACK:7840 SHARED:1024 LOCAL:0 CONSTANT[0]:672 TEXTURE:0 SURFACE:0 SAMPLER:0'\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    assert resources(b"\0", str(tool)) == (255, 7840)


def _serve_in_thread(sock: str, **kw):
    """``serve(sock)`` in a daemon thread; (thread, stop event, ready event)."""
    import threading

    from gemmtune.bench.server import serve
    stop, up = threading.Event(), threading.Event()
    t = threading.Thread(target=serve, args=(sock,), daemon=True,
                         kwargs=dict(stop=stop, timeout=30, ready=lambda info: up.set(), **kw))
    t.start()
    return t, stop, up


def _up(t, up, seconds: float = 60) -> bool:
    """Whether the server came up; False as soon as its thread ended (serve refused) or after ``seconds``."""
    import time
    end = time.monotonic() + seconds
    while t.is_alive() and time.monotonic() < end:
        if up.wait(0.1):
            return True
    return up.is_set()


def _stale_socket(path: str) -> None:
    """What a server killed with SIGKILL leaves: a socket file nothing listens on, and its key."""
    import socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(1)
    s.close()  # the file stays; connecting to it is refused
    Path(path + ".key").write_bytes(b"k" * 32)


def test_a_stale_socket_of_a_killed_server_does_not_block_a_new_one():
    # Defect: after `kill -9` of a server, the client said "start one with: gemmtune worker --serve
    # SOCKET", and that command refused with "another server may be running" until both files were removed.
    import tempfile

    from gemmtune.bench.server import RemotePool
    d = tempfile.mkdtemp(prefix="gt-")  # short: Unix socket paths are limited to ~100 characters
    sock = os.path.join(d, "s.sock")
    _stale_socket(sock)
    t, stop, up = _serve_in_thread(sock, env={"GEMMTUNE_SERVER_WARMUP": "0"})
    try:
        assert _up(t, up), "the server did not start over the stale socket"
        with RemotePool(sock) as pool:
            assert pool.stats()["workers"] == 1
    finally:
        stop.set()
        t.join(20)
    assert not t.is_alive() and not os.path.exists(sock) and not os.path.exists(sock + ".key")


def test_a_path_that_is_no_socket_is_named_so_on_both_sides(tmp_path):
    # Defect: a regular file at the socket path made the client advise "start one with: gemmtune worker
    # --serve PATH", which refused with "another server may be running ... (remove both if not)".
    from gemmtune.bench.server import RemotePool, ServerError, serve
    path = tmp_path / "notes.sock"
    path.write_text("my notes")
    Path(str(path) + ".key").write_bytes(b"k" * 32)
    with pytest.raises(ServerError, match="is not a socket"):
        RemotePool(path).start()
    with pytest.raises(ServerError, match="is not a socket"):
        serve(path)
    assert path.read_text() == "my notes"


def test_inspect_for_an_arch_the_compiler_does_not_know_is_one_line(tmp_path):
    # Defect: `inspect --arch 999` printed MLIR's 105-line crash reproducer (native code, straight to
    # file descriptor 2) ahead of its one-line error.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(SRC)
    cp = subprocess.run([sys.executable, "-m", "gemmtune.cli", "inspect", "triton_mm:BM16-BN16-BK16-S1-W1-G8",
                         "--shape", "16x16x16:fp16", "--arch", "999"], capture_output=True, text=True, env=env,
                        cwd=tmp_path, timeout=120)
    assert cp.returncode == 2 and "cannot compile" in cp.stderr, cp.stderr[-2000:]
    assert cp.stderr.strip().count("\n") == 0, cp.stderr[:2000]


def test_inspect_json_of_a_library_choice_is_json(tmp_path):
    # Defect: `inspect aten --json` printed "aten: no Triton kernel" on stdout ahead of the document,
    # so the output did not parse as JSON.
    import json
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(SRC)
    cp = subprocess.run([sys.executable, "-m", "gemmtune.cli", "inspect", "aten", "--shape", "16x16x16:fp16", "--json"],
                        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["kernels"] == [] and "no Triton kernel" in cp.stderr


def test_a_socket_path_too_long_for_unix_is_refused_before_any_worker_starts(tmp_path, monkeypatch):
    # Defect (noted by the hunt, fixed after it): a path over sun_path's 107 bytes failed with
    # "AF_UNIX path too long" only once the workers were up.
    from gemmtune.bench import server
    started = []
    monkeypatch.setattr(server, "WorkerPool", lambda *a, **k: started.append(1))
    long = tmp_path / ("d" * 60) / ("s" * 60 + ".sock")
    with pytest.raises(server.ServerError, match="at most 107 bytes"):
        server.serve(long)
    assert not started and not long.parent.exists()


def test_inspect_says_a_kernel_that_needs_more_shared_memory_than_the_gpu_has_cannot_launch():
    # Defect (noted by the hunt, fixed after it): inspect showed 1.5 MB of shared memory as a plain
    # number, with no word that sm_90 (227 KB a block) cannot launch it.
    from gemmtune.kernelinfo import KernelInfo
    big = KernelInfo("k", 90, (1,), 8, 3, 255, 0, 1572864).row()
    assert "cannot launch" in big["note"] and "232448" in big["note"]
    assert "note" not in KernelInfo("k", 90, (1,), 8, 3, 200, 0, 98304).row()
