"""The lookup table: the best choices per problem, as JSON with provenance.

Format (schema_version 1)::

    {
      "schema_version": 1,
      "provenance": {"device_name": "NVIDIA H100 80GB HBM3", "capability": "9.0",
                     "torch": "2.11.0", "triton": "3.6.0", "gemmtune": "0.1.0",
                     "created": "2026-11-21T23:59:00Z", "produced_by": "tuned"},
      "entries": [
        {"key": "mm:M32-N32-K28672:bf16->bf16:row.a/row.a",
         "choices": [{"id": "splitk:BM32-BN32-BK128-S4-W4-G8-SK64-atomic", "device_ms": 0.0031},
                     {"id": "aten", "device_ms": 0.0071}]}
      ]
    }

Entries are sorted by key and choices by time, and the file is written with sorted
keys, one entry per block, so tables diff well. The problem key carries op,
dtypes, layouts, alignment and M, N, K (see Problem.key).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from .problem import Problem
from .configs import Choice

SCHEMA_VERSION = 1
PRODUCERS = ("tuned", "predicted", "by-hand", "merged")
PROVENANCE_FIELDS = ("device_name", "capability", "torch", "triton", "gemmtune", "created", "produced_by")


class TableError(ValueError):
    """A lookup table that cannot be used; the message names the file, entry and field."""


@dataclass(frozen=True)
class TableChoice:
    choice: Choice
    device_ms: float | None = None


@dataclass
class LookupTable:
    provenance: dict
    entries: dict[str, list[TableChoice]] = field(default_factory=dict)

    def choices(self, problem: Problem) -> list[TableChoice]:
        return self.entries.get(problem.key, [])

    def to_json(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "provenance": dict(sorted(self.provenance.items())),
            "entries": [
                {"key": key, "choices": [
                    {"id": tc.choice.id, **({"device_ms": tc.device_ms} if tc.device_ms is not None else {})}
                    for tc in choices]}
                for key, choices in sorted(self.entries.items())
            ],
        }

    def save(self, path: str | os.PathLike) -> Path:
        """Write atomically (temp file + rename): a crash never leaves half a table."""
        path = Path(path)
        doc = self.to_json()
        lines = ["{", f'  "schema_version": {SCHEMA_VERSION},',
                 f'  "provenance": {json.dumps(doc["provenance"], sort_keys=True)},', '  "entries": [']
        for i, e in enumerate(doc["entries"]):
            sep = "," if i < len(doc["entries"]) - 1 else ""
            lines.append("    " + json.dumps(e, sort_keys=True) + sep)
        lines += ["  ]", "}"]
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, path)
        return path


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def provenance(device_name: str, capability: str, torch_v: str, triton_v: str, gemmtune_v: str,
               produced_by: str = "tuned") -> dict:
    return {"device_name": device_name, "capability": capability, "torch": torch_v,
            "triton": triton_v, "gemmtune": gemmtune_v, "created": now_iso(),
            "produced_by": produced_by}


def _err(path, where: str, msg: str) -> TableError:
    return TableError(f"{path}: {where}: {msg}")


def from_json(doc, path: str = "<table>") -> LookupTable:
    """Validate a parsed document; every problem raises TableError naming file, entry, field."""
    if not isinstance(doc, dict):
        raise _err(path, "document", f"must be a JSON object, not {type(doc).__name__}")
    unknown = set(doc) - {"schema_version", "provenance", "entries"}
    if unknown:
        raise _err(path, "document", f"unknown field(s) {sorted(unknown)}")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise _err(path, "schema_version", f"expected {SCHEMA_VERSION}, got {doc.get('schema_version')!r}")
    prov = doc.get("provenance")
    if not isinstance(prov, dict):
        raise _err(path, "provenance", "missing or not an object")
    for f in PROVENANCE_FIELDS:
        if not isinstance(prov.get(f), str):
            raise _err(path, f"provenance.{f}", f"missing or not a string (got {prov.get(f)!r})")
    extra = set(prov) - set(PROVENANCE_FIELDS)
    if extra:
        raise _err(path, "provenance", f"unknown field(s) {sorted(extra)}")
    if prov["produced_by"] not in PRODUCERS:
        raise _err(path, "provenance.produced_by", f"must be one of {PRODUCERS}, got {prov['produced_by']!r}")
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise _err(path, "entries", "missing or not a list")
    table = LookupTable(dict(prov))
    for i, e in enumerate(entries):
        where = f"entries[{i}]"
        if not isinstance(e, dict):
            raise _err(path, where, "must be an object")
        extra = set(e) - {"key", "choices"}
        if extra:
            raise _err(path, where, f"unknown field(s) {sorted(extra)}")
        key = e.get("key")
        if not isinstance(key, str):
            raise _err(path, f"{where}.key", "missing or not a string")
        where = f"entries[{i}] ({key})"
        try:
            problem = Problem.from_key(key)
        except (ValueError, TypeError) as ex:
            raise _err(path, f"{where}.key", str(ex)) from None
        if problem.key != key:
            raise _err(path, f"{where}.key", f"not in canonical form (expected {problem.key!r})")
        if key in table.entries:
            raise _err(path, f"{where}.key", "duplicate entry")
        choices = e.get("choices")
        if not isinstance(choices, list) or not choices:
            raise _err(path, f"{where}.choices", "must be a non-empty list")
        parsed = []
        for j, c in enumerate(choices):
            cw = f"{where}.choices[{j}]"
            if not isinstance(c, dict):
                raise _err(path, cw, "must be an object")
            extra = set(c) - {"id", "device_ms"}
            if extra:
                raise _err(path, cw, f"unknown field(s) {sorted(extra)}")
            if not isinstance(c.get("id"), str):
                raise _err(path, f"{cw}.id", "missing or not a string")
            try:
                choice = Choice.parse(c["id"])
                from . import kernels
                kernels.get(choice.family).validate(problem.padded() if choice.pad else problem,
                                                    choice.config)
            except (ValueError, TypeError) as ex:
                raise _err(path, f"{cw}.id", str(ex)) from None
            ms = c.get("device_ms")
            if ms is not None and (isinstance(ms, bool) or not isinstance(ms, (int, float))
                                   or not math.isfinite(ms) or ms <= 0):
                raise _err(path, f"{cw}.device_ms", f"must be a positive finite number, got {ms!r}")
            parsed.append(TableChoice(choice, float(ms) if ms is not None else None))
        table.entries[key] = parsed
    return table


def load(path: str | os.PathLike) -> LookupTable:
    """Read and validate a table file; raises TableError with the file, entry and field."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise TableError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise TableError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    return from_json(doc, str(path))
