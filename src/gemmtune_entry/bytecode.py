"""A bytecode cache for gemmtune's processes where Python keeps none: the ``gemmtune`` command and
the benchmark workers it (or ``tune_model``) starts.

Why: with ``PYTHONDONTWRITEBYTECODE=1`` (set in many Docker images) and a torch installed without
its ``.pyc`` files, every process compiles torch's sources again on import. On the H200 machine
(2026-11-30, benchmarks/results/2026-11-30-h200-s42, call 2) ``import torch`` took 3.9-4.8 s
there, and a worker's imports plus its CUDA start-up 4.5 s; with the bytecode written under a
cache prefix, the second start took 2.3 s. A tune's worker start-up sits on the clock of every
``tune_model`` (5.6-5.8 s of 13.8 s in session 41) and every cold one-shape tune.

What: where torch has no bytecode beside its sources and Python would not write it there
(``PYTHONDONTWRITEBYTECODE``, or a read-only install), gemmtune's processes read and write
bytecode under ``~/.cache/gemmtune/pycache`` (``$XDG_CACHE_HOME`` honoured) instead, as
``PYTHONPYCACHEPREFIX`` would: nothing is written beside any source file. A prefix the user set
(``PYTHONPYCACHEPREFIX``) is left alone, as is an install that has its bytecode.
``GEMMTUNE_PYCACHE=0`` turns this off; ``GEMMTUNE_PYCACHE=DIR`` picks the directory. This module
imports neither torch nor gemmtune: it runs before them.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from pathlib import Path


def default_dir(environ: dict[str, str]) -> str:
    """``$GEMMTUNE_PYCACHE`` when it names a directory, else ``$XDG_CACHE_HOME/gemmtune/pycache``
    (``~/.cache`` when unset).

    >>> default_dir({"XDG_CACHE_HOME": "/c"}), default_dir({"GEMMTUNE_PYCACHE": "/p", "XDG_CACHE_HOME": "/c"})
    ('/c/gemmtune/pycache', '/p')
    """
    chosen = environ.get("GEMMTUNE_PYCACHE", "")
    if chosen not in ("", "1"):
        return chosen
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gemmtune", "pycache")


def _beside(origin: str) -> Path:
    """Where Python keeps ``origin``'s bytecode without a prefix (``__pycache__`` beside it)."""
    src = Path(origin)
    return src.parent / "__pycache__" / f"{src.stem}.{sys.implementation.cache_tag}.pyc"


def cache_prefix(environ: dict[str, str], origin: str | None) -> str | None:
    """The bytecode prefix gemmtune's processes should use, or None where Python's own caching
    works. ``origin``: the source file of the package whose bytecode tells (torch's
    ``__init__.py``; None when it is not installed).

    A pure decision: it reads the file system (does the bytecode exist, is its directory
    writable) and ``environ``, and changes nothing.
    """
    if environ.get("GEMMTUNE_PYCACHE", "") == "0" or environ.get("PYTHONPYCACHEPREFIX"):
        return None
    if origin is None or not origin.endswith(".py") or sys.implementation.cache_tag is None:
        return None
    pyc = _beside(origin)
    if pyc.exists():
        return None  # installed with its bytecode: a prefix would only hide it
    no_write = bool(environ.get("PYTHONDONTWRITEBYTECODE"))
    if not no_write:
        where = pyc.parent if pyc.parent.exists() else pyc.parent.parent
        no_write = not os.access(where, os.W_OK)
    return default_dir(environ) if no_write else None


@functools.cache
def torch_origin() -> str | None:
    """torch's ``__init__.py``, found without importing torch; None when torch is missing."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None else None


@functools.cache
def prefix_for_this_machine() -> str | None:
    """``cache_prefix`` for this process's environment and torch, decided once a process."""
    return cache_prefix(dict(os.environ), torch_origin())


def apply_to_env(env: dict[str, str], prefix: str | None) -> dict[str, str]:
    """``env`` for a child process that should use ``prefix`` (None: unchanged).

    >>> apply_to_env({"PYTHONDONTWRITEBYTECODE": "1", "A": "b"}, "/c/pyc")
    {'A': 'b', 'PYTHONPYCACHEPREFIX': '/c/pyc'}
    >>> apply_to_env({"PYTHONDONTWRITEBYTECODE": "1"}, None)
    {'PYTHONDONTWRITEBYTECODE': '1'}
    """
    if prefix is None:
        return env
    env = dict(env)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = prefix
    return env


def apply_here(prefix: str | None) -> bool:
    """Use ``prefix`` in this process from now on (imports already done keep what they had).
    True when applied; False for None or a directory that cannot be made."""
    if prefix is None:
        return False
    try:
        os.makedirs(prefix, exist_ok=True)
    except OSError:
        return False
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False
    return True


__all__ = ["apply_here", "apply_to_env", "cache_prefix", "default_dir", "prefix_for_this_machine", "torch_origin"]
