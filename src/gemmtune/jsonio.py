"""Reading the JSON files gemmtune saves (dispatchers, models, bench results), with
errors that name the file instead of a traceback from deep inside json, and writing them safely:

- ``write_atomic`` (``replacing`` for writers of their own): a temp file of its own (unique per
  writer), flushed to disk, then renamed over the target. A reader sees the old file or the new one, never half of one, and two
  writers never move each other's half-written temp file into place (a shared ``NAME.tmp`` did:
  measured, 6 writers and 2 readers on one table, a third of the reads failed).
- ``locked``: an advisory lock (``NAME.lock`` beside the file) around a read-merge-write, so
  that two runs merging into one table do not drop each other's entries.

Example::

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.json"
    >>> with locked(p):
    ...     _ = write_atomic(p, '{"a": 1}')
    >>> read_json(p)
    {'a': 1}
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path


def read_json(path: str | os.PathLike, error: type[Exception] = ValueError):
    """Parse the JSON file at ``path``; raise ``error`` naming the file when it cannot."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except (ValueError, RecursionError) as e:
        # Not JSONDecodeError, so not caught above: an integer of 5,000 digits (int's digit limit,
        # a ValueError that named no file) or arrays nested 10^5 deep (a RecursionError traceback
        # from inside json). table.io.loads refuses both the same way.
        raise error(f"{path}: not valid JSON: {type(e).__name__}: {str(e)[:200]}") from None


def refuse_results_store(path: str | os.PathLike, what: str) -> None:
    """Raise ValueError when ``path`` holds a SQLite file: a results store (every measurement of
    a run; ``gemmtune.sqlite`` is the default one in the working directory), which a table, a
    suite or a model written there would replace. ``tune --out S --overwrite``, ``lut merge S ...
    --overwrite`` (both suggested by their own errors) and ``capture --out S`` did (session 45's
    CPU hunt).

    >>> refuse_results_store("/nowhere/t.json", "the table") is None
    True
    """
    from .store.schema import SQLITE_MAGIC  # (here: the store imports this module)
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError:
        return
    if head == SQLITE_MAGIC:
        raise ValueError(f"cannot write {what} to {path}: it is a SQLite file, a results store with every "
                         "measurement of a run; give another path (a store is never overwritten)")


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see the module doc); return the path. A SQLite file
    there (a results store) is refused: ``refuse_results_store``."""
    path = Path(path)
    refuse_results_store(path, "this file")
    with replacing(path, mode="wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    return path


@contextlib.contextmanager
def replacing(path: str | os.PathLike, mode: str | None = "wb"):
    """Write ``path`` atomically: the block writes a temporary file beside it (``.NAME.tmp-XXXX.tmp``,
    unique per writer), which is fsynced and renamed onto ``path`` only when the block ends
    cleanly; then the directory is fsynced (where the OS allows), so that the rename survives a
    crash too. On any exception the temporary file is removed and ``path`` is left as it was.

    ``mode`` "w" or "wb" yields the open temporary file; None yields its path, for writers that
    open the file themselves (SQLite's backup, pandas). Through a symlink, its target is replaced,
    as open(path, "w") would (renaming onto the link replaced the link with a plain file). The
    file gets the mode open() would give it (``replacement_mode``), not mkstemp's 0600. An OSError
    naming no file or the temporary one is raised naming ``path``."""
    if mode not in ("w", "wb", None):
        raise ValueError(f"replacing: mode must be 'w', 'wb' or None, not {mode!r}")
    path = Path(path)
    real = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        fd, name = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.tmp-", suffix=".tmp")
    except OSError as e:  # name the file asked for, not the temp file
        raise type(e)(e.errno, e.strerror, str(path)) from None
    tmp = Path(name)
    try:
        if mode is None:
            os.close(fd)
            yield tmp
            with open(tmp, "rb") as f:  # written by another opener: its data to disk all the same
                os.fsync(f.fileno())
        else:
            with os.fdopen(fd, mode, **({"encoding": "utf-8"} if mode == "w" else {})) as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, replacement_mode(real))
        os.replace(tmp, real)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno is not None and e.filename in (None, name):
            raise type(e)(e.errno, e.strerror, str(path)) from None
        raise
    _fsync_dir(real.parent)


def _fsync_dir(folder: Path) -> None:
    # The rename lives in the directory: without this a crash could bring back the old file.
    # Not possible everywhere (Windows cannot open a directory; some file systems refuse): skipped.
    try:
        dfd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def replacement_mode(path: str | os.PathLike) -> int:
    """The mode a temporary file (mkstemp's 0600) takes before it replaces ``path``: what open()
    would have made, a new file the umask's default and an existing one its own mode (a table kept
    private, chmod 600, became 0644 at every write; every store export came out 0600)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode) & 0o777
    except OSError:
        return 0o666 & ~_UMASK


