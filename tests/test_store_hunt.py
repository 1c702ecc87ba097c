"""Defects found by a CPU hunt through the results store (gemmtune.store), one test each; every one
failed against the code it was written for. The standard: never lost results, never silent wrong
reuse, and a bad file or a busy store is one clear error naming the file, not a traceback."""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from gemmtune.store import ResultStore, StoreError, claim_owner, opened_readonly, owner_alive
from test_store import CTX, KEY, SRC, make_row


def _store(path, *choices):
    with ResultStore(path) as s:
        for c in choices:
            s.record(CTX, make_row(c))
    return path


# ------------------------------------------------------------------ 1. a .gz store's errors
def test_a_gz_that_is_not_a_store_is_named_in_the_error(tmp_path):
    """``opened_readonly`` on a .gz holding something other than a store (a gzipped CSV export
    given for the store) said 'cannot open results store /tmp/gemmtune-store-XXXX/x.sqlite: not a
    SQLite database': a temporary copy, gone by the time the user reads it, never the file given."""
    path = tmp_path / "collect.sqlite.gz"
    with gzip.open(path, "wb") as f:
        f.write(b"device_name,capability\nH100,9.0\n")
    with pytest.raises(StoreError) as ei:
        with opened_readonly(path):
            pass
    assert str(path) in str(ei.value) and "not a SQLite database" in str(ei.value)
    assert "gemmtune-store-" not in str(ei.value)


# ------------------------------------------------------------------ 2. checkpoint that did not
def test_checkpoint_that_cannot_move_the_log_raises(tmp_path, monkeypatch):
    """``checkpoint()`` promises 'the file alone holds every row', and ``collect``'s export gzips
    the file alone right after it (collect.sqlite.gz, what the next call resumes from). While
    another connection held an older snapshot, SQLite's checkpoint answered 'busy' in its result
    row, which was thrown away: checkpoint() returned as if done, and the file alone was not even
    a readable database ('database disk image is malformed'). It raises StoreError now."""
    monkeypatch.setattr("gemmtune.store.core.LOCK_TIMEOUT_S", 0.2)  # not 30 s of waiting
    path = _store(tmp_path / "s.sqlite", "triton:a")
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM results").fetchone()  # holds this snapshot
        with ResultStore(path) as s:
            s.record(CTX, make_row("triton:b"))
            with pytest.raises(StoreError, match=f"results store {path}.*checkpoint"):
                s.checkpoint()
        reader.execute("COMMIT")
    finally:
        reader.close()
    with ResultStore(path) as s:  # no reader left: it works, and the file alone holds both rows
        s.checkpoint()
        shutil.copyfile(path, tmp_path / "alone.sqlite")
    assert sqlite3.connect(tmp_path / "alone.sqlite").execute("SELECT COUNT(*) FROM results").fetchone() == (2,)


# ------------------------------------------------------------------ 3. a foreign database changed
def test_a_foreign_sqlite_database_is_refused_unchanged(tmp_path):
    """Opening another program's SQLite database as a store (a wrong ``--store other.db``) was
    refused ('not a gemmtune store'), but only after the file had been switched to WAL journal
    mode for good: the user's database was changed by a command that refused it."""
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE stuff (x)")
    con.commit()
    con.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not a gemmtune store"):
        ResultStore(path)
    assert path.read_bytes() == before
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    con.close()


# ------------------------------------------------------------------ 4. drop on a busy store
def test_drop_on_a_locked_store_raises_store_error(tmp_path, monkeypatch):
    """``drop()`` (``collect --drop-oom`` and the like) on a store another process was writing
    ended, after the lock timeout, with sqlite3's own 'database is locked' traceback, where
    ``record()`` raises StoreError naming the file (one line from the CLI). The rows stay."""
    monkeypatch.setattr("gemmtune.store.core.LOCK_TIMEOUT_S", 0.2)
    path = _store(tmp_path / "s.sqlite", "triton:a", "triton:b")
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        with ResultStore(path) as s:  # opened first: opening takes the write lock too
            writer.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreError, match=f"results store {path}: database is locked"):
                s.drop([(KEY, "triton:a")])
            writer.execute("ROLLBACK")
    finally:
        writer.close()
    with ResultStore(path) as s:
        assert s.count() == 2
        assert s.drop([(KEY, "triton:a")]) == 1  # the store is usable after the failed drop


