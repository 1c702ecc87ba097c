"""gemmtune.bench's process-wide settings: set for a bench run, put back after it (also after an
error), so that nothing the bench changed leaks into the process that called it."""

from __future__ import annotations

import contextlib
import os

import pytest
import torch

from gemmtune.bench.settings import ProcessSettings, bench_settings


@pytest.mark.parametrize("fail", [False, True], ids=["returns", "raises"])
def test_bench_settings_are_put_back(tmp_path, monkeypatch, fail):
    import torch._inductor.config as icfg

    monkeypatch.setenv("TRITON_CACHE_DIR", "/before/triton")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    before = torch.backends.cuda.matmul.allow_tf32, icfg.force_disable_caches
    torch.backends.cuda.matmul.allow_tf32, icfg.force_disable_caches = True, False
    seen = {}
    try:
        with pytest.raises(RuntimeError) if fail else contextlib.nullcontext():
            with bench_settings(tmp_path) as s:
                seen.update(triton=os.environ["TRITON_CACHE_DIR"], inductor=os.environ["TORCHINDUCTOR_CACHE_DIR"],
                            tf32=torch.backends.cuda.matmul.allow_tf32, caches=icfg.force_disable_caches)
                s.setenv("GEMMTUNE_TEST_EXTRA", "1")  # the caller's own changes are undone too
                if fail:
                    raise RuntimeError("a GPU fault")
        after = torch.backends.cuda.matmul.allow_tf32, icfg.force_disable_caches
    finally:
        torch.backends.cuda.matmul.allow_tf32, icfg.force_disable_caches = before
    assert seen == {"triton": str(tmp_path / "triton-bench"), "inductor": str(tmp_path / "inductor"),
                    "tf32": False, "caches": True}
    assert after == (True, False)
    assert os.environ["TRITON_CACHE_DIR"] == "/before/triton"
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ and "GEMMTUNE_TEST_EXTRA" not in os.environ


def test_bench_settings_leave_inductor_alone_when_it_is_skipped(tmp_path):
    import torch._inductor.config as icfg

    before = icfg.force_disable_caches
    with bench_settings(tmp_path, inductor=False):
        assert icfg.force_disable_caches == before


def test_process_settings_undo_in_reverse_order():
    class Obj:
        x = 1
    with ProcessSettings() as s:
        s.setattr(Obj, "x", 2)
        s.setattr(Obj, "x", 3)
        assert Obj.x == 3
    assert Obj.x == 1



def test_bench_command_passes_deadline_and_ceilings_file(monkeypatch, tmp_path, capsys):
    """The environment variables GEMMTUNE_BENCH_DEADLINE / _CEILINGS are now options; for this
    release the command still honours them when the option is not given, with a warning."""
    from gemmtune import cli
    from gemmtune.bench import suite

    seen = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(suite, "run", lambda shapes, **kw: seen.update(kw, n=len(shapes)) or tmp_path / "x.json")
    rc = cli.main(["bench", "--groups", "odd", "--deadline", "1700000000", "--ceilings-file", str(tmp_path / "c.json"),
                   "--out", str(tmp_path)])
    assert rc == 0 and seen["deadline"] == 1700000000.0 and seen["ceilings_file"] == str(tmp_path / "c.json")
    cli.main(["bench", "--groups", "odd", "--out", str(tmp_path)])
    assert seen["deadline"] is None and seen["ceilings_file"] is None
    capsys.readouterr()
    monkeypatch.setenv("GEMMTUNE_BENCH_DEADLINE", "12.5")
    cli.main(["bench", "--groups", "odd", "--out", str(tmp_path)])
    assert seen["deadline"] == 12.5 and "GEMMTUNE_BENCH_DEADLINE is deprecated" in capsys.readouterr().err
    cli.main(["bench", "--groups", "odd", "--out", str(tmp_path), "--deadline", "7"])
    assert seen["deadline"] == 7.0  # the option wins
    from gemmtune.bench.suite import run
    import inspect
    assert "GEMMTUNE_BENCH" not in inspect.getsource(run)  # the library reads no environment
