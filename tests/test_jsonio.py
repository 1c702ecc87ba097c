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
