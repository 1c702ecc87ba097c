"""Tests for gemmtune.store: round trips, upsert, best(), export, errors, durability."""

from __future__ import annotations

import csv
import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gemmtune.store import (
    COLUMNS,
    STATUSES,
    ResultRow,
    ResultStore,
    RunContext,
    StoreError,
)

SRC = Path(__file__).resolve().parents[1] / "src"

CTX = RunContext("NVIDIA H100 80GB HBM3", "9.0", "2.6.0", "3.2.0", "0.1.0")
CTX2 = replace(CTX, triton_version="3.3.0")
KEY = "mm:M32-N32-K64:bf16->bf16:row.a/row.a"
KEY2 = "mm:M64-N64-K64:fp16->fp16:row.a/col.a"


def make_row(choice_id: str = "triton:a", problem_key: str = KEY, **kw) -> ResultRow:
    base = dict(
        problem_key=problem_key,
        choice_id=choice_id,
        family=choice_id.split(":")[0],
        status="ok",
        device_ms=0.5,
        eager_ms=0.6,
        rel_err=1e-3,
        m=32,
        n=32,
        k=64,
        dtype="bfloat16",
        out_dtype="bfloat16",
        layout="row/row",
        aligned=True,
        params_json='{"BLOCK_M": 64}',
        repeats=10,
        spread=0.02,
    )
    base.update(kw)
    return ResultRow(**base)


@pytest.fixture
def store(tmp_path):
    with ResultStore(tmp_path / "results.sqlite") as s:
        yield s


def test_round_trip_record_done_rows(store):
    row = make_row("triton:a", created_at=1234.5)
    store.record(CTX, row)
    assert store.done(CTX, KEY) == {"triton:a": row}
    assert store.rows() == [(CTX, row)]
    assert store.count() == 1
    # Other contexts and problems see nothing.
    assert store.done(CTX2, KEY) == {}
    assert store.done(CTX, KEY2) == {}


def test_created_at_filled_when_zero(store):
    store.record(CTX, make_row())
    (got,) = store.done(CTX, KEY).values()
    assert got.created_at > 1.6e9


def test_none_fields_and_bool_round_trip(store):
    row = make_row("triton:bad", status="compile_error", device_ms=None, eager_ms=None,
                   rel_err=None, repeats=None, spread=None, aligned=False, reason="ptxas died")
    store.record(CTX, row)
    got = store.done(CTX, KEY)["triton:bad"]
    assert got.device_ms is None and got.repeats is None and got.spread is None
    assert got.aligned is False
    assert got.reason == "ptxas died"


def test_numpy_scalars_are_accepted(store):
    np = pytest.importorskip("numpy")
    store.record(CTX, make_row(m=np.int64(32), device_ms=np.float32(0.5), repeats=np.int32(3)))
    got = store.done(CTX, KEY)["triton:a"]
    assert (got.m, got.device_ms, got.repeats) == (32, 0.5, 3)
    assert type(got.m) is int and type(got.device_ms) is float


def test_upsert_replaces(store):
    store.record(CTX, make_row("triton:a", device_ms=0.5))
    store.record(CTX, make_row("triton:b", device_ms=0.7))
    assert store.count() == 2
    store.record(CTX, make_row("triton:a", device_ms=0.25, status="ok"))
    assert store.count() == 2
    assert store.done(CTX, KEY)["triton:a"].device_ms == 0.25
    # A different context is a different key, not a replacement.
    store.record(CTX2, make_row("triton:a", device_ms=9.0))
    assert store.count() == 3
    assert store.done(CTX, KEY)["triton:a"].device_ms == 0.25


def test_record_many_and_ordering(store):
    rows = [make_row(c, problem_key=p) for p in (KEY2, KEY) for c in ("z:1", "a:1", "m:1")]
    store.record_many(CTX, rows)
    store.record_many(CTX2, rows[:1])
    assert store.count() == 7
    got = store.rows()
    keys = [(r.problem_key, r.choice_id, c.triton_version) for c, r in got]
    assert keys == sorted(keys)
    assert [r.choice_id for _, r in store.rows(CTX, KEY)] == ["a:1", "m:1", "z:1"]
    assert len(store.rows(problem_key=KEY2)) == 4
    assert len(store.rows(ctx=CTX2)) == 1