# ------------------------------------------------------------------ 5. a claim of one choice twice
def test_a_claim_naming_a_choice_twice_claims_it_once(tmp_path):
    """``claim()`` given one choice id twice inserted its claim twice and failed with 'UNIQUE
    constraint failed: claims.context, ...', claiming nothing. It claims the choice once now."""
    with ResultStore(tmp_path / "s.sqlite") as s:
        assert s.claim(CTX, KEY, ["triton:a", "triton:b", "triton:a"], "me", ttl_s=60) == ["triton:a", "triton:b"]
        assert s.claim(CTX, KEY, ["triton:a", "triton:a"], "you", ttl_s=60) == []


# ------------------------------------------------------------------ 6. export's file mode
def test_export_keeps_the_default_permissions(tmp_path):
    """``export()`` writes through a temporary file from mkstemp, which is mode 0600, and renamed
    it into place: every CSV export (collect-<gpu>.csv, shared in data/) was readable by its owner
    alone, and an existing export made public (0644) turned private at the next export. The
    export now gets what open() would give it, as jsonio.write_atomic does."""
    with ResultStore(tmp_path / "s.sqlite") as s:
        s.record(CTX, make_row())
        out = tmp_path / "out.csv"
        s.export(out)
        umask = os.umask(0o022)
        os.umask(umask)
        assert out.stat().st_mode & 0o777 == 0o666 & ~umask
        out.chmod(0o640)
        s.export(out)
        assert out.stat().st_mode & 0o777 == 0o640


# ------------------------------------------------------------------ 7. immutable=1 past a log
def test_a_read_only_store_whose_log_cannot_be_read_is_refused_not_cut_short(tmp_path, monkeypatch):
    """Read-only, a WAL store beside which SQLite cannot make its shared-memory file (a read-only
    folder: another user's, a read-only mount) was read with ``immutable=1``: the file as it is,
    without its write-ahead log. A log left there (a copy of a running store, a writer killed
    before its checkpoint: every commit since the last checkpoint lives in it) was skipped: a
    summary or a training run saw fewer rows and said nothing. That store is refused now, naming
    the log. The read-only folder is emulated (chmod does not stop root, who runs these tests in
    CI): the plain ``mode=ro`` opening fails with SQLite's own 'unable to open database file'."""
    path = tmp_path / "s.sqlite"
    writer = ResultStore(path)
    writer.record(CTX, make_row("triton:a"))
    writer.checkpoint()
    writer.record(CTX, make_row("triton:b"))  # in the log only
    assert os.path.getsize(f"{path}-wal") > 0
    connect = sqlite3.connect

    class NoShm:  # SQLite opens the shared-memory file at the first read, and fails there
        def execute(self, *args):
            raise sqlite3.OperationalError("unable to open database file")

        def close(self):
            pass

    def no_shm(database, *args, **kw):
        if kw.get("uri") and "mode=ro" in str(database) and "immutable=1" not in str(database):
            return NoShm()
        return connect(database, *args, **kw)

    monkeypatch.setattr(sqlite3, "connect", no_shm)
    try:
        with pytest.raises(StoreError, match=f"{path}-wal"):
            ResultStore(path, readonly=True)
    finally:
        writer.close()
    # Closed cleanly, the log is gone (checkpointed into the file): read as it is (immutable=1,
    # still in the emulated read-only folder), every row is there.
    assert not os.path.exists(f"{path}-wal")
    with ResultStore(path, readonly=True) as s:
        assert [r.choice_id for _, r in s.rows()] == ["triton:a", "triton:b"]


