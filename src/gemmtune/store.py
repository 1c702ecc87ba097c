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

import csv
import dataclasses
import math
import operator
import os
import sqlite3
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Iterable

from .bench.measure import Status

__all__ = [
    "SCHEMA_VERSION",
    "STATUSES",
    "StoreError",
    "RunContext",
    "ResultRow",
    "ResultStore",
]

SCHEMA_VERSION = 1

# The status words rows hold: bench.measure.Status's values.
STATUSES = tuple(s.value for s in Status)

# Waiting beats failing: a second tuner process appending to the same file
# should block for a moment, not lose its measurement.
_LOCK_TIMEOUT_S = 30.0

_SQLITE_MAGIC = b"SQLite format 3\x00"


class StoreError(ValueError):
    """The results file cannot be used (missing directory, not SQLite, wrong schema, ...)."""


@dataclass(frozen=True)
class RunContext:
    """Where and with what software a result was measured.

    Part of every row's key: a result is only reused under an identical context.

    Example::

        >>> ctx = RunContext.current("NVIDIA H100 80GB HBM3", "9.0")  # doctest: +SKIP
    """

    device_name: str
    capability: str
    torch_version: str
    triton_version: str
    gemmtune_version: str

    @classmethod
    def current(cls, device_name: str, capability: str) -> "RunContext":
        """Context for this process: the given device plus the installed versions.

        torch and triton are imported here rather than at module import so that
        reading or exporting a store stays cheap.
        """
        import torch
        import triton

        try:
            # Lazy: gemmtune/__init__ may import this module, and a broken or
            # half-installed package should not stop results being written.
            from gemmtune import __version__ as gemmtune_version
        except Exception:
            gemmtune_version = "0+unknown"
        return cls(
            device_name=str(device_name),
            capability=str(capability),
            torch_version=str(torch.__version__),
            triton_version=str(triton.__version__),
            gemmtune_version=str(gemmtune_version),
        )


# kw_only: with this many same-typed fields (m/n/k, three float timings) a
# positional call would silently swap values; keywords make that impossible.
@dataclass(frozen=True, kw_only=True)
class ResultRow:
    """One measured (or failed) candidate for one problem.

    ``device_ms`` is None when the candidate produced no timing (it failed to
    compile, crashed, ...); ``reason`` then says why. ``spread`` is the relative
    spread of the ``repeats`` timings. ``created_at`` is unix time; left at 0 the
    store fills in the time of recording. Fields are keyword-only.

    SQLite stores a NaN float as NULL, so a NaN timing reads back as None;
    ``inf`` round-trips unchanged.

    Example::

        >>> ResultRow(problem_key="mm:M32-N32-K64:bf16->bf16:row.a/row.a",
        ...           choice_id="torch:eager", family="torch", status="ok",
        ...           device_ms=0.02, eager_ms=0.02, rel_err=0.0, m=32, n=32, k=64,
        ...           dtype="bfloat16", out_dtype="bfloat16", layout="row/row",
        ...           aligned=True).status
        'ok'
    """

    problem_key: str
    choice_id: str
    family: str
    status: str
    device_ms: float | None
    eager_ms: float | None
    rel_err: float | None
    reason: str = ""
    m: int
    n: int
    k: int
    dtype: str
    out_dtype: str
    layout: str
    aligned: bool
    params_json: str = "{}"
    repeats: int | None = None
    spread: float | None = None
    created_at: float = 0


CONTEXT_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(RunContext))
ROW_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(ResultRow))
COLUMNS: tuple[str, ...] = CONTEXT_COLUMNS + ROW_COLUMNS
_INT_FIELDS = ("m", "n", "k", "repeats")
_FLOAT_FIELDS = ("device_ms", "eager_ms", "rel_err", "spread", "created_at")
_KEY_COLUMNS = CONTEXT_COLUMNS + ("problem_key", "choice_id")
_ORDER_BY = ", ".join(("problem_key", "choice_id") + CONTEXT_COLUMNS)

_SQL_TYPES = {
    "device_ms": "REAL", "eager_ms": "REAL", "rel_err": "REAL", "spread": "REAL",
    "created_at": "REAL NOT NULL",
    "m": "INTEGER NOT NULL", "n": "INTEGER NOT NULL", "k": "INTEGER NOT NULL",
    "aligned": "INTEGER NOT NULL", "repeats": "INTEGER",
}