def test_record_many_is_all_or_nothing(store):
    rows = [make_row("a:1"), make_row("b:1", status="bogus")]
    with pytest.raises(ValueError, match="bogus"):
        store.record_many(CTX, rows)
    assert store.count() == 0


def test_rows_status_filter(store):
    store.record_many(CTX, [make_row("a:1"), make_row("b:1", status="timeout", device_ms=None)])
    assert [r.choice_id for _, r in store.rows(status="timeout")] == ["b:1"]
    assert [r.choice_id for _, r in store.rows(status="ok")] == ["a:1"]
    with pytest.raises(ValueError):
        store.rows(status="nope")


def test_best_picks_fastest_ok(store):
    assert store.best(CTX, KEY) is None
    store.record_many(CTX, [
        make_row("a:slow", device_ms=0.9),
        make_row("b:fast", device_ms=0.3),
        make_row("c:wrong", status="wrong", device_ms=0.01),
        make_row("d:crash", status="crashed", device_ms=None),
        make_row("e:okinf", status="ok", device_ms=math.inf),
        make_row("f:oknone", status="ok", device_ms=None),
    ])
    store.record(CTX2, make_row("g:othercontext", device_ms=0.001))
    store.record(CTX, make_row("h:otherproblem", problem_key=KEY2, device_ms=0.001))
    best = store.best(CTX, KEY)
    assert best is not None and best.choice_id == "b:fast"


def test_best_none_when_only_failures(store):
    store.record_many(CTX, [
        make_row("a", status="timeout", device_ms=None),
        make_row("b", status="ok", device_ms=math.inf),
    ])
    assert store.best(CTX, KEY) is None


def test_bad_status_raises_value_error(store):
    with pytest.raises(ValueError, match="status"):
        store.record(CTX, make_row(status="fast"))
    assert store.count() == 0


def test_export_csv(store, tmp_path):
    a = make_row("a:1", device_ms=0.1 + 0.2, created_at=100.0)
    b = make_row("b:1", status="crashed", device_ms=None, repeats=None, reason="segv, \"bad\"\nline2",
                 created_at=200.0)
    store.record_many(CTX, [b, a])
    out = tmp_path / "out.csv"
    assert store.export(out) == 2
    with open(out, newline="", encoding="utf-8") as f:
        got = list(csv.reader(f))
    header, r1, r2 = got
    assert header == list(COLUMNS)
    assert header[:5] == ["device_name", "capability", "torch_version", "triton_version", "gemmtune_version"]
    d1, d2 = dict(zip(header, r1)), dict(zip(header, r2))
    assert d1["choice_id"] == "a:1" and d2["choice_id"] == "b:1"
    assert d1["device_name"] == CTX.device_name and d1["triton_version"] == "3.2.0"
    assert float(d1["device_ms"]) == 0.1 + 0.2  # exact round trip
    assert d1["params_json"] == '{"BLOCK_M": 64}'
    assert d1["m"] == "32" and d1["status"] == "ok"
    assert d2["device_ms"] == "" and d2["repeats"] == ""
    assert d2["reason"] == 'segv, "bad"\nline2'
    assert not list(tmp_path.glob(".out.csv.tmp-*"))


def test_export_bad_suffix_and_dir(store, tmp_path):
    with pytest.raises(StoreError, match=r"\.json"):
        store.export(tmp_path / "out.json")
    with pytest.raises(StoreError, match="does not exist"):
        store.export(tmp_path / "nope" / "out.csv")


def test_export_parquet_either_works_or_hints(store, tmp_path):
    store.record_many(CTX, [make_row("a:1"), make_row("b:1", device_ms=None, repeats=None)])
    out = tmp_path / "out.parquet"
    try:
        import pandas as pd
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(StoreError, match="pip install pandas pyarrow"):
            store.export(out)
        assert not out.exists()
        return
    assert store.export(out) == 2
    df = pd.read_parquet(out)
    assert list(df.columns) == list(COLUMNS)
    assert list(df["choice_id"]) == ["a:1", "b:1"]
    assert df["device_ms"].iloc[0] == 0.5 and math.isnan(df["device_ms"].iloc[1])


