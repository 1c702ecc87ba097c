"""Several collectors (one per GPU) sharing one store: each shape goes to the one process that
claims it first, by creating its claim file in a shared folder (atomic on a local file system)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

_CLAIM_NAME = re.compile(r"[0-9a-f]{40}")  # claim()'s file names: a key's sha1


def claim(claims: Path, key: str) -> bool:
    """Atomically claim a shape for this process (several collectors, one per
    GPU, share one store and one claims folder): True for the one process that creates
    the claim file first."""
    name = hashlib.sha1(key.encode()).hexdigest()
    try:
        fd = os.open(claims / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(f"{os.getpid()} {key}\n")
    return True


def clear(claims: Path) -> None:
    """Remove the claim files of ``claims`` (a new set of processes: every shape is free again), and
    only those: every file of the folder went, so ``--claims out`` deleted the store lying there,
    and a subfolder stopped the run (IsADirectoryError)."""
    for f in claims.iterdir():
        if _CLAIM_NAME.fullmatch(f.name) and f.is_file():
            f.unlink(missing_ok=True)
