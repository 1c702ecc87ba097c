"""A results store read where it lies: ``opened_readonly`` opens a store file, or a gzipped one
(what collect ships: data/collect/collect.sqlite.gz) through a temporary copy, read-only."""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import tempfile
import zlib
from pathlib import Path

from .core import ResultStore
from .schema import StoreError

# What a truncated or corrupt .gz raises while it is read: EOFError is neither a ValueError nor an
# OSError, so each caller says these its own way (a one-line error, never a traceback).
GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


@contextlib.contextmanager
def opened_readonly(path: str | os.PathLike):
    """A read-only ResultStore on ``path`` (no write access needed: a shared store), closed after;
    a ``.gz`` file is decompressed to a temporary copy first, removed after. A corrupt ``.gz``
    raises one of ``GZIP_ERRORS``."""
    path = Path(path)
    if not path.name.lower().endswith(".gz"):
        with ResultStore(path, readonly=True) as store:
            yield store
        return
    with tempfile.TemporaryDirectory(prefix="gemmtune-store-") as tmp:
        dst = Path(tmp) / path.name[:-3]
        with gzip.open(path, "rb") as src, open(dst, "wb") as out:
            shutil.copyfileobj(src, out)
        try:
            store = ResultStore(dst, readonly=True)
        except StoreError as e:
            # Name the file given, not the temporary copy (gone by the time the error is read):
            # 'cannot open results store /tmp/gemmtune-store-XXXX/x.sqlite: not a SQLite database'.
            raise StoreError(str(e).replace(str(dst), str(path))) from None
        with store:
            yield store
