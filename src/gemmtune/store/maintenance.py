"""ResultStore's whole-store reads and deletions, for data collection (gemmtune.collect): every
key, the counts per status, the rows timed before a change, saving and dropping rows, a
checkpoint and a consistent backup."""

from __future__ import annotations

import csv
import os
import sqlite3
from pathlib import Path
from typing import Iterable

from .rows import KEY_COLUMNS
from .schema import LOCK_TIMEOUT_S, StoreError, column, sqlite_filename

_KEYS = ", ".join(KEY_COLUMNS)


class Maintenance:
    """A mixin of ResultStore (``self._db``, ``self.path``)."""

    def _query(self, sql: str, params: tuple = ()) -> list[tuple]:
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise StoreError(f"cannot read results store {self.path}: {e}") from e

    def keys(self) -> set[tuple[str, str]]:
        """(problem key, choice id) of every row, over all contexts."""
        return {(k, c) for k, c in self._query("SELECT problem_key, choice_id FROM results")}

    def status_counts(self) -> dict[str, int]:
        """Rows per status, over all contexts."""
        return {st: int(n) for st, n in self._query("SELECT status, COUNT(*) FROM results GROUP BY status")}

    def timed_before(self, families: Iterable[str], before: float) -> list[tuple]:
        """The row keys (``KEY_COLUMNS``: the run context's columns, then problem key and choice
        id) of the rows of ``families`` recorded before unix time ``before``."""
        fams = list(families)
        if not fams:
            return []
        return self._query(f"SELECT {_KEYS} FROM results WHERE created_at < ? AND family IN "
                           f"({', '.join('?' * len(fams))}) ORDER BY problem_key, choice_id", (before, *fams))

    def cut_rows(self, below_ms: float, before: float) -> list[tuple]:
        """The row keys (``KEY_COLUMNS``) of the ok rows timed from one pass (``repeats`` 1: the
        quick timer's early cut) in under ``below_ms``, recorded before unix time ``before``."""
        return self._query(f"SELECT {_KEYS} FROM results WHERE status = 'ok' AND repeats = 1 "
                           "AND device_ms < ? AND created_at < ? ORDER BY problem_key, choice_id",
                           (below_ms, before))

    def oom_rows(self) -> list[tuple]:
        """The row keys (``KEY_COLUMNS``) of the rows that failed with a CUDA out-of-memory error:
        the GPU was full, which says nothing about the candidate (another process may have held the
        memory: the compile workers, before they compiled on meta operands)."""
        return self._query(f"SELECT {_KEYS} FROM results WHERE status != 'ok' "
                           "AND (reason LIKE 'OutOfMemoryError%' OR reason LIKE '%CUDA out of memory%') "
                           "ORDER BY problem_key, choice_id")

    def other_precision_rows(self, fp32_precision: str) -> list[tuple]:
        """The row keys (``KEY_COLUMNS``) of the rows of fp32 TF32-off problems (key dtype part
        ``fp32->``; ``fp32+tf32->`` is TF32 allowed) not timed under ``fp32_precision`` ("tf32x3"
        or "ieee"), legacy "" rows included: what ``ResultStore.done`` leaves out, so a tune or
        collect measures them again."""
        # A version-1 store read as it is (read-only: the dry run's --resume-from) has no such
        # column: its rows are all of unknown arithmetic, "".
        tag = column(self._db, "fp32_precision")
        return self._query(f"SELECT {_KEYS} FROM results WHERE problem_key LIKE '%:fp32->%' "
                           f"AND {tag} != ? ORDER BY problem_key, choice_id", (fp32_precision,))

    def _keyed(self, keys: Iterable[tuple]) -> str:
        """Fill a temporary table with row ``keys`` and return the condition that selects their
        rows. A key is a whole row key (``KEY_COLUMNS``, as the queries above return them: that
        run context's row only) or a (problem key, choice id) pair (that pair in every context).
        A temporary table because the primary key starts with the run context, so per-key lookups
        would scan the table."""
        keys = list(keys)
        pairs = [k for k in keys if len(k) == 2]
        full = [tuple(k) for k in keys if len(k) == len(KEY_COLUMNS)]
        if len(pairs) + len(full) != len(keys):
            raise ValueError(f"row keys are (problem key, choice id) pairs or {len(KEY_COLUMNS)}-tuples of "
                             f"{KEY_COLUMNS}; got {next(k for k in keys if len(k) not in (2, len(KEY_COLUMNS)))!r}")
        conn = self._db
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS keys (problem_key TEXT, choice_id TEXT, "
                     "PRIMARY KEY (problem_key, choice_id))")
        conn.execute("DELETE FROM temp.keys")
        conn.executemany("INSERT OR IGNORE INTO temp.keys VALUES (?, ?)", pairs)
        conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS row_keys ({_KEYS}, PRIMARY KEY ({_KEYS}))")
        conn.execute("DELETE FROM temp.row_keys")
        conn.executemany(f"INSERT OR IGNORE INTO temp.row_keys VALUES ({', '.join('?' * len(KEY_COLUMNS))})", full)
        return (f"((problem_key, choice_id) IN (SELECT problem_key, choice_id FROM temp.keys) "
                f"OR ({_KEYS}) IN (SELECT {_KEYS} FROM temp.row_keys))")

    def save_rows(self, keys: Iterable[tuple], path: str | os.PathLike[str]) -> int:
        """Write the rows named by ``keys`` (as ``drop`` takes them), every column, to a gzipped
        CSV (what a ``drop`` removes can be kept); returns how many. An existing file of the same
        columns is appended to (another gzip member, no second header); one of other columns is a
        StoreError."""
        import gzip

        cur = self._db.execute(f"SELECT * FROM results WHERE {self._keyed(keys)}")
        cols, rows = [d[0] for d in cur.description], cur.fetchall()
        # Appended, not written anew: the rows an earlier run kept here were dropped from the store,
        # and ``collect --drop-oom`` run again into the same folder replaced this file, losing them.
        path = Path(path)
        old = None
        if path.is_file() and path.stat().st_size > 0:
            try:
                with gzip.open(path, "rt", newline="") as f:
                    old = next(csv.reader(f), None)
            except (EOFError, OSError, UnicodeDecodeError) as e:  # gzip.BadGzipFile is an OSError
                raise StoreError(f"cannot keep the rows in {path}: {e}; move it away first") from None
            if old != cols:
                raise StoreError(f"cannot keep the rows in {path}: it holds other columns ({old}); "
                                 "move it away first")
        with gzip.open(path, "at" if old else "wt", newline="") as f:
            w = csv.writer(f)
            if not old:
                w.writerow(cols)
            w.writerows(rows)
        return len(rows)

    def drop(self, keys: Iterable[tuple]) -> int:
        """Delete the rows named by ``keys`` (a later run measures them again) and give their
        space back; returns how many. A whole row key (``KEY_COLUMNS``, as ``timed_before``,
        ``cut_rows`` and ``oom_rows`` return them) names that run context's row alone; a
        (problem key, choice id) pair names the pair in every context."""
        conn = self._db
        # StoreError naming the file, as record() raises: a store another process was writing
        # ended ``collect --drop-oom`` with sqlite3's 'database is locked' traceback.
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                n = conn.execute(f"DELETE FROM results WHERE {self._keyed(keys)}").rowcount
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            raise StoreError(f"cannot write to results store {self.path}: {e}") from None
        try:
            conn.execute("VACUUM")  # an exported store should not carry the freed pages
        except sqlite3.Error as e:
            raise StoreError(f"results store {self.path}: {n} rows dropped, but giving their space back "
                             f"failed: {e}") from None
        return n

    def checkpoint(self) -> None:
        """Move the write-ahead log into the file, so the file alone holds every row; StoreError
        when it cannot (another connection holds an older snapshot or the write lock past the
        lock timeout)."""
        try:
            busy, log, moved = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error as e:
            raise StoreError(f"cannot checkpoint results store {self.path}: {e}") from None
        # SQLite reports a checkpoint it could not finish in this row, not as an error: ignored,
        # collect's export gzipped the file alone as if it held every row, and it was not even a
        # readable database ('database disk image is malformed').
        if busy or moved != log:
            raise StoreError(f"results store {self.path}: the checkpoint could not move the whole write-ahead "
                             f"log into the file ({moved} of {log} pages; another connection is reading or "
                             "writing it): the file alone does not hold every row")

    def backup(self, path: str | os.PathLike[str]) -> Path:
        """A consistent copy of the store at ``path``, while others may write it. Its own
        connection: callable from any thread (a watchdog's)."""
        src, dst = (sqlite3.connect(sqlite_filename(self.path), timeout=LOCK_TIMEOUT_S),
                    sqlite3.connect(sqlite_filename(path)))
        try:
            src.backup(dst)
        finally:
            src.close()
            dst.close()
        return Path(path)
