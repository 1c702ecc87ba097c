"""Kernel-binary bundles (gemmtune.binaries) where the file system fails: a bundle replaced by a
save that does not finish keeps the old one, and a Triton cache that cannot be written means
compiling on first launch, said in the note, not an exception out of ``gemmtune.load``."""

from __future__ import annotations

import os

import pytest

from gemmtune import binaries


def _kernel_dir(root, name: str, payload: str):
    d = root / name
    d.mkdir(parents=True)
    (d / "k.cubin").write_text(payload)
    return d


def test_a_bundle_is_replaced_whole_and_leaves_nothing_aside(tmp_path):
    dest = tmp_path / "mm.kernels"
    binaries.bundle(dest, [_kernel_dir(tmp_path / "a", "K1", "old")])
    assert binaries.bundle(dest, [_kernel_dir(tmp_path / "b", "K2", "new")]) == ["K2"]
    assert sorted(p.name for p in dest.iterdir()) == ["K2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "mm.kernels"]  # no .tmp / .old left


def test_a_save_that_fails_after_moving_the_old_bundle_aside_puts_it_back(tmp_path, monkeypatch):
    dest = tmp_path / "mm.kernels"
    binaries.bundle(dest, [_kernel_dir(tmp_path / "a", "K1", "old")])
    real = os.replace

    def failing(src, dst):
        if str(src).endswith(".tmp"):  # the new bundle's move into place
            raise OSError(28, "No space left on device")
        return real(src, dst)
    monkeypatch.setattr(binaries.os, "replace", failing)
    with pytest.raises(OSError, match="No space"):
        binaries.bundle(dest, [_kernel_dir(tmp_path / "b", "K2", "new")])
    assert (dest / "K1" / "k.cubin").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "mm.kernels"]


def test_restore_into_a_cache_it_cannot_make_compiles_instead(tmp_path, monkeypatch):
    src = tmp_path / "mm.kernels"
    binaries.bundle(src, [_kernel_dir(tmp_path / "a", "K1", "x")])
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setattr(binaries, "cache_dir", lambda: blocker / "triton")
    n, note = binaries.restore(src)
    assert n == 0 and "cannot use the Triton cache" in note and "compile on first launch" in note