def test_export_parquet_without_pandas_hints(store, tmp_path, monkeypatch):
    # Forces the missing-dependency branch even where pandas is installed.
    monkeypatch.setitem(sys.modules, "pandas", None)
    store.record(CTX, make_row())
    with pytest.raises(StoreError, match="pip install pandas pyarrow"):
        store.export(tmp_path / "out.parquet")


def test_open_garbage_file(tmp_path):
    bad = tmp_path / "garbage.sqlite"
    bad.write_bytes(b"this is not a database\x00\xff" * 200)
    with pytest.raises(StoreError) as ei:
        ResultStore(bad)
    assert str(bad) in str(ei.value)
    assert "not a SQLite database" in str(ei.value)


def test_open_short_garbage_file(tmp_path):
    bad = tmp_path / "tiny.db"
    bad.write_bytes(b"hi")
    with pytest.raises(StoreError, match="not a SQLite database"):
        ResultStore(bad)


def test_open_wrong_schema_version(tmp_path):
    path = tmp_path / "old.sqlite"
    ResultStore(path).close()
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
    con.commit()
    con.close()
    with pytest.raises(StoreError) as ei:
        ResultStore(path)
    assert str(path) in str(ei.value) and "schema version 3" in str(ei.value)


def test_open_foreign_sqlite_db(tmp_path):
    path = tmp_path / "other.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE stuff (x)")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="not a gemmtune store"):
        ResultStore(path)


def test_open_db_missing_results_table(tmp_path):
    path = tmp_path / "half.sqlite"
    ResultStore(path).close()
    con = sqlite3.connect(path)
    con.execute("DROP TABLE results")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="'results'") as ei:
        ResultStore(path)
    assert str(path) in str(ei.value)


def test_missing_parent_dir(tmp_path):
    path = tmp_path / "no" / "such" / "results.sqlite"
    with pytest.raises(StoreError) as ei:
        ResultStore(path)
    assert str(path) in str(ei.value) and "does not exist" in str(ei.value)
    assert not path.parent.exists()


def test_reopen_keeps_data_and_wal_mode(tmp_path):
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as s:
        s.record(CTX, make_row())
    with ResultStore(path) as s:
        assert s.count() == 1
        # Two processes appending must wait for each other, not fail after
        # sqlite3's default 5 s.
        assert s._db.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()


def test_closed_store_raises(tmp_path):
    s = ResultStore(tmp_path / "c.sqlite")
    s.close()
    s.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        s.count()


def test_runcontext_current(monkeypatch):
    import torch
    import triton

    ctx = RunContext.current("cpu", "0.0")
    assert ctx.device_name == "cpu" and ctx.capability == "0.0"
    assert ctx.torch_version == torch.__version__
    assert ctx.triton_version == triton.__version__
    assert ctx.gemmtune_version
    # A gemmtune that cannot be imported falls back instead of failing.
    monkeypatch.setitem(sys.modules, "gemmtune", None)
    assert RunContext.current("cpu", "0.0").gemmtune_version == "0+unknown"


def test_concurrent_writers_same_file(tmp_path):
    path = tmp_path / "shared.sqlite"
    ResultStore(path).close()
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            with ResultStore(path) as s:
                for j in range(25):
                    s.record(CTX, make_row(f"t{i}:{j}"))
        except BaseException as e:  # surfaced below; a thread cannot fail the test
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with ResultStore(path) as s:
        assert s.count() == 100


