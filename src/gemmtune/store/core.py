"""ResultStore: open the file, record into it, read it (claims, maintenance and export are mixins)."""

from __future__ import annotations

import math
import os
import sqlite3
import time
from pathlib import Path
from typing import Iterable

from ..bench.status import Status
from .claims import Claims
from .export import Export
from .maintenance import Maintenance
from .rows import (CONTEXT_COLUMNS, ORDER_BY, STATUSES, ResultRow, RunContext, counts_as_measured, from_db,
                   row_values)
from .schema import (INSERT, LOCK_TIMEOUT_S, StoreError, check_magic, enable_wal, init_schema, open_readonly,
                     select_columns, sqlite_filename, validate_schema)


def wanted_precision(problem_key: str, fp32_precision: str | None) -> str:
    """The fp32_precision tag a row of ``problem_key`` must carry to count as measured here:
    ``fp32_precision`` when given, else the key's (gemmtune.precision.key_precision_tag: this
    process's setting for an fp32 TF32-off key, "" for any other).

    >>> wanted_precision("mm:M8-N8-K8:bf16->bf16:row.a/row.a", None), wanted_precision("k", "ieee")
    ('', 'ieee')
    """
    if fp32_precision is not None:
        return fp32_precision
    # Lazy: gemmtune.precision imports torch, which reading or exporting a store does not need.
    from ..precision import key_precision_tag

    return key_precision_tag(problem_key)


