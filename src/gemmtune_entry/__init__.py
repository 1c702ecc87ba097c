"""The ``gemmtune`` command's entry point.

``gemmtune tune ... --server SOCKET`` is forwarded whole to the warm worker server on SOCKET
(``gemmtune worker --serve``), which runs it in its own process on its warm pool and streams the
output back. This module imports neither torch nor gemmtune for that: importing them took
2.3-2.6 s of every call on the 2-core CPU machine, most of a warm one-shape tune. Everything
else, and a server that cannot take the command (an older gemmtune, no server there), goes to
``gemmtune.cli.main`` as before, which reports a missing server as one clear line.
``GEMMTUNE_SERVER=SOCKET`` does the same for every ``tune`` that names no server, in-process
run or cluster (``env_server``); where no server answers there, the tune runs here, with a note.

What differs when forwarded: the command runs with the server's environment (its GPU, its
``TRITON_*`` settings) in the client's working directory, so relative paths mean what they
would locally; interrupting the client stops its output, not the tune, whose results still
reach the store. ``GEMMTUNE_FORWARD=0`` turns forwarding off.

A ``tune`` run here (no server) starts its benchmark worker before anything imports torch
(``gemmtune_entry.spawn``); ``GEMMTUNE_PRESTART=0`` turns that off. Where Python keeps no
bytecode for torch, this process and its workers keep it under gemmtune's cache
(``gemmtune_entry.bytecode``; ``GEMMTUNE_PYCACHE=0`` turns that off).
"""

from __future__ import annotations

import os
import sys


def _forwardable(argv: list[str]) -> bool:
    """Whether ``argv`` is a ``tune`` that may be forwarded at all: not a help request, and
    forwarding not turned off (``GEMMTUNE_FORWARD=0``)."""
    return (bool(argv) and argv[0] == "tune" and os.environ.get("GEMMTUNE_FORWARD", "1") != "0"
            and not any(a in ("-h", "--help") for a in argv))


def server_of(argv: list[str]) -> str | None:
    """The socket of ``tune ... --server SOCKET`` (or ``--server=SOCKET``); None for any other
    command, a help request, a tune with ``--cluster`` (which gemmtune.cli refuses with ``--server``),
    or forwarding turned off.

    >>> server_of(["tune", "--shape", "8x8x8:fp16", "--server", "/tmp/s.sock"])
    '/tmp/s.sock'
    >>> server_of(["tune", "--server=/tmp/s.sock", "-h"]), server_of(["bench", "--server", "x"])
    (None, None)
    >>> server_of(["tune", "--server", "/tmp/s.sock", "--cluster", "local:2"])  # refused here, not there
    """
    if not _forwardable(argv) or any(a == "--cluster" or a.startswith("--cluster=") for a in argv):
        return None
    for i, a in enumerate(argv):
        if a == "--server" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--server="):
            return a.split("=", 1)[1]
    return None


# Local-only options: a tune that names one is never forwarded to GEMMTUNE_SERVER's server.
_LOCAL_ONLY = ("--server", "--in-process", "--cluster")


def env_server(argv: list[str]) -> str | None:
    """The socket in ``GEMMTUNE_SERVER`` for a ``tune`` that names no server itself: set it once in
    a shell (``export GEMMTUNE_SERVER=/tmp/gemmtune.sock``) and every ``gemmtune tune`` there
    runs on that warm server. None for any other command, a help request, a tune with
    ``--server``, ``--in-process`` or ``--cluster``, or forwarding turned off.

    >>> import os; os.environ["GEMMTUNE_SERVER"] = "/tmp/s.sock"
    >>> env_server(["tune", "--shape", "8x8x8:fp16"]), env_server(["tune", "--in-process"]), env_server(["bench"])
    ('/tmp/s.sock', None, None)
    >>> del os.environ["GEMMTUNE_SERVER"]
    """
    address = os.environ.get("GEMMTUNE_SERVER", "")
    if not address or not _forwardable(argv):
        return None
    if any(a == opt or a.startswith(opt + "=") for a in argv for opt in _LOCAL_ONLY):
        return None  # --server among them: the command's own server (server_of) wins
    return address


def forward(address: str, argv: list[str]) -> int | None:
    """Run ``argv`` in the server at ``address``, copying its output here as it arrives; its exit
    status, or None when the server cannot take it (not there, or too old to know the request)."""
    from multiprocessing import AuthenticationError
    from multiprocessing.connection import Client

    try:
        key = open(address + ".key", "rb").read()
        conn = Client(address, family="AF_UNIX", authkey=key)
    except (OSError, AuthenticationError):  # (a key file of another server's start: a traceback before)
        return None  # gemmtune.cli says why, in its words
    with conn:
        try:
            conn.send(("cli", list(argv), os.getcwd()))
            while True:
                kind, payload = conn.recv()
                if kind == "out":
                    sys.stdout.write(payload)
                    sys.stdout.flush()
                elif kind == "err":
                    sys.stderr.write(payload)
                    sys.stderr.flush()
                elif kind == "exit":
                    return int(payload)
                else:  # ("error", ...): a server from before forwarding
                    return None
        except (EOFError, OSError):
            print(f"gemmtune tune: error: the worker server at {address} closed the connection; results "
                  "measured so far are in the store", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("interrupted: the server finishes this tune on its own; its results reach the store",
                  file=sys.stderr)
            return 130


def main(argv: list[str] | None = None) -> int:
    """``gemmtune ARGS``: forwarded to a warm server (see the module docstring) or run here; a
    ``tune`` run here starts its benchmark worker first (``spawn.prestart``: its torch import
    and CUDA start-up then overlap this process's own import)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    address = server_of(argv)
    if address is not None:
        rc = forward(address, argv)
        if rc is not None:
            return rc
    address = env_server(argv)
    if address is not None:
        rc = forward(address, argv + ["--server", address])
        if rc is not None:
            return rc
        # A shell-wide default, not this command's request: a missing server is no error.
        print(f"gemmtune tune: GEMMTUNE_SERVER={address}: no worker server answers there; tuning in this "
              "process", file=sys.stderr)
    from .bytecode import apply_here, prefix_for_this_machine
    apply_here(prefix_for_this_machine())  # before torch's import: see gemmtune_entry.bytecode
    from .spawn import prestart
    early = prestart(argv)
    try:
        from gemmtune.cli import main as cli_main
        return cli_main(argv, prestarted=tuple(early))
    finally:
        for w in early:
            w.close()  # stopped unless the tune's pool adopted it (the pool stops those)


def run() -> None:
    """The process entry point (the ``gemmtune`` console script, ``python -m gemmtune_entry``):
    ``main``, then exit. After a ``tune`` that returned, the process leaves without the
    interpreter's teardown: with torch imported that took 0.53-0.58 s on the 2-core CPU machine
    (0.03 s with ``os._exit``), on the clock of every cold one-shape tune. Everything a tune
    writes is closed by then (the store in ``Tuner.run``, the table by an atomic replace, the
    summary in a ``with`` block); exit handlers still run and both streams are flushed.
    ``GEMMTUNE_FAST_EXIT=0`` turns this off."""
    argv = sys.argv[1:]
    rc = main(argv)
    if argv[:1] == ["tune"] and os.environ.get("GEMMTUNE_FAST_EXIT", "1") != "0":
        import atexit
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc if isinstance(rc, int) else 1)
    sys.exit(rc)


__all__ = ["main", "run", "forward", "server_of", "env_server"]
