"""Atomic writes and the merge lock (gemmtune.jsonio): concurrent writers never publish half a
file, and read-merge-writes under ``locked`` never drop each other's updates."""

from __future__ import annotations

import json
import os
import threading

import pytest

from gemmtune.jsonio import locked, read_json, write_atomic


def test_concurrent_writers_and_readers_never_see_half_a_file(tmp_path):
    path = tmp_path / "table.json"
    write_atomic(path, json.dumps({"writer": -1}))
    errors: list[str] = []
    stop = threading.Event()

    def writer(i: int) -> None:
        body = json.dumps({"writer": i, "pad": "x" * 20000 * (i + 1)})
        for _ in range(40):
            try:
                write_atomic(path, body)
            except OSError as e:  # a shared temp name made writers lose theirs
                errors.append(f"writer {i}: {e}")

    def reader() -> None:
        while not stop.is_set():
            try:
                read_json(path)
            except ValueError as e:
                errors.append(f"reader: {e}")

    readers = [threading.Thread(target=reader) for _ in range(2)]
    writers = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not errors, errors[:3]
    assert read_json(path)["writer"] in range(4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.json"]  # no temp file left


def test_locked_read_merge_write_keeps_every_update(tmp_path):
    path = tmp_path / "counts.json"
    write_atomic(path, json.dumps({"n": 0}))

    def bump() -> None:
        for _ in range(30):
            with locked(path):
                n = read_json(path)["n"]
                write_atomic(path, json.dumps({"n": n + 1}))

    threads = [threading.Thread(target=bump) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert read_json(path)["n"] == 90


def test_write_atomic_keeps_the_default_permissions_and_names_the_target_on_error(tmp_path):
    path = write_atomic(tmp_path / "a.json", "{}\n")
    umask = os.umask(0o022)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    missing = tmp_path / "nowhere" / "b.json"
    with pytest.raises(FileNotFoundError) as ei:
        write_atomic(missing, "{}")
    assert ei.value.filename == str(missing)


def test_write_atomic_onto_a_directory_names_the_directory(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(IsADirectoryError) as ei:
        write_atomic(tmp_path / "d", "{}")
    assert ei.value.filename == str(tmp_path / "d")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]  # the temp file is gone


def _bump_in_process(path: str, n: int) -> None:
    for _ in range(n):
        with locked(path):
            v = read_json(path)["n"]
            write_atomic(path, json.dumps({"n": v + 1}))


def test_locked_leaves_no_lock_file_and_still_excludes_other_processes(tmp_path):
    """A table's NAME.lock was left beside it after every run (gemmtune-table.json.lock in the
    working directory, untracked in git). It is removed now; processes that waited on the removed
    file still take turns (they lock the new one)."""
    import multiprocessing

    path = tmp_path / "counts.json"
    write_atomic(path, json.dumps({"n": 0}))
    with locked(path):
        assert (tmp_path / "counts.json.lock").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.json"]
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_bump_in_process, args=(str(path), 40)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * 4
    assert read_json(path)["n"] == 160
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.json"]


def test_locked_names_the_file_when_its_lock_cannot_be_made(tmp_path):
    target = tmp_path / "nowhere" / "t.json"
    with pytest.raises(FileNotFoundError) as ei:
        with locked(target):
            pass
    assert ei.value.filename == str(target) and "lock file" in ei.value.strerror