class ResultStore(Claims, Maintenance, Export):
    """The results file: open it, ``record()`` into it, query it, ``export()`` it.

    Opening creates the file (and its tables) if it does not exist; an existing
    file must be a gemmtune store of schema version ``SCHEMA_VERSION``, else
    ``StoreError`` is raised naming the path and the problem; a version-1 store is
    migrated in place (schema.migrate_v1) or, read-only, read as it is. ``readonly=True``
    (what only reads: summaries, training) opens an existing store without
    writing to it or needing write access, a store on a read-only mount included.

    Example::

        >>> with ResultStore("results.sqlite") as store:        # doctest: +SKIP
        ...     finished = store.done(ctx, problem.key)         # resume a sweep
        ...     for choice in choices:
        ...         if choice.id not in finished:
        ...             store.record(ctx, measure(choice))
        ...     store.export("results.csv")
    """

    def __init__(self, path: str | os.PathLike[str], readonly: bool = False):
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        parent = self.path.parent
        if not parent.is_dir():
            raise StoreError(f"cannot open results store {self.path}: directory {parent} does not exist")
        if self.path.is_dir():
            raise StoreError(f"cannot open results store {self.path}: it is a directory")
        check_magic(self.path)
        if readonly:
            self._conn = open_readonly(self.path)
            return
        try:
            # isolation_level=None: transactions are begun and committed
            # explicitly below, so "committed before record() returns" is
            # visible in the code rather than implied by the driver.
            conn = sqlite3.connect(sqlite_filename(self.path), timeout=LOCK_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open results store {self.path}: {e}") from None
        try:
            # An existing file's tables are checked before enable_wal, which writes the file's
            # header: another program's database given for the store was switched to WAL for good
            # by the very open that refused it. (init_schema checks again, under the write lock.)
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()}
            if tables:
                validate_schema(conn, tables, self.path)
            enable_wal(conn)
            # NORMAL in WAL mode survives a killed process (the commit is in the
            # WAL file the OS holds); only a power cut can lose the last commits.
            conn.execute("PRAGMA synchronous=NORMAL")
            init_schema(conn, self.path)
        except StoreError:
            conn.close()
            raise
        except sqlite3.Error as e:
            conn.close()
            raise StoreError(f"cannot open results store {self.path}: {e}") from None
        self._conn = conn

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"results store {self.path} is closed")
        return self._conn

    def close(self) -> None:
        """Close the file. Safe to call twice; later use raises StoreError."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> "ResultStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"ResultStore({str(self.path)!r}, {state})"

    def _write(self, values: list[tuple]) -> None:
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(INSERT, values)
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        except sqlite3.Error as e:
            raise StoreError(f"cannot write to results store {self.path}: {e}") from e

    def record(self, ctx: RunContext, row: ResultRow) -> None:
        """Insert or replace one result; committed to disk before returning.

        Raises ValueError if ``row.status`` is not one of ``STATUSES``.

        Example::

            >>> store.record(ctx, row)                          # doctest: +SKIP
        """
        self._write([row_values(ctx, row, time.time())])

    def record_many(self, ctx: RunContext, rows: Iterable[ResultRow]) -> None:
        """Insert or replace several results in one transaction: all or none.

        Every row is validated before anything is written.

        Example::

            >>> store.record_many(ctx, [row_a, row_b])          # doctest: +SKIP
        """
        now = time.time()
        values = [row_values(ctx, r, now) for r in rows]
        if values:
            self._write(values)

    def _select(self, where: str = "", params: tuple = ()) -> list[tuple[RunContext, ResultRow]]:
        try:
            # Per read: a read-only reader of a version-1 store lacks the newer columns (unless
            # a writer migrated it since), and select_columns fills them in.
            sql = f"SELECT {select_columns(self._db)} FROM results {where} ORDER BY {ORDER_BY}"
            recs = self._db.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise StoreError(f"cannot read results store {self.path}: {e}") from e
        return [from_db(r) for r in recs]

    def rows(
        self,
        ctx: RunContext | None = None,
        problem_key: str | None = None,
        status: str | None = None,
    ) -> list[tuple[RunContext, ResultRow]]:
        """All stored results matching the given filters (None = any).

        Ordered by problem_key, choice_id, then the context columns, so two
        reads of the same file always agree.

        Example::

            >>> [r.choice_id for _, r in store.rows(ctx, status="ok")]   # doctest: +SKIP
        """
        if status is not None and status not in STATUSES:
            raise ValueError(f"invalid status {status!r}; expected one of {', '.join(STATUSES)}")
        conds: list[str] = []
        params: list = []
        if ctx is not None:
            conds += [f"{c} = ?" for c in CONTEXT_COLUMNS]
            params += [getattr(ctx, c) for c in CONTEXT_COLUMNS]
        if problem_key is not None:
            conds.append("problem_key = ?")
            params.append(problem_key)
        if status is not None:
            conds.append("status = ?")
            params.append(status)
        where = f"WHERE {' AND '.join(conds)}" if conds else ""
        return self._select(where, tuple(params))

    def done(self, ctx: RunContext, problem_key: str, fp32_precision: str | None = None) -> dict[str, ResultRow]:
        """Results already recorded for this problem in this context, by choice_id.

        Every status counts as finished: a candidate that crashed or timed out
        is not retried on resume unless the caller decides to.

        ``fp32_precision``: the tag (gemmtune.precision.precision_tag) a row must carry to count;
        None takes the key's in this process (``wanted_precision``). For an fp32 problem with
        TF32 off, a row timed under the other arithmetic, or of unknown arithmetic (""), is left
        out: it is measured again, and the new row replaces it (``counts_as_measured``).

        Example::

            >>> todo = [c for c in choices if c.id not in store.done(ctx, key)]  # doctest: +SKIP
        """
        tag = wanted_precision(problem_key, fp32_precision)
        return {row.choice_id: row for _, row in self.rows(ctx, problem_key) if counts_as_measured(row, tag)}

    def count(self) -> int:
        """Number of rows in the store, over all contexts."""
        try:
            return int(self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0])
        except sqlite3.Error as e:
            raise StoreError(f"cannot read results store {self.path}: {e}") from e

    def best(self, ctx: RunContext, problem_key: str, fp32_precision: str | None = None) -> ResultRow | None:
        """The fastest ``status == "ok"`` result, or None if there is none.

        Rows without a finite positive-or-zero time are ignored even when marked
        ok; ties go to the smallest choice_id so the answer is deterministic.
        Only rows that count as measured under ``fp32_precision`` compete (as in ``done``).

        Example::

            >>> store.best(ctx, key).choice_id                  # doctest: +SKIP
            'triton:bm64-bn64-bk32'
        """
        tag = wanted_precision(problem_key, fp32_precision)
        timed = [
            row
            for _, row in self.rows(ctx, problem_key, Status.OK)
            if counts_as_measured(row, tag)
            and row.device_ms is not None and math.isfinite(row.device_ms) and row.device_ms >= 0
        ]
        return min(timed, key=lambda r: (r.device_ms, r.choice_id), default=None)
