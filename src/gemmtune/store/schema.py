"""The store's file: its tables, schema version and checks, WAL mode and the lock timeout."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from .rows import COLUMNS, KEY_COLUMNS


# Version 2 added results.fp32_precision (which fp32 arithmetic timed a row). A version-1 store
# is migrated in place when opened for writing (``migrate_v1``) and read as it is when opened
# read-only, its rows tagged "" (unknown).
SCHEMA_VERSION = 2

# The columns each version after 1 added, with their SQL type: what ``migrate_v1`` adds and what a
# read-only reader of a version-1 store fills in ("" for both: NOT NULL DEFAULT '').
ADDED_IN_V2 = {"fp32_precision": "TEXT NOT NULL DEFAULT ''"}

# Waiting beats failing: a second tuner process appending to the same file
# should block for a moment, not lose its measurement.
LOCK_TIMEOUT_S = 30.0

SQLITE_MAGIC = b"SQLite format 3\x00"


class StoreError(ValueError):
    """The results file cannot be used (missing directory, not SQLite, wrong schema, ...)."""


SQL_TYPES = {
    "device_ms": "REAL", "eager_ms": "REAL", "rel_err": "REAL", "spread": "REAL",
    "created_at": "REAL NOT NULL",
    "m": "INTEGER NOT NULL", "n": "INTEGER NOT NULL", "k": "INTEGER NOT NULL",
    "aligned": "INTEGER NOT NULL", "repeats": "INTEGER",
} | ADDED_IN_V2

CREATE_RESULTS = (
    "CREATE TABLE IF NOT EXISTS results (\n    "
    + ",\n    ".join(f"{c} {SQL_TYPES.get(c, 'TEXT NOT NULL')}" for c in COLUMNS)
    + f",\n    PRIMARY KEY ({', '.join(KEY_COLUMNS)})\n)"
)

CREATE_META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"

# Which tuner is measuring what right now, so that tuners sharing a store split the work
# instead of measuring everything twice (see ResultStore.claim). Not part of the results: an
# older store gets the table when first opened, and a store without it is still valid.
CREATE_CLAIMS = ("CREATE TABLE IF NOT EXISTS claims (context TEXT NOT NULL, problem_key TEXT NOT NULL, "
                  "choice_id TEXT NOT NULL, owner TEXT NOT NULL, expires_at REAL NOT NULL, "
                  "PRIMARY KEY (context, problem_key, choice_id))")

# INSERT OR REPLACE gives the upsert: same context + problem + choice => one row.
INSERT = (
    f"INSERT OR REPLACE INTO results ({', '.join(COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in COLUMNS)})"
)


def sqlite_filename(path: str | os.PathLike[str]) -> str:
    """``path`` as sqlite3.connect must be given it to open that very file: absolute. This
    SQLite may read a name that starts with ``file:`` as a URI (SQLITE_USE_URI): the store
    ``file:r.sqlite`` opened ``r.sqlite``, and ``file:r.sqlite?mode=memory`` a database in memory
    that lost every result when closed."""
    return os.path.abspath(os.fspath(path))


def enable_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL, waiting for other connections as every other statement does.

    SQLite answers a journal-mode change that races another connection opening the same
    new file with an immediate "database is locked": its busy handler is not consulted
    there. Seen with two collectors (or threads) creating one store at once: 4 of 100
    three-thread opens failed. So retry until the store's usual lock timeout."""
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def check_magic(path: Path) -> None:
    # sqlite3 only notices a foreign file on first use, and for short files
    # not at all; checking the header gives one clear message for all cases.
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except FileNotFoundError:
        return
    except OSError as e:
        raise StoreError(f"cannot open results store {path}: {e}") from None
    if head and head != SQLITE_MAGIC:
        raise StoreError(f"cannot open results store {path}: not a SQLite database")


