"""gemmtune_entry.bytecode: where gemmtune's processes keep bytecode when Python keeps none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gemmtune_entry.bytecode import apply_here, cache_prefix, default_dir
from gemmtune_entry.spawn import worker_env


def _package(tmp_path: Path, with_pyc: bool) -> str:
    pkg = tmp_path / "site" / "fakepkg"
    pkg.mkdir(parents=True)
    init = pkg / "__init__.py"
    init.write_text("VALUE = 41 + 1\n")
    if with_pyc:
        cache = pkg / "__pycache__"
        cache.mkdir()
        (cache / f"__init__.{sys.implementation.cache_tag}.pyc").write_bytes(b"")
    return str(init)


def test_prefix_only_where_python_keeps_no_bytecode(tmp_path):
    bare, built = _package(tmp_path / "a", False), _package(tmp_path / "b", True)
    no_write = {"PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert cache_prefix(no_write, bare) == str(tmp_path / "xdg" / "gemmtune" / "pycache")
    assert cache_prefix(no_write, built) is None  # the install has its bytecode: left alone
    assert cache_prefix({}, bare) is None  # Python writes it beside the source itself
    assert cache_prefix(dict(no_write, PYTHONPYCACHEPREFIX="/mine"), bare) is None  # the user's prefix wins
    assert cache_prefix(dict(no_write, GEMMTUNE_PYCACHE="0"), bare) is None  # turned off
    assert cache_prefix(dict(no_write, GEMMTUNE_PYCACHE=str(tmp_path / "p")), bare) == str(tmp_path / "p")
    assert cache_prefix(no_write, None) is None  # no torch: nothing to decide


def test_read_only_install_gets_the_prefix(tmp_path, monkeypatch):
    """No PYTHONDONTWRITEBYTECODE, but a directory this user cannot write (os.access faked:
    CI runs as root, which writes anywhere)."""
    bare = _package(tmp_path, False)
    environ = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    monkeypatch.setattr("gemmtune_entry.bytecode.os.access", lambda path, mode: False)
    assert cache_prefix(environ, bare) == default_dir(environ)
    monkeypatch.setattr("gemmtune_entry.bytecode.os.access", lambda path, mode: True)
    assert cache_prefix(environ, bare) is None


def test_worker_env_makes_a_child_write_bytecode_under_the_prefix(tmp_path, monkeypatch):
    """End to end: a child started with worker_env's environment, under PYTHONDONTWRITEBYTECODE
    and with a torch that has no bytecode, writes its imports' bytecode under the prefix and
    nothing beside the source."""
    bare = _package(tmp_path, False)
    prefix = tmp_path / "cache"
    monkeypatch.setattr("gemmtune_entry.spawn.torch_origin", lambda: bare)
    env = worker_env(None, {}, base={"PYTHONDONTWRITEBYTECODE": "1", "GEMMTUNE_PYCACHE": str(prefix),
                                     "PATH": os.environ.get("PATH", "")})
    assert "PYTHONDONTWRITEBYTECODE" not in env and env["PYTHONPYCACHEPREFIX"] == str(prefix)
    env["PYTHONPATH"] = str(Path(bare).parents[1]) + os.pathsep + env["PYTHONPATH"]
    out = subprocess.run([sys.executable, "-c", "import fakepkg; print(fakepkg.VALUE)"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "42", out.stderr
    written = list(prefix.rglob(f"__init__.{sys.implementation.cache_tag}.pyc"))
    assert any("fakepkg" in str(p) for p in written), written
    assert not (Path(bare).parent / "__pycache__").exists()


def test_apply_here_sets_this_process(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert apply_here(None) is False and sys.pycache_prefix is None
    assert apply_here(str(tmp_path / "pyc")) is True
    assert sys.pycache_prefix == str(tmp_path / "pyc") and sys.dont_write_bytecode is False
    assert (tmp_path / "pyc").is_dir()
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(sys, "pycache_prefix", None)
    assert apply_here(str(blocker / "pyc")) is False and sys.pycache_prefix is None