def check_file_target(path: str | os.PathLike, what: str) -> None:
    """Raise ValueError when ``path`` cannot be written as a file: its directory is missing, or it
    is a directory itself. Called before long work (a tune, a capture), so that the error comes
    first, not after the work. ``what`` names the file in the message (e.g. 'the table').

    >>> check_file_target("/nowhere/t.json", "the table")
    Traceback (most recent call last):
    ...
    ValueError: cannot write the table to /nowhere/t.json: directory /nowhere does not exist
    """
    parent = Path(path).resolve().parent
    if not parent.is_dir():
        raise ValueError(f"cannot write {what} to {path}: directory {parent} does not exist")
    if Path(path).is_dir():
        raise ValueError(f"cannot write {what} to {path}: it is a directory; give a file name")
    refuse_results_store(path, what)
    # A file with every write bit off was made read-only on purpose; the atomic rename would
    # replace it all the same (it needs only the directory writable), and with --overwrite lose
    # its entries. By the mode bits, not os.access: root, who may write anything, is refused too.
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = None
    if mode is not None and not mode & 0o222:
        raise ValueError(f"cannot write {what} to {path}: the file is read-only (mode {mode & 0o777:o}); "
                         "make it writable (chmod u+w) or give another path")
    # Written by a temporary file in the same directory, renamed over it (write_atomic): that needs
    # the directory writable. A probe file says so for this process as it is (root ignores mode
    # bits, a read-only mount does not), before the work rather than after it: a read-only
    # directory had failed a whole tuning sweep at its last step (session 31's audit).
    try:
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".gemmtune-probe-")
    except OSError as e:
        raise ValueError(f"cannot write {what} to {path}: directory {parent} is not writable "
                         f"({e.strerror or e})") from None
    os.close(fd)
    os.unlink(probe)


def check_dir_target(path: str | os.PathLike, what: str) -> None:
    """Raise ValueError when ``path`` cannot be the folder a command writes its files into: it
    is a file (``--out results.json`` for a command whose ``--out`` is a folder; bench-model said
    only "File exists"), or under a file. A folder not there yet is made by the command.
    ``what`` names the option in the message (e.g. '--out').

    >>> import tempfile, os
    >>> f = tempfile.NamedTemporaryFile(suffix=".json", delete=False); f.close()
    >>> try:
    ...     check_dir_target(f.name, "--out")
    ... except ValueError as e:
    ...     print(str(e).replace(f.name, "F"))
    --out F is a file; give a folder (the files are written into it)
    >>> os.unlink(f.name)
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ValueError(f"{what} {path} is a file; give a folder (the files are written into it)")
    for parent in p.resolve().parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"{what} {path}: {parent} is a file, not a folder")
            break


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # once, at import: os.umask can only be read by setting it


@contextlib.contextmanager
def locked(path: str | os.PathLike):
    """Hold an exclusive advisory lock for ``path`` (on ``NAME.lock`` beside it) while the block
    runs: other gemmtune processes that lock the same path wait. The lock file is removed when the
    block ends (a waiter that opened the removed file sees that and locks the new one), so that no
    ``NAME.lock`` is left beside a table. Where the platform has no ``fcntl`` (Windows) the block
    runs unlocked."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    # Named after the real file: a run given a symlink to the table and one given the table itself
    # must take the same lock.
    real = Path(os.path.realpath(path))
    lock = real.with_name(real.name + ".lock")
    while True:
        try:
            f = open(lock, "a")
        except OSError as e:  # name the file asked for: the lock file is ours, not the caller's
            raise type(e)(e.errno, f"{e.strerror} (its lock file {lock.name} cannot be created)",
                          str(path)) from None
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            if os.path.samestat(os.fstat(f.fileno()), os.stat(lock)):
                break  # the lock file is still the one at the path: ours
        except FileNotFoundError:
            pass  # its holder removed it after we opened it: lock the new one
        f.close()
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)  # before the lock is released: a waiter then retries on a new file
        f.close()  # releases the lock