# ------------------------------------------------------------------ 8. claims across PID namespaces
def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        return subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def test_a_live_tuner_in_another_pid_namespace_keeps_its_claims(tmp_path):
    """Tuners sharing a store on one host from two containers (``--network=host`` gives a container
    the host's name, not its PIDs) each took the other's claims for a dead process's: the owner's
    host matched, its process id was looked up in this PID namespace and not found, and the claims
    of a tuner still measuring were deleted and claimed again, every candidate measured twice.
    Here a tuner in a new PID namespace (unshare) holds a claim under a process id that does not
    exist outside it; a tuner outside must not get that choice."""
    if not _unshare_works():
        pytest.skip("needs unshare --pid (root, a kernel that allows it)")
    pid_max = int(open("/proc/sys/kernel/pid_max").read())
    pid = next(p for p in range(pid_max - 2000, pid_max) if not os.path.exists(f"/proc/{p}"))
    path = tmp_path / "s.sqlite"
    ResultStore(path).close()
    script = tmp_path / "hold.py"
    script.write_text(
        "import sys\n"
        "from gemmtune.store import ResultStore, RunContext, claim_owner\n"
        f"ctx = RunContext{tuple(CTX.__dict__.values())!r}\n"
        "owner = claim_owner()\n"
        f"with ResultStore({str(path)!r}) as s:\n"
        f"    print(s.claim(ctx, {KEY!r}, ['triton:a'], owner, ttl_s=600), owner, flush=True)\n"
        "    sys.stdin.read()  # alive until the test is done\n")
    env = dict(os.environ, PYTHONPATH=str(SRC))
    # ns_last_pid: the next process in the new namespace gets ``pid``, one this namespace lacks.
    holder = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c",
                               f"echo {pid - 1} > /proc/sys/kernel/ns_last_pid && {sys.executable} {script}"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = holder.stdout.readline()
        assert line.startswith("['triton:a'] "), line
        owner = line.split()[-1]
        assert owner.split(":")[1] == str(pid) and not os.path.exists(f"/proc/{pid}"), (owner, pid)
        with ResultStore(path) as s:
            assert s.claim(CTX, KEY, ["triton:a", "triton:b"], claim_owner(), ttl_s=600) == ["triton:b"]
        # An exited tuner of this namespace still loses its claims at once.
        dead = claim_owner().split(":")
        dead[1] = str(pid)
        assert not owner_alive(":".join(dead))
    finally:
        holder.stdin.close()
        holder.wait(30)


# ------------------------------------------------------------------ 9. save_rows over kept rows
def test_save_rows_keeps_the_rows_an_earlier_drop_kept(tmp_path):
    """``collect --drop-oom`` keeps the rows it drops in DIR/dropped-oom.csv.gz (``save_rows``) and
    deletes them from the store (``drop``). A second run with the flag into the same DIR (the usual
    resume: the same command again) wrote that file anew: the first run's dropped rows, in no store
    any more, were gone. save_rows appends to the file now, every kept row stays."""
    path = _store(tmp_path / "s.sqlite", "triton:a", "triton:b")
    kept = tmp_path / "dropped-oom.csv.gz"
    with ResultStore(path) as s:
        assert s.save_rows([(KEY, "triton:a")], kept) == 1
        assert s.drop([(KEY, "triton:a")]) == 1
        assert s.save_rows([(KEY, "triton:b")], kept) == 1
        assert s.drop([(KEY, "triton:b")]) == 1
        assert s.save_rows([], kept) == 0  # a run that drops nothing
    import csv as _csv
    with gzip.open(kept, "rt", newline="") as f:
        lines = list(_csv.reader(f))
    assert lines[0][0] == "device_name" and len(lines) == 3
    assert sorted(r[lines[0].index("choice_id")] for r in lines[1:]) == ["triton:a", "triton:b"]


# ------------------------------------------------------------------ 10. export through a symlink
def test_export_through_a_symlink_writes_its_target(tmp_path):
    """``export("latest.csv")`` where latest.csv is a link to the shared file renamed the new
    export onto the link: the link became a plain file and the file it named kept the old rows
    (jsonio.write_atomic had the same defect for tables, fixed there). The target is written now."""
    shared = tmp_path / "shared"
    shared.mkdir()
    target = shared / "results.csv"
    target.write_text("old\n")
    link = tmp_path / "latest.csv"
    link.symlink_to(target)
    with ResultStore(tmp_path / "s.sqlite") as s:
        s.record(CTX, make_row())
        assert s.export(link) == 1
    assert link.is_symlink() and "triton:a" in target.read_text()
    assert not list(shared.glob(".*tmp*")) and not list(tmp_path.glob(".*tmp*"))