_CREATE_RESULTS = (
    "CREATE TABLE IF NOT EXISTS results (\n    "
    + ",\n    ".join(f"{c} {_SQL_TYPES.get(c, 'TEXT NOT NULL')}" for c in COLUMNS)
    + f",\n    PRIMARY KEY ({', '.join(_KEY_COLUMNS)})\n)"
)
_CREATE_META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
# Which tuner is measuring what right now, so that tuners sharing a store split the work
# instead of measuring everything twice (see ResultStore.claim). Not part of the results: an
# older store gets the table when first opened, and a store without it is still valid.
_CREATE_CLAIMS = ("CREATE TABLE IF NOT EXISTS claims (context TEXT NOT NULL, problem_key TEXT NOT NULL, "
                  "choice_id TEXT NOT NULL, owner TEXT NOT NULL, expires_at REAL NOT NULL, "
                  "PRIMARY KEY (context, problem_key, choice_id))")
# INSERT OR REPLACE gives the upsert: same context + problem + choice => one row.
_INSERT = (
    f"INSERT OR REPLACE INTO results ({', '.join(COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in COLUMNS)})"
)


def _row_values(ctx: RunContext, row: ResultRow, now: float) -> tuple:
    if not isinstance(ctx, RunContext):
        raise TypeError(f"ctx must be a RunContext, not {type(ctx).__name__}")
    if not isinstance(row, ResultRow):
        raise TypeError(f"row must be a ResultRow, not {type(row).__name__}")
    if row.status not in STATUSES:
        raise ValueError(
            f"invalid status {row.status!r} for {row.problem_key} / {row.choice_id}; "
            f"expected one of {', '.join(STATUSES)}"
        )
    values = asdict(ctx) | asdict(row)
    # sqlite3 cannot bind numpy / torch scalars (np.float32, np.int64, ...),
    # which measurement code naturally produces; convert them here so the
    # failure is not a confusing "Error binding parameter" at write time.
    for name in _INT_FIELDS:
        if values[name] is not None:
            values[name] = operator.index(values[name])
    for name in _FLOAT_FIELDS:
        if values[name] is not None:
            values[name] = float(values[name])
    values["aligned"] = int(bool(row.aligned))
    if not row.created_at:
        values["created_at"] = now
    return tuple(values[c] for c in COLUMNS)


def _from_db(rec: tuple) -> tuple[RunContext, ResultRow]:
    nctx = len(CONTEXT_COLUMNS)
    ctx = RunContext(*rec[:nctx])
    kw = dict(zip(ROW_COLUMNS, rec[nctx:]))
    kw["aligned"] = bool(kw["aligned"])
    return ctx, ResultRow(**kw)


def _enable_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL, waiting for other connections as every other statement does.

    SQLite answers a journal-mode change that races another connection opening the same
    new file with an immediate "database is locked": its busy handler is not consulted
    there. Seen with two collectors (or threads) creating one store at once: 4 of 100
    three-thread opens failed. So retry until the store's usual lock timeout."""
    deadline = time.monotonic() + _LOCK_TIMEOUT_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def claim_owner() -> str:
    """A tuner's name in the claims table: host, process id and a random part."""
    import socket
    import uuid
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def owner_alive(owner: str) -> bool:
    """False when ``owner`` (a ``claim_owner`` name) is a process of this host that has exited:
    its claims are void at once (a tuner killed with -9 and run again must not wait for its own
    dead claims to expire). Owners on other hosts, or of an unknown form, count as alive."""
    import socket
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return True
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def _context_text(ctx: RunContext) -> str:
    return "|".join(str(getattr(ctx, f.name)) for f in dataclasses.fields(ctx))


