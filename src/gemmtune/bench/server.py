"""A warm benchmark worker pool that outlives one ``tune`` call: ``gemmtune worker --serve SOCKET``.

Starting a benchmark worker costs 3.5-5.7 s on the H200 machine (a Python process importing
torch and creating a CUDA context), which dominates tuning one shape with ``--fast``. The server
holds a ``WorkerPool`` that is started (and answers ``info``) before the first client arrives;
``tune(..., server=SOCKET)`` (``gemmtune tune --server SOCKET``) sends its tasks there instead of
starting a pool of its own, and gets the results streamed back.

Crash-proof as before: the server process never touches CUDA; the kernels run in its pool's
worker subprocesses, which the pool replaces when one crashes, hangs or poisons its CUDA
context. Triton's on-disk kernel cache is shared by all calls (the workers are the same
processes, and their in-memory compiled kernels stay warm too).

The transport is ``multiprocessing.connection`` over a Unix socket; the server writes a random
key beside the socket (``SOCKET.key``, mode 0600) that clients must present, so only the user
who started it (or who can read the key) can send it work. One client at a time is served;
others wait in the listen queue. A client that sends nothing within ``REQUEST_WAIT_S`` of connecting
is dropped, so that it cannot hold the others.

A whole ``gemmtune tune --server SOCKET`` command can run in the server too (request ``cli``):
the ``gemmtune`` command forwards it there (``gemmtune_entry``) without importing torch or
gemmtune, which took 2.3-2.6 s of every call on the CPU machine, and the server runs it
in-process on its own warm pool (``served``), with the client's working directory and its
output streamed back. The server's process still never touches CUDA: ``tune`` plans on the CPU
and the candidates run in the pool's workers.

Example (two shells; the second command runs as often as you like, with no worker start-up)::

    gemmtune worker --serve /tmp/gemmtune.sock            # GPU: keeps one worker per GPU warm
    gemmtune tune --shape 4096x4096x4096:bf16 --fast --server /tmp/gemmtune.sock
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import os
import secrets
import socket
import stat
import struct
import sys
import threading
import traceback
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Listener, answer_challenge, deliver_challenge
from pathlib import Path
from typing import Callable, Iterable, Iterator

from . import DEFAULT_RUNNER
from .workers import WorkerPool, visible_gpus


class ServerError(ValueError):
    """The worker server cannot be reached, or answered what a client did not expect. A
    ValueError so that the CLI reports it as one line (like bad input: the socket named is the
    user's to fix), not as a traceback."""


# The problem a warm server's workers pay their first-use costs on (measure.warm) and its own
# process plans once (tuning.tuner.warm_plan) before the first client: small, aligned, bf16.
WARM_SIZES = (256, 256, 256, "bf16")

# How long a read of a connected client's key handshake or first request may wait before the server
# drops that client. The server answers one client at a time, so a client that connected and sent
# nothing (a stopped process, a stray ``nc -U``) held every later one in the listen queue for good.
# A gemmtune client sends both within milliseconds of connecting; 5 s leaves room for one whose
# process is descheduled for seconds on a loaded machine, and is the most a silent client costs
# those queued behind it. Only this wait is bounded: once the first request is in, the pauses
# between a client's requests (a tune planning its next shape) and the work a request runs (a long
# map, a forwarded tune) take as long as they take.
REQUEST_WAIT_S = 5.0


def warm_workers(pool: WorkerPool) -> list[dict]:
    """Each worker's first-use costs paid now (op 'warm': measure.warm), one task per worker;
    their results. GEMMTUNE_SERVER_WARMUP=0 skips it (returns [])."""
    if os.environ.get("GEMMTUNE_SERVER_WARMUP", "1") == "0":
        return []
    from ..problem import Problem
    key = Problem.from_sizes(*WARM_SIZES).key
    return [res for _, res in pool.map([{"problem": key, "seed": 0}] * pool.n, op="warm")]


def _key_path(address: str | os.PathLike) -> Path:
    return Path(str(address) + ".key")


def _is_socket(address: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(address).st_mode)
    except OSError:
        return False


def _stale_socket(address: str) -> bool:
    """Whether ``address`` is a Unix socket nothing listens on (its server was killed): connecting
    is refused at once. A file of another kind, or a live server's socket, is not stale."""
    if not _is_socket(address):
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(address)
        except ConnectionRefusedError:
            return True
        except OSError:  # a full listen queue, no permission: someone may be there
            return False
    return False


MAX_SOCKET_PATH = 107  # bytes of a Unix socket's path (sun_path is 108, with its terminating NUL)


def serve(address: str | os.PathLike, *, workers: int | None = None, timeout: float = 120.0,
          runner: str = DEFAULT_RUNNER, env: dict[str, str] | None = None,
          ready: Callable[[dict], None] | None = None, stop: threading.Event | None = None) -> None:
    """Serve a warm WorkerPool on the Unix socket ``address`` until ``stop`` is set (or the
    process is interrupted). ``ready(info)`` is called once the pool's workers answered."""
    # Absolute: a forwarded tune runs in its client's folder (``_run_cli``), where a relative socket
    # path named another file, so the tune did not borrow this pool and connected back to this
    # server, which answers one client at a time: both waited for good (session 45's CPU hunt).
    address = os.path.abspath(str(address))
    if len(os.fsencode(address)) > MAX_SOCKET_PATH:
        # Linux's sun_path: a longer one failed with "AF_UNIX path too long" only once the workers
        # were up (the server/inspect hunt)
        raise ServerError(f"{address}: a Unix socket path may be at most {MAX_SOCKET_PATH} bytes, this one is "
                          f"{len(os.fsencode(address))}; give a shorter one, e.g. /tmp/gemmtune.sock")
    if os.path.isdir(address):  # "another server may be running there" misled for a folder
        raise ServerError(f"{address} is a directory; give a socket path (a file name, e.g. {address}/gemmtune.sock)")
    if os.path.lexists(address) and not _is_socket(address):
        # A file of another kind (the user's own data, a typo) was "another server may be running or
        # starting there (remove both if not)": no server makes anything but a socket at this path.
        raise ServerError(f"{address} exists and is not a socket: give another path (no server made it)")
    kp = _key_path(address)
    taken = ServerError(f"{address} or {kp.name} exists: another server may be running or starting there "
                        f"(remove both if not)")
    if _stale_socket(address):
        # A server killed with SIGKILL (or a crashed machine) leaves its socket and key behind: the
        # client's "start one with: gemmtune worker --serve SOCKET" then failed as written, with
        # "another server may be running". Nothing listens on a stale socket, so it is cleared; only
        # the process whose unlink of the socket succeeded removes the key too, so that two servers
        # starting together cannot remove each other's fresh key.
        try:
            os.unlink(address)
        except FileNotFoundError:
            pass
        else:
            with contextlib.suppress(FileNotFoundError):
                kp.unlink()
    if os.path.exists(address):
        raise taken
    gpus = visible_gpus()
    wenv = dict(env or {})
    if not gpus:
        wenv.setdefault("TRITON_INTERPRET", "1")
    key = secrets.token_bytes(32)
    # The key file is created exclusively and claims the address: the socket is bound only once the
    # workers are up, and a second server started meanwhile passed the check above, overwrote the key,
    # failed to bind and removed both files on its way out, leaving the first unreachable (session
    # 45's CPU hunt). Only what this server made is removed when it stops.
    try:
        fd = os.open(kp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise taken from None
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    made = [kp]
    served = 0
    try:
        with WorkerPool(workers, timeout=timeout, runner=runner, env=wenv, gpus=gpus) as pool:
            info = pool.info()  # the workers are up before any client is accepted
            # No authkey here: Listener.accept would run the key handshake with no time limit, so
            # the handshake runs in _first_request, under REQUEST_WAIT_S.
            with Listener(address, family="AF_UNIX") as listener:
                made.append(Path(address))
                # Warmed up with the socket open: a client that connects meanwhile waits in the
                # listen queue until the first accept, instead of finding no server there.
                warmed = warm_workers(pool)
                if warmed:
                    info = dict(info, warm=warmed)
                if ready is not None:
                    ready(info)
                listener._listener._socket.settimeout(1.0)  # so that ``stop`` is noticed
                while stop is None or not stop.is_set():
                    try:
                        conn = listener.accept()
                    except (TimeoutError, OSError):
                        continue
                    with conn:
                        try:
                            served += _serve_connection(conn, key, pool, info, address)
                        except Exception as e:  # noqa: BLE001 - one bad client (a request of another
                            # version's shape, bytes that are no pickle) stopped the server for every
                            # client (session 45's CPU hunt): it is dropped, the server stays up.
                            print(f"gemmtune worker: dropped a client after {type(e).__name__}: {e}",
                                  file=sys.stderr, flush=True)
    finally:
        for p in made:
            try:
                p.unlink()
            except FileNotFoundError:
                pass


# While the server runs a forwarded command (request ``cli``): the address it serves, its pool and
# the pool's info. A ``tune`` whose ``server`` is that address borrows the pool instead of
# connecting back (the server answers one client at a time: it would wait for itself).
_SERVING: contextvars.ContextVar[tuple | None] = contextvars.ContextVar("gemmtune_serving", default=None)


def served(address) -> "BorrowedPool | None":
    """The pool of the server running this very command, when ``address`` is its socket; else None."""
    cur = _SERVING.get()
    if cur is None or os.path.realpath(str(address)) != os.path.realpath(cur[0]):
        return None
    return BorrowedPool(cur[1], cur[2])


def serving_info() -> dict | None:
    """The served pool's info while the server runs a forwarded command (what its workers' GPU
    is: the command must not ask CUDA in the server's own process); else None."""
    cur = _SERVING.get()
    return None if cur is None else cur[2]


class BorrowedPool:
    """The server's own pool, lent to one command it runs: ``tune``'s view of a pool (info, map,
    a context manager) whose close leaves the pool to the server."""

    def __init__(self, pool: WorkerPool, info: dict):
        self._pool, self._info = pool, info
        self.timeout = pool.timeout

    def info(self) -> dict:
        return self._info

    def map(self, tasks, op: str = "bench", on_result=None, stop=None):
        self._pool.timeout = self.timeout
        return self._pool.map(tasks, op=op, on_result=on_result, stop=stop)

    def close(self) -> None:
        pass

    def __enter__(self) -> "BorrowedPool":
        return self

    def __exit__(self, *exc) -> None:
        pass


class _Stream(io.TextIOBase):
    """stdout or stderr of a forwarded command: each write goes to the client as it happens (the
    progress lines of a long tune arrive while it runs). A client gone mid-run loses the output;
    the command still finishes and its results are in the store."""

    def __init__(self, conn, kind: str):
        self.conn, self.kind, self.gone = conn, kind, False

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        if text and not self.gone:
            try:
                self.conn.send((self.kind, text))
            except (BrokenPipeError, OSError):
                self.gone = True
        return len(text)


def _run_cli(conn, argv: list, cwd: str, pool: WorkerPool, info: dict, address: str) -> None:
    """Run the forwarded ``gemmtune`` command ``argv`` in ``cwd`` with this server's pool, streaming
    its output, then send its exit status. Only ``tune`` is accepted; its ``--server`` naming this
    socket borrows this pool (``served``)."""
    from ..cli import main as cli_main

    out, err = _Stream(conn, "out"), _Stream(conn, "err")
    if not argv or argv[0] != "tune":
        err.write(f"gemmtune worker: only tune is run in the server, not {argv[:1]}\n")
        conn.send(("exit", 2))
        return
    here = os.getcwd()
    token = _SERVING.set((address, pool, info))
    try:
        try:
            os.chdir(cwd)  # the client's relative --store/--out/--suite paths; one client at a time
        except OSError as e:  # (a folder removed, or another mount namespace's): this client's error only
            err.write(f"gemmtune worker: cannot run in the client's folder {cwd}: {e.strerror or e}\n")
            conn.send(("exit", 2))
            return
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli_main(list(argv))
            except SystemExit as e:  # argparse: --help, or bad arguments (its message went to stderr)
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
            except Exception:  # noqa: BLE001 - the client gets the traceback; the server stays up
                err.write(traceback.format_exc())
                rc = 1
    finally:
        _SERVING.reset(token)
        os.chdir(here)
    try:
        conn.send(("exit", int(rc)))
    except (BrokenPipeError, OSError):
        pass


def _bound_reads(conn, seconds: float) -> None:
    """Make each read on ``conn``'s socket give up after ``seconds`` (``recv`` then raises
    BlockingIOError); 0 lets reads wait for good again. A socket option (SO_RCVTIMEO), because
    ``multiprocessing.connection`` reads the raw descriptor and has no timeout of its own."""
    whole = int(seconds)
    timeval = struct.pack("@ll", whole, int((seconds - whole) * 1_000_000))
    with socket.socket(fileno=os.dup(conn.fileno())) as s:  # the option is the socket's, shared by the copy
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)


def _first_request(conn, key: bytes):
    """Run the key handshake with a newly connected client and read its first request, no read
    waiting longer than ``REQUEST_WAIT_S`` (TimeoutError after that); later reads wait for good.
    AuthenticationError for a wrong key; EOFError or OSError for a client gone meanwhile."""
    _bound_reads(conn, REQUEST_WAIT_S)
    try:
        deliver_challenge(conn, key)
        answer_challenge(conn, key)
        req = conn.recv()
    except BlockingIOError:
        raise TimeoutError(f"no request within {REQUEST_WAIT_S:g} s") from None
    _bound_reads(conn, 0)
    return req


def _serve_connection(conn, key: bytes, pool: WorkerPool, info: dict, address: str) -> int:
    """One newly connected client: its key checked and its requests answered; the number of tasks
    run. A client with another key, one that sends nothing (``REQUEST_WAIT_S``) and one gone before
    it asked anything are left, the first two with a line on stderr."""
    try:
        first = _first_request(conn, key)
    except AuthenticationError as e:  # a client with another key: refused, the server stays up
        print(f"gemmtune worker: refused a client: {e}", file=sys.stderr, flush=True)
        return 0
    except TimeoutError:
        print(f"gemmtune worker: dropped a client that sent nothing within {REQUEST_WAIT_S:g} s",
              file=sys.stderr, flush=True)
        return 0
    except (EOFError, OSError):  # gone mid-handshake (EOFError out of Listener.accept stopped the server)
        return 0
    return _serve_client(conn, first, pool, info, address)


def _requests(conn, first) -> Iterator:
    """``first`` (read by ``_first_request``), then each request the client sends until it closes."""
    yield first
    while True:
        try:
            yield conn.recv()
        except (EOFError, OSError):
            return


def _serve_client(conn, first, pool: WorkerPool, info: dict, address: str = "") -> int:
    """Answer one client's requests, ``first`` then each until it closes; the number of tasks run."""
    n = 0
    for req in _requests(conn, first):
        op = req[0] if isinstance(req, tuple) and req else None
        if op == "info":
            conn.send(("info", info))
        elif op == "stats":
            conn.send(("stats", {"workers_started": pool._spawned, "restarts": pool.restarts,
                                 "workers": pool.n}))
        elif op == "map":
            _, task_op, tasks, timeout = req
            pool.timeout = float(timeout)
            try:
                for task, res in pool.map(tasks, op=task_op):
                    conn.send(("result", task, res))
                    n += 1
            except (BrokenPipeError, OSError):
                return n  # the client went away mid-map: its remaining tasks are dropped
            conn.send(("done", None))
        elif op == "cli":
            _, argv, cwd = req
            _run_cli(conn, argv, cwd, pool, info, address)
        else:
            conn.send(("error", f"unknown request {req!r}"))
    return n


class RemotePool:
    """The client side: the parts of WorkerPool's interface ``tune`` uses (``info``, ``map``,
    ``close``, a context manager), served by ``serve`` on ``address``."""

    def __init__(self, address: str | os.PathLike, *, timeout: float = 120.0):
        self.address = str(address)
        self.timeout = float(timeout)
        self._conn = None

    def start(self) -> "RemotePool":
        if self._conn is None:
            try:
                key = _key_path(self.address).read_bytes()
                self._conn = Client(self.address, family="AF_UNIX", authkey=key)
            except (FileNotFoundError, ConnectionRefusedError) as e:
                if os.path.lexists(self.address) and not _is_socket(self.address):
                    # "no server ...; start one with: gemmtune worker --serve PATH" could not be done as
                    # written: that refuses a path held by a file of another kind.
                    raise ServerError(f"{self.address} is not a socket (a file of another kind): no gemmtune "
                                      "worker server can serve there; name the socket of "
                                      "'gemmtune worker --serve SOCKET'") from None
                raise ServerError(f"no gemmtune worker server at {self.address} ({type(e).__name__}); start "
                                  f"one with: gemmtune worker --serve {self.address}") from None
            except PermissionError as e:
                raise ServerError(f"cannot use the worker server at {self.address}: {e}") from None
            except AuthenticationError:  # its key file is not the running server's: a traceback before
                raise ServerError(f"the worker server at {self.address} refused this client's key ({self.address}.key "
                                  "is not the running server's: another server started or stopped there)") from None
        return self

    def _ask(self, req: tuple):
        self.start()
        try:
            self._conn.send(req)
            return self._conn.recv()
        except (EOFError, OSError) as e:
            raise ServerError(f"the worker server at {self.address} closed the connection "
                              f"({type(e).__name__})") from None

    def info(self) -> dict:
        kind, payload = self._ask(("info",))
        return payload

    def stats(self) -> dict:
        kind, payload = self._ask(("stats",))
        return payload

    def map(self, tasks: Iterable[dict], op: str = "bench",
            on_result: Callable[[int, dict, dict], None] | None = None, stop=None) -> Iterator[tuple[dict, dict]]:
        tasks = list(tasks)
        self.start()
        try:
            self._conn.send(("map", op, tasks, self.timeout))
            i = 0
            while True:
                kind, *rest = self._conn.recv()
                if kind == "done":
                    return
                if kind == "error":
                    raise ServerError(f"the worker server refused the request: {rest[0]}")
                task, res = rest
                if on_result is not None:
                    on_result(i, task, res)
                i += 1
                yield task, res
        except (EOFError, OSError) as e:
            raise ServerError(f"the worker server at {self.address} closed the connection mid-run "
                              f"({type(e).__name__}); results so far are kept") from None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> "RemotePool":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["serve", "served", "serving_info", "BorrowedPool", "RemotePool", "ServerError"]
