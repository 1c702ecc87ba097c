"""Several collectors (one per GPU) sharing one store: each shape goes to the one process that
claims it first, by creating its claim file in a shared folder (atomic on a local file system)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

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