def open_readonly(path: Path) -> sqlite3.Connection:
    """An existing store, opened for reading only (StoreError when it is not one). A read-write
    opening switches the file to WAL and takes the write lock to check its tables (and add the
    claims table): a summary or a training run on a store the user may not write (another user's,
    a read-only mount) failed with 'attempt to write a readonly database' or 'unable to open
    database file'. ``mode=ro`` reads a store that others may be writing; where SQLite cannot make
    a WAL store's shared-memory file beside it either (a read-only folder), ``immutable=1``: the
    file is read as it is, which nothing can change there; unless a write-ahead log lies beside it,
    whose rows that would leave out (StoreError naming it)."""
    if not path.is_file():
        raise StoreError(f"no results store at {path}")
    uri = Path(sqlite_filename(path)).as_uri()  # percent-encoded: '?' or '#' in a name stays in the name
    err: sqlite3.Error | None = None
    wal = Path(f"{sqlite_filename(path)}-wal")
    for query in ("?mode=ro", "?mode=ro&immutable=1"):
        if "immutable" in query and wal.is_file() and wal.stat().st_size > 0:
            # immutable=1 reads the file without its write-ahead log: every commit since the last
            # checkpoint (a copy of a running store, a writer killed before its checkpoint) was
            # left out, and the reader saw fewer rows without a word.
            raise StoreError(f"cannot open results store {path}: {err}; its write-ahead log {wal} holds "
                             "results that cannot be read without write access to the folder (open it "
                             "once for writing, or copy the store with its -wal file somewhere writable)")
        conn = sqlite3.connect(uri + query, uri=True, timeout=LOCK_TIMEOUT_S, isolation_level=None)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not tables:
                raise StoreError(f"results store {path} is empty: no tables (not a gemmtune store)")
            validate_schema(conn, tables, path)
            return conn
        except StoreError:
            conn.close()
            raise
        except sqlite3.OperationalError as e:
            conn.close()
            if "unable to open" not in str(e):  # busy, locked...: immutable would read a stale file
                raise StoreError(f"cannot open results store {path}: {e}") from None
            err = e  # no shared-memory file can be made beside it
        except sqlite3.Error as e:
            conn.close()
            raise StoreError(f"cannot open results store {path}: {e}") from None
    raise StoreError(f"cannot open results store {path}: {err}")


def select_columns(conn: sqlite3.Connection) -> str:
    """The SELECT list of ``COLUMNS`` for this connection's results table: a column a version-1
    store lacks (one opened read-only, never migrated) reads as its default, ''."""
    have = {r[1] for r in conn.execute("PRAGMA table_info(results)")}
    return ", ".join(c if c in have or c not in ADDED_IN_V2 else f"'' AS {c}" for c in COLUMNS)


def column(conn: sqlite3.Connection, name: str) -> str:
    """``name`` as an SQL expression on this connection's results table: the column, or its
    default ('') where a version-1 store opened read-only lacks it (as ``select_columns``)."""
    if name not in ADDED_IN_V2:
        return name
    have = {r[1] for r in conn.execute("PRAGMA table_info(results)")}
    return name if name in have else "''"


def migrate_v1(conn: sqlite3.Connection) -> None:
    """Bring a version-1 store to version 2 in place, losslessly: add the new columns (every
    existing row gets '': which fp32 arithmetic timed it is unknown) and bump schema_version.
    The caller holds the write transaction (``init_schema``): all of it happens or none."""
    have = {r[1] for r in conn.execute("PRAGMA table_info(results)")}
    for col, sql_type in ADDED_IN_V2.items():
        if col not in have:  # added by hand already: keep its values
            conn.execute(f"ALTER TABLE results ADD COLUMN {col} {sql_type}")
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))


def init_schema(conn: sqlite3.Connection, path: Path) -> None:
    # IMMEDIATE takes the write lock up front, so two processes creating the
    # same new file cannot both decide it is empty and race on CREATE.
    conn.execute("BEGIN IMMEDIATE")
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            conn.execute(CREATE_RESULTS)
            conn.execute(CREATE_META)
            conn.execute(CREATE_CLAIMS)
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )
            conn.execute("COMMIT")
            return
        if validate_schema(conn, tables, path) == 1:
            migrate_v1(conn)
        if "claims" not in tables:
            conn.execute(CREATE_CLAIMS)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def validate_schema(conn: sqlite3.Connection, tables: set[str], path: Path) -> int:
    """Check that the file is a gemmtune store this gemmtune reads (version 1 or
    ``SCHEMA_VERSION``) with every column of its version; returns the version."""
    where = f"results store {path}"
    if "meta" not in tables:
        raise StoreError(f"{where} is a SQLite database but not a gemmtune store: no 'meta' table")
    got = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    if got is None:
        raise StoreError(f"{where} has no schema_version in its 'meta' table")
    try:
        version = int(got[0])
    except (TypeError, ValueError):
        raise StoreError(f"{where} has an unreadable schema_version {got[0]!r}") from None
    if version not in (1, SCHEMA_VERSION):
        raise StoreError(
            f"{where} has schema version {version}, this gemmtune reads versions 1 to "
            f"{SCHEMA_VERSION}; export it with the gemmtune that wrote it or start a new file"
        )
    if "results" not in tables:
        raise StoreError(f"{where} lacks the 'results' table")
    have = {r[1] for r in conn.execute("PRAGMA table_info(results)")}
    missing = [c for c in COLUMNS if c not in have and not (version == 1 and c in ADDED_IN_V2)]
    if missing:
        raise StoreError(f"{where}: table 'results' lacks columns {', '.join(missing)}")
    return version