class ResultStore:
    """The results file: open it, ``record()`` into it, query it, ``export()`` it.

    Opening creates the file (and its tables) if it does not exist; an existing
    file must be a gemmtune store of schema version ``SCHEMA_VERSION``, else
    ``StoreError`` is raised naming the path and the problem.

    Example::

        >>> with ResultStore("results.sqlite") as store:        # doctest: +SKIP
        ...     finished = store.done(ctx, problem.key)         # resume a sweep
        ...     for choice in choices:
        ...         if choice.id not in finished:
        ...             store.record(ctx, measure(choice))
        ...     store.export("results.csv")
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        parent = self.path.parent
        if not parent.is_dir():
            raise StoreError(f"cannot open results store {self.path}: directory {parent} does not exist")
        if self.path.is_dir():
            raise StoreError(f"cannot open results store {self.path}: it is a directory")
        self._check_magic()
        try:
            # isolation_level=None: transactions are begun and committed
            # explicitly below, so "committed before record() returns" is
            # visible in the code rather than implied by the driver.
            conn = sqlite3.connect(str(self.path), timeout=_LOCK_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open results store {self.path}: {e}") from None
        try:
            _enable_wal(conn)
            # NORMAL in WAL mode survives a killed process (the commit is in the
            # WAL file the OS holds); only a power cut can lose the last commits.
            conn.execute("PRAGMA synchronous=NORMAL")
            self._init_schema(conn)
        except StoreError:
            conn.close()
            raise
        except sqlite3.Error as e:
            conn.close()
            raise StoreError(f"cannot open results store {self.path}: {e}") from None
        self._conn = conn

    def _check_magic(self) -> None:
        # sqlite3 only notices a foreign file on first use, and for short files
        # not at all; checking the header gives one clear message for all cases.
        try:
            with open(self.path, "rb") as f:
                head = f.read(len(_SQLITE_MAGIC))
        except FileNotFoundError:
            return
        except OSError as e:
            raise StoreError(f"cannot open results store {self.path}: {e}") from None
        if head and head != _SQLITE_MAGIC:
            raise StoreError(f"cannot open results store {self.path}: not a SQLite database")

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        # IMMEDIATE takes the write lock up front, so two processes creating the
        # same new file cannot both decide it is empty and race on CREATE.
        conn.execute("BEGIN IMMEDIATE")
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not tables:
                conn.execute(_CREATE_RESULTS)
                conn.execute(_CREATE_META)
                conn.execute(_CREATE_CLAIMS)
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )
                conn.execute("COMMIT")
                return
            self._validate_schema(conn, tables)
            if "claims" not in tables:
                conn.execute(_CREATE_CLAIMS)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _validate_schema(self, conn: sqlite3.Connection, tables: set[str]) -> None:
        where = f"results store {self.path}"
        if "meta" not in tables:
            raise StoreError(f"{where} is a SQLite database but not a gemmtune store: no 'meta' table")
        got = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if got is None:
            raise StoreError(f"{where} has no schema_version in its 'meta' table")
        try:
            version = int(got[0])
        except (TypeError, ValueError):
            raise StoreError(f"{where} has an unreadable schema_version {got[0]!r}") from None
        if version != SCHEMA_VERSION:
            raise StoreError(
                f"{where} has schema version {version}, this gemmtune reads version "
                f"{SCHEMA_VERSION}; export it with the gemmtune that wrote it or start a new file"
            )
        if "results" not in tables:
            raise StoreError(f"{where} lacks the 'results' table")
        have = {r[1] for r in conn.execute("PRAGMA table_info(results)")}
        missing = [c for c in COLUMNS if c not in have]
        if missing:
            raise StoreError(f"{where}: table 'results' lacks columns {', '.join(missing)}")

    # -- plumbing ---------------------------------------------------------

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
                db.executemany(_INSERT, values)
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        except sqlite3.Error as e:
            raise StoreError(f"cannot write to results store {self.path}: {e}") from e

    # -- writing ----------------------------------------------------------

    def record(self, ctx: RunContext, row: ResultRow) -> None:
        """Insert or replace one result; committed to disk before returning.

        Raises ValueError if ``row.status`` is not one of ``STATUSES``.

        Example::

            >>> store.record(ctx, row)                          # doctest: +SKIP
        """
        self._write([_row_values(ctx, row, time.time())])

    def record_many(self, ctx: RunContext, rows: Iterable[ResultRow]) -> None:
        """Insert or replace several results in one transaction: all or none.

        Every row is validated before anything is written.

        Example::

            >>> store.record_many(ctx, [row_a, row_b])          # doctest: +SKIP
        """
        now = time.time()
        values = [_row_values(ctx, r, now) for r in rows]
        if values:
            self._write(values)

    # -- reading ----------------------------------------------------------

    def _select(self, where: str = "", params: tuple = ()) -> list[tuple[RunContext, ResultRow]]:
        sql = f"SELECT {', '.join(COLUMNS)} FROM results {where} ORDER BY {_ORDER_BY}"
        try:
            recs = self._db.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise StoreError(f"cannot read results store {self.path}: {e}") from e
        return [_from_db(r) for r in recs]

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

    def done(self, ctx: RunContext, problem_key: str) -> dict[str, ResultRow]:
        """Results already recorded for this problem in this context, by choice_id.

        Every status counts as finished: a candidate that crashed or timed out
        is not retried on resume unless the caller decides to.

        Example::

            >>> todo = [c for c in choices if c.id not in store.done(ctx, key)]  # doctest: +SKIP
        """
        return {row.choice_id: row for _, row in self.rows(ctx, problem_key)}

    def claim(self, ctx: RunContext, problem_key: str, choice_ids: Iterable[str], owner: str,
              ttl_s: float, redo_statuses: Iterable[str] = ()) -> list[str]:
        """Claim for ``owner`` the choices of ``choice_ids`` that no result in this context
        finished (a status in ``redo_statuses`` does not count as finished) and that no other
        owner holds; return every one of them that ``owner`` now holds, in the given order.

        One transaction with the write lock, so two tuners never both get one choice. A claim
        lasts ``ttl_s`` seconds (the longest its owner can take to measure what it claimed);
        an expired one, left by a tuner that died, can be claimed again.

        Example::

            >>> mine = store.claim(ctx, p.key, [c.id for c in todo], owner, ttl_s=600)  # doctest: +SKIP
        """
        ids = list(choice_ids)
        if not ids:
            return []
        ck = _context_text(ctx)
        now = time.time()
        redo = set(redo_statuses)
        conn = self._db
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM claims WHERE expires_at < ?", (now,))
            for (o,) in conn.execute("SELECT DISTINCT owner FROM claims WHERE context = ? AND problem_key = ?",
                                     (ck, problem_key)).fetchall():
                if o != owner and not owner_alive(o):
                    conn.execute("DELETE FROM claims WHERE owner = ?", (o,))
            done = {r.choice_id for r in self.done(ctx, problem_key).values() if r.status not in redo}
            held = dict(conn.execute("SELECT choice_id, owner FROM claims WHERE context = ? AND problem_key = ?",
                                     (ck, problem_key)).fetchall())
            mine = []
            for cid in ids:
                if cid in done:
                    continue
                o = held.get(cid)
                if o is None:
                    conn.execute("INSERT INTO claims VALUES (?, ?, ?, ?, ?)", (ck, problem_key, cid, owner, now + ttl_s))
                elif o != owner:
                    continue
                mine.append(cid)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return mine

    def release(self, ctx: RunContext, problem_key: str, owner: str) -> None:
        """Drop ``owner``'s claims on one problem (its results are in, or it gave up)."""
        conn = self._db
        conn.execute("DELETE FROM claims WHERE context = ? AND problem_key = ? AND owner = ?",
                     (_context_text(ctx), problem_key, owner))

    def count(self) -> int:
        """Number of rows in the store, over all contexts."""
        try:
            return int(self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0])
        except sqlite3.Error as e:
            raise StoreError(f"cannot read results store {self.path}: {e}") from e

    def best(self, ctx: RunContext, problem_key: str) -> ResultRow | None:
        """The fastest ``status == "ok"`` result, or None if there is none.

        Rows without a finite positive-or-zero time are ignored even when marked
        ok; ties go to the smallest choice_id so the answer is deterministic.

        Example::

            >>> store.best(ctx, key).choice_id                  # doctest: +SKIP
            'triton:bm64-bn64-bk32'
        """
        timed = [
            row
            for _, row in self.rows(ctx, problem_key, Status.OK)
            if row.device_ms is not None and math.isfinite(row.device_ms) and row.device_ms >= 0
        ]
        return min(timed, key=lambda r: (r.device_ms, r.choice_id), default=None)

    # -- maintenance: whole-store reads and deletions (data collection) ---------

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

    def timed_before(self, families: Iterable[str], before: float) -> list[tuple[str, str]]:
        """(problem key, choice id) of the rows of ``families`` recorded before unix time ``before``."""
        fams = list(families)
        if not fams:
            return []
        return self._query(f"SELECT problem_key, choice_id FROM results WHERE created_at < ? AND family IN "
                           f"({', '.join('?' * len(fams))}) ORDER BY problem_key, choice_id", (before, *fams))

    def cut_rows(self, below_ms: float, before: float) -> list[tuple[str, str]]:
        """(problem key, choice id) of the ok rows timed from one pass (``repeats`` 1: the quick
        timer's early cut) in under ``below_ms``, recorded before unix time ``before``."""
        return self._query("SELECT problem_key, choice_id FROM results WHERE status = 'ok' AND repeats = 1 "
                           "AND device_ms < ? AND created_at < ? ORDER BY problem_key, choice_id",
                           (below_ms, before))

    def _keyed(self, keys: Iterable[tuple[str, str]]) -> str:
        """Fill a temporary table with ``keys`` and return the condition that selects their rows:
        the primary key starts with the run context, so per-key lookups would scan the table."""
        conn = self._db
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS keys (problem_key TEXT, choice_id TEXT, "
                     "PRIMARY KEY (problem_key, choice_id))")
        conn.execute("DELETE FROM temp.keys")
        conn.executemany("INSERT OR IGNORE INTO temp.keys VALUES (?, ?)", list(keys))
        return "(problem_key, choice_id) IN (SELECT problem_key, choice_id FROM temp.keys)"

    def save_rows(self, keys: Iterable[tuple[str, str]], path: str | os.PathLike[str]) -> int:
        """Write the rows named by (problem key, choice id), every column, to a gzipped CSV
        (what a ``drop`` removes can be kept); returns how many."""
        import gzip

        cur = self._db.execute(f"SELECT * FROM results WHERE {self._keyed(keys)}")
        cols, rows = [d[0] for d in cur.description], cur.fetchall()
        with gzip.open(path, "wt", newline="") as f:
            w = csv.writer(f)
            w.writerow(cols)
            w.writerows(rows)
        return len(rows)

    def drop(self, keys: Iterable[tuple[str, str]]) -> int:
        """Delete the rows named by (problem key, choice id), in every context (a later run
        measures them again), and give their space back; returns how many."""
        conn = self._db
        conn.execute("BEGIN IMMEDIATE")
        try:
            n = conn.execute(f"DELETE FROM results WHERE {self._keyed(keys)}").rowcount
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("VACUUM")  # an exported store should not carry the freed pages
        return n

    def checkpoint(self) -> None:
        """Move the write-ahead log into the file, so the file alone holds every row."""
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def backup(self, path: str | os.PathLike[str]) -> Path:
        """A consistent copy of the store at ``path``, while others may write it. Its own
        connection: callable from any thread (a watchdog's)."""
        src, dst = sqlite3.connect(str(self.path), timeout=_LOCK_TIMEOUT_S), sqlite3.connect(str(path))
        try:
            src.backup(dst)
        finally:
            src.close()
            dst.close()
        return Path(path)

    # -- export -----------------------------------------------------------

    def export(self, path: str | os.PathLike[str]) -> int:
        """Write every row to ``path`` (.csv or .parquet); returns the row count.

        Columns are the context columns followed by the ResultRow fields. The
        file is written beside the target and renamed into place, so a reader
        never sees a half-written export.

        Example::

            >>> store.export("results.csv")                     # doctest: +SKIP
            1234
        """
        out = Path(path)
        suffix = out.suffix.lower()
        if suffix not in (".csv", ".parquet"):
            raise StoreError(f"cannot export to {out}: unknown suffix {out.suffix!r}; use .csv or .parquet")
        if not out.parent.is_dir():
            raise StoreError(f"cannot export to {out}: directory {out.parent} does not exist")
        records = [tuple(asdict(c).values()) + tuple(asdict(r).values()) for c, r in self.rows()]
        tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
        try:
            if suffix == ".csv":
                self._write_csv(tmp, records)
            else:
                self._write_parquet(tmp, out, records)
            os.replace(tmp, out)
        finally:
            tmp.unlink(missing_ok=True)
        return len(records)

    @staticmethod
    def _write_csv(tmp: Path, records: list[tuple]) -> None:
        # csv writes None as an empty field and floats with repr(), which reads
        # back to the identical float.
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(COLUMNS)
            w.writerows(records)

    @staticmethod
    def _write_parquet(tmp: Path, out: Path, records: list[tuple]) -> None:
        hint = f"cannot export to {out}: parquet needs pandas and pyarrow (pip install pandas pyarrow)"
        try:
            import pandas as pd
        except ImportError:
            raise StoreError(hint) from None
        df = pd.DataFrame.from_records(records, columns=list(COLUMNS))
        # Explicit dtypes: an all-None column would otherwise become 'object'
        # and a nullable int column would turn into floats.
        dtypes = {c: "string" for c in COLUMNS}
        dtypes.update({c: "float64" for c in _FLOAT_FIELDS})
        dtypes.update({"m": "int64", "n": "int64", "k": "int64", "aligned": "bool", "repeats": "Int64"})
        df = df.astype(dtypes)
        try:
            df.to_parquet(tmp, index=False)
        except ImportError:
            raise StoreError(hint) from None
