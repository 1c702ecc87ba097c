"""Outputs written over a results store (session 45's CPU hunt of the CLI, store and save paths):
``tune --out S --overwrite``, ``lut merge S ... --overwrite`` (both suggested by their own errors)
and ``capture --out S`` replaced a SQLite results store, every measurement in it, with a table or
a suite. Each is refused now (jsonio.refuse_results_store); the test failed before."""

from __future__ import annotations

import pytest

from gemmtune import cli
from gemmtune.problem import Problem


# ------------------------------------------------------------------ outputs over a results store
def _a_store(path):
    """A results store holding one measurement."""
    from gemmtune.configs import Choice
    from gemmtune.store import ResultStore, RunContext
    from gemmtune.tuning.recorder import result_row

    p = Problem.from_sizes(16, 16, 16, "fp16")
    with ResultStore(path) as s:
        s.record(RunContext.current("cpu (Triton interpreter)", "interp"), result_row(p, Choice.parse("aten"),
                                                                                      {"status": "ok", "device_ms": 0.01}))
    return path.read_bytes()


@pytest.mark.parametrize("argv", [
    # The error without --overwrite ("... or pass --overwrite (overwrite=True) to replace it") led here.
    ["tune", "--shape", "16x16x16:fp16", "--families", "aten", "--in-process", "-q", "--store", "{other}",
     "--out", "{store}", "--overwrite"],
    ["lut", "merge", "{store}", "{table}", "--overwrite"],
    ["capture", "--model", "tiny-llama", "--device", "meta", "-q", "--out", "{store}"],
])
def test_an_output_naming_another_results_store_is_refused(tmp_path, capsys, argv):
    """A table or suite written over another run's results store (``gemmtune.sqlite``, the default
    store in the working directory) replaced every measurement it held: ``lut export-inductor`` and
    ``train --out`` refuse a SQLite file there; ``tune --out ... --overwrite``, ``lut merge --overwrite``
    (both suggested by their own errors) and ``capture --out`` wrote over it."""
    from gemmtune.table import LookupTable, provenance

    store = tmp_path / "gemmtune.sqlite"
    before = _a_store(store)
    table = tmp_path / "t.json"
    LookupTable(provenance("cpu (Triton interpreter)", "interp", "2.13.0", "3.9.0", "0.1.0")).save(table)
    args = [a.format(store=store, other=tmp_path / "other.sqlite", table=table) for a in argv]
    rc = cli.main(args)
    err = capsys.readouterr().err
    assert store.read_bytes() == before, f"{args[0]} wrote over the results store {store} (rc {rc}): {err}"
    assert rc == 2 and "Traceback" not in err
