"""The lookup table: the best choices per problem, as JSON with provenance.

Format (schema_version 1)::

    {
      "schema_version": 1,
      "provenance": {"capability": "9.0", "created": "2026-11-21T23:59:00Z",
                     "device_name": "NVIDIA H100 80GB HBM3", "gemmtune": "0.1.0",
                     "produced_by": "tuned", "torch": "2.11.0", "triton": "3.6.0"},
      "entries": [
        {"choices": [{"device_ms": 0.0031, "id": "splitk:BM32-BN32-BK128-S4-W4-G8-SK64-atomic"},
                     {"device_ms": 0.0071, "id": "aten"}], "key": "mm:M32-N32-K28672:bf16->bf16:row.a/row.a"}
      ]
    }

* ``key`` is ``Problem.key``: op, M, N, K, dtypes in/out, both layouts and their
  16-byte alignment. Keys must be canonical (exactly what ``Problem.key`` writes).
* ``choices`` is an ordered, non-empty list: the first is the one to run. Several
  choices mean "tune among these" (see ``tune(table=...)``). ``device_ms`` is optional
  (a predicted or hand-written table has none).
* ``produced_by`` is ``tuned`` (measured by ``gemmtune tune``), ``predicted`` (a
  performance model), ``by-hand`` or ``merged`` (``merge``, whose times are all
  measurements: times from predicted or hand-written inputs are dropped).

The file is written with sorted keys, one entry per line, entries sorted by key, so
two tables diff line by line (``gemmtune lut diff`` shows the same per problem).

Validation (``load``, ``from_json``): anything wrong raises ``TableError`` whose
message names the file, the entry and the field: malformed JSON or text, unknown or
duplicate fields, wrong types, an unknown kernel family, a non-canonical key or
choice id, a config the family cannot run on the problem (e.g. a decompose_k split
that does not divide K), and, when ``provenance.device_name`` names a built-in GPU
(``DeviceInfo.lookup``), a config its family's ``constraint()`` rejects on that GPU
(e.g. a triton_mm tile over the shared memory of one block). The constraint includes
the spill rule (more than 128 fp32 accumulators per thread), so such hand-written
tiles are refused too.

Trust policy (``check_provenance``)
-----------------------------------
A table is measured on one GPU with one compiler. Used elsewhere:

* another GPU (``device_name`` differs, compared without case) -> warning;
* another Triton MAJOR.MINOR (code generation changes between minor versions, so
  times and even the winning tile move) -> warning;
* other torch or gemmtune versions, or another Triton patch release -> no warning:
  choice ids name gemmtune's own kernels and are re-validated at load.

A warning (``TableWarning``) marks the table untrusted (``table.trusted = False``):
its choices are still used (a valid choice still runs and is still correct), but its
``device_ms`` are not this machine's times and must not be compared with local ones
(for example as training data or against a fresh measurement).

Dispatch reads tables with ``load_or_none``: it never raises; a bad table gives ONE
warning per path, saying the default heuristic is used instead, and returns None.

Example::

    >>> from gemmtune.table import load, required_choices
    >>> t = load("table.json")                                        # doctest: +SKIP
    >>> required_choices(t, Problem.from_sizes(32, 32, 28672, "bf16"))  # doctest: +SKIP
    [Choice(family='splitk', ...), Choice(family='aten', ...)]
"""

from __future__ import annotations

from ..provenance import major_minor, now_iso  # noqa: F401  (re-exported)
from .io import from_json, load, load_or_none, loads
from .merge import TableDiff, diff, merge
from .trust import as_table, check_provenance, required_choices
from .types import (CHOICE_FIELDS, DOC_FIELDS, ENTRY_FIELDS, MEASURED_PRODUCERS, MIXED_SEP, PRODUCERS,
                    PROVENANCE_FIELDS, SCHEMA_VERSION, LookupTable, TableChoice, TableError, TableWarning, provenance)

__all__ = ["from_json", "load", "load_or_none", "loads", "TableDiff", "diff", "merge", "as_table", "check_provenance",
           "required_choices", "CHOICE_FIELDS", "DOC_FIELDS", "ENTRY_FIELDS", "MEASURED_PRODUCERS", "MIXED_SEP",
           "PRODUCERS", "PROVENANCE_FIELDS", "SCHEMA_VERSION", "LookupTable", "TableChoice", "TableError",
           "TableWarning", "provenance", "major_minor", "now_iso"]
