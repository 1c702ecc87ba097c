"""ResultStore: the SQLite file every measurement of the tuner lands in.

One row per (run context, problem, candidate). The run context (GPU name,
compute capability, torch / triton / gemmtune versions) is part of the primary
key, so results measured under another software stack are never mistaken for
current ones, and re-measuring the same candidate in the same context replaces
the old row instead of adding a duplicate.

Every ``record()`` is committed before it returns: a tuner killed with
``kill -9`` half-way through a sweep loses nothing it had already recorded, and
``done()`` tells the next run which candidates it can skip.

Example::

    >>> from gemmtune.store import ResultStore, ResultRow, RunContext
    >>> ctx = RunContext("NVIDIA H100", "9.0", "2.6.0", "3.2.0", "0.1.0")
    >>> row = ResultRow(problem_key="mm:M32-N32-K64:bf16->bf16:row.a/row.a",
    ...                 choice_id="triton:bm64-bn64-bk32", family="triton",
    ...                 status="ok", device_ms=0.012, eager_ms=0.015, rel_err=1e-3,
    ...                 m=32, n=32, k=64, dtype="bfloat16", out_dtype="bfloat16",
    ...                 layout="row/row", aligned=True)
    >>> with ResultStore("results.sqlite") as store:   # doctest: +SKIP
    ...     store.record(ctx, row)
    ...     store.best(ctx, row.problem_key).choice_id
    'triton:bm64-bn64-bk32'

Concurrency: open one ``ResultStore`` per thread or process (a connection must
stay in the thread that made it). Several processes may append to the same
file; the file runs in WAL mode and connections wait up to 30 s for a lock
instead of failing with "database is locked".

Only the standard library is needed; ``export("x.parquet")`` additionally needs
``pandas`` and ``pyarrow``.
"""

from __future__ import annotations

from .claims import claim_owner, owner_alive
from .core import ResultStore
from .files import GZIP_ERRORS, opened_readonly
from .rows import COLUMNS, CONTEXT_COLUMNS, ROW_COLUMNS, STATUSES, ResultRow, RunContext
from .schema import SCHEMA_VERSION, StoreError

__all__ = [
    "SCHEMA_VERSION",
    "STATUSES",
    "StoreError",
    "RunContext",
    "ResultRow",
    "ResultStore",
    "COLUMNS",
    "CONTEXT_COLUMNS",
    "ROW_COLUMNS",
    "claim_owner",
    "owner_alive",
    "GZIP_ERRORS",
    "opened_readonly",
]