def test_concurrent_opens_of_a_new_file(tmp_path):
    """Several openers racing to create one store (collectors on two GPUs starting together):
    SQLite refused the WAL switch at once with 'database is locked' in about 4 of 100 rounds
    of three threads before ResultStore retried it."""
    errors: list[BaseException] = []
    for i in range(100):
        path = tmp_path / f"new{i}.sqlite"
        start = threading.Barrier(3)

        def opener() -> None:
            start.wait()
            try:
                with ResultStore(path) as s:
                    s.count()
            except BaseException as e:  # surfaced below; a thread cannot fail the test
                errors.append(e)

        threads = [threading.Thread(target=opener) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


def test_durable_across_sigkill(tmp_path):
    path = tmp_path / "killed.sqlite"
    n = 40
    script = textwrap.dedent(f"""
        import os, signal
        from gemmtune.store import ResultStore, ResultRow, RunContext
        ctx = RunContext("dev", "9.0", "t", "tr", "g")
        store = ResultStore({str(path)!r})
        for i in range({n}):
            store.record(ctx, ResultRow(problem_key="p", choice_id=f"c{{i}}", family="triton",
                status="ok", device_ms=float(i), eager_ms=None, rel_err=None, m=1, n=1, k=1,
                dtype="float16", out_dtype="float16", layout="row/row", aligned=True))
        print("recorded", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    env = dict(os.environ, PYTHONPATH=str(SRC))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "recorded" in proc.stdout
    with ResultStore(path) as s:
        assert s.count() == n
        done = s.done(RunContext("dev", "9.0", "t", "tr", "g"), "p")
        assert sorted(done) == sorted(f"c{i}" for i in range(n))
        assert done["c7"].device_ms == 7.0


_text = st.text(max_size=20)
_opt_float = st.none() | st.floats(allow_nan=False)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    status=st.sampled_from(STATUSES),
    device_ms=_opt_float,
    rel_err=_opt_float,
    reason=_text,
    m=st.integers(1, 2**40),
    aligned=st.booleans(),
    params=_text,
    repeats=st.none() | st.integers(0, 10**6),
    created_at=st.floats(1.0, 2e9),
)
def test_round_trip_property(store, status, device_ms, rel_err, reason, m, aligned, params, repeats,
                             created_at):
    # Same key every example: each record must replace the previous one exactly.
    row = make_row("x:1", status=status, device_ms=device_ms, rel_err=rel_err, reason=reason, m=m,
                   aligned=aligned, params_json=params, repeats=repeats, created_at=created_at)
    store.record(CTX, row)
    assert store.count() == 1
    assert store.done(CTX, KEY) == {"x:1": row}


def test_export_from_threads_to_one_file(store, tmp_path, monkeypatch):
    """Two exports of one process to one file shared a temporary name (per process id): one
    thread's rename could take the other's half-written file, or fail on the vanished name. Each
    export now writes a file of its own; the second thread starts while the first is writing."""
    import csv as _csv
    import threading

    store.record_many(CTX, [make_row(f"c:{i}") for i in range(50)])
    out = tmp_path / "out.csv"
    entered, release = threading.Event(), threading.Event()
    cls, path = type(store), tmp_path / "results.sqlite"
    orig = cls._write_csv

    def slow(tmp, records):
        orig(tmp, records)
        if not entered.is_set():
            entered.set()
            release.wait(5)  # the first writer holds its file while the second one writes

    monkeypatch.setattr(cls, "_write_csv", staticmethod(slow))
    errors, counts = [], []

    def run():
        try:
            counts.append(cls(path).export(out))  # a store object per thread (sqlite's rule), one file
        except Exception as e:  # noqa: BLE001 - collected for the assert
            errors.append(e)

    t1 = threading.Thread(target=run)
    t1.start()
    entered.wait(5)
    t2 = threading.Thread(target=run)
    t2.start()
    t2.join(5)
    release.set()
    t1.join(5)
    assert not errors and counts == [50, 50], (errors, counts)
    with open(out, newline="", encoding="utf-8") as f:
        assert len(list(_csv.reader(f))) == 51
    assert not list(tmp_path.glob(".out.csv.tmp-*"))


def test_claims_on_a_read_only_store_raise_store_error(tmp_path):
    """A store file the user cannot write (mode 0444, another user's) opens for reading, and
    ``tune`` on it died in claim() with sqlite3's own traceback ('attempt to write a readonly
    database'), even with every result already stored. claim() and release() raise StoreError
    naming the file, which the CLI prints as one line. The read-only file is emulated by a
    mode=ro connection: chmod does not stop root, who runs these tests in CI."""
    path = tmp_path / "r.sqlite"
    with ResultStore(path) as s:
        s.record(CTX, make_row())
    s = ResultStore(path)
    s._conn.close()
    s._conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    try:
        assert [r.choice_id for _, r in s.rows()] == ["triton:a"]  # reading still works
        with pytest.raises(StoreError, match=f"cannot write to results store {path}: .*readonly"):
            s.claim(CTX, KEY, ["triton:b"], "me", ttl_s=60)
        with pytest.raises(StoreError, match=f"cannot write to results store {path}"):
            s.release(CTX, KEY, "me")
    finally:
        s.close()
