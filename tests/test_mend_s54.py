"""Session 54's mends: one atomic-replace helper, repeated CLI options, bad float options, the
eager gate's NaN times, and lut merge."""

from __future__ import annotations

import os
import stat

import pytest

from gemmtune import jsonio
from gemmtune.store import ResultStore
from test_store import CTX, make_row


# ------------------------------------------------------------------ 1. one atomic-replace helper
def _record_fsyncs(monkeypatch) -> list[str]:
    """Patch os.fsync to note what each call flushed: 'file' or 'dir'."""
    seen: list[str] = []
    real = os.fsync

    def fsync(fd):
        seen.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return seen


def _write_json(path):
    jsonio.write_atomic(path, "{}")


def _write_gzip(path):
    from gemmtune.collect.rows import gzip_file

    src = path.parent / "src.bin"
    src.write_bytes(b"x" * 100)
    gzip_file(src, path)


def _write_export(path):
    with ResultStore(path.parent / "s.sqlite") as s:
        s.record(CTX, make_row())
        s.export(path)


@pytest.mark.parametrize("write,name", [(_write_json, "t.json"), (_write_gzip, "c.sqlite.gz"),
                                        (_write_export, "out.csv")])
def test_every_atomic_writer_fsyncs_the_file_and_its_directory(tmp_path, monkeypatch, write, name):
    """write_atomic fsynced its file but not the directory holding the rename; collect's gzip copy
    and the store's export fsynced neither (a crash could leave an empty or old file). All three go
    through jsonio.replacing now."""
    seen = _record_fsyncs(monkeypatch)
    write(tmp_path / name)
    assert (tmp_path / name).stat().st_size > 0
    assert "file" in seen and seen[-1] == "dir", seen
    assert not list(tmp_path.glob(".*tmp*"))


@pytest.mark.parametrize("mode", ["w", "wb", None])
def test_replacing_leaves_the_original_untouched_on_failure(tmp_path, mode):
    path = tmp_path / "t.json"
    path.write_text("old")
    with pytest.raises(RuntimeError, match="boom"):
        with jsonio.replacing(path, mode=mode) as f:
            if mode is None:
                f.write_text("half")
            else:
                f.write("half" if mode == "w" else b"half")
            raise RuntimeError("boom")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]
    with jsonio.replacing(path, mode=mode) as f:
        if mode is None:
            assert f.name.startswith(".t.json.tmp-") and f.name.endswith(".tmp")
            f.write_text("new")
        else:
            f.write("new" if mode == "w" else b"new")
    assert path.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]
