"""Reading a lookup table: ``from_json`` / ``loads`` / ``load`` validate every field and raise
``TableError`` naming the file, entry and field; ``load_or_none`` never raises (dispatch)."""

from __future__ import annotations

import json
import math
import os
import reprlib
import warnings
from pathlib import Path

from ..configs import Choice
from ..device import DeviceInfo
from ..problem import Problem
from .types import (CHOICE_FIELDS, DOC_FIELDS, ENTRY_FIELDS, PRODUCERS, PROVENANCE_FIELDS, SCHEMA_VERSION,
                    MIXED_SEP, LookupTable, TableChoice, TableError, TableWarning)

_WARNED_PATHS: set[str] = set()  # load_or_none warns once per path

def _err(path, where: str, msg: str) -> TableError:
    return TableError(f"{path}: {where}: {msg}")


_REPR = reprlib.Repr()

def _show(value) -> str:
    """A short repr for messages: a 1 MB string or a list nested 10^4 deep stays one line."""
    return _REPR.repr(value)


def _cut(msg: str, most: int = 400) -> str:
    """``msg`` cut to ``most`` characters: Problem.from_key and Choice.parse quote what they were
    given in full, and a key or choice id of 100 KB (a corrupted or generated file) made an error
    line of 100-200 KB, as ``_show`` keeps the fields' values from doing."""
    return msg if len(msg) <= most else msg[:most] + f"... ({len(msg)} characters)"


def _quote(text: str, most: int = 200) -> str:
    """``repr(text)``, its first ``most`` characters only when longer (see ``_cut``)."""
    return repr(text) if len(text) <= most else f"{text[:most]!r}... ({len(text)} characters)"


def _unknown(obj: dict, known: tuple[str, ...]) -> list[str]:
    return sorted(str(k) for k in obj if k not in known)


def _listed(names: list[str], most: int = 5) -> str:
    """The first ``most`` of ``names``, each shortened, and how many there are: an Inductor table
    given for a gemmtune one has one unknown field per key, and the message listed them all (a line
    of ~100 KB for a few hundred entries)."""
    shown = ", ".join(_show(n) for n in names[:most])
    return f"[{shown}]" if len(names) <= most else f"[{shown}, ...] ({len(names)} in all)"


def _looks_like_inductor_table(doc: dict) -> bool:
    """What ``gemmtune lut export-inductor`` writes: Inductor keys -> lists of configs."""
    return bool(doc) and "schema_version" not in doc and all(
        isinstance(v, list) and all(isinstance(c, dict) and "template_id" in c for c in v) for v in doc.values())


def _device_for(prov: dict) -> DeviceInfo | None:
    """The built-in GPU the provenance names, or None (unknown GPU, interpreter, mixed)."""
    name = prov["device_name"]
    if MIXED_SEP in name:
        return None
    try:
        return DeviceInfo.lookup(name)
    except ValueError:
        return None


def from_json(doc, path: str = "<table>") -> LookupTable:
    """Validate a parsed document; every problem raises TableError naming file, entry, field."""
    if not isinstance(doc, dict):
        raise _err(path, "document", f"must be a JSON object, not {type(doc).__name__}")
    unknown = _unknown(doc, DOC_FIELDS)
    if unknown and _looks_like_inductor_table(doc):
        raise _err(path, "document", "an Inductor lookup table (what gemmtune lut export-inductor writes), not a "
                                     "gemmtune lookup table; give the gemmtune table it was exported from")
    if unknown:
        raise _err(path, "document", f"unknown field(s) {_listed(unknown)}; expected {list(DOC_FIELDS)}")
    sv = doc.get("schema_version")
    # bool is an int and 1.0 == 1: both are refused, the field is an integer.
    if type(sv) is not int or sv != SCHEMA_VERSION:
        raise _err(path, "schema_version", f"expected {SCHEMA_VERSION}, got {_show(sv)}")
    prov = doc.get("provenance")
    if not isinstance(prov, dict):
        raise _err(path, "provenance", "missing or not an object")
    for f in PROVENANCE_FIELDS:
        if not isinstance(prov.get(f), str):
            raise _err(path, f"provenance.{f}", f"missing or not a string (got {_show(prov.get(f))})")
    extra = _unknown(prov, PROVENANCE_FIELDS)
    if extra:
        raise _err(path, "provenance", f"unknown field(s) {_listed(extra)}")
    if prov["produced_by"] not in PRODUCERS:
        raise _err(path, "provenance.produced_by", f"must be one of {PRODUCERS}, got {_show(prov['produced_by'])}")
    device = _device_for(prov)
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise _err(path, "entries", "missing or not a list")
    from .. import kernels

    table = LookupTable(dict(prov), source=path)
    for i, e in enumerate(entries):
        where = f"entries[{i}]"
        if not isinstance(e, dict):
            raise _err(path, where, f"must be an object, not {type(e).__name__}")
        extra = _unknown(e, ENTRY_FIELDS)
        if extra:
            raise _err(path, where, f"unknown field(s) {_listed(extra)}")
        key = e.get("key")
        if not isinstance(key, str):
            raise _err(path, f"{where}.key", f"missing or not a string (got {_show(key)})")
        where = f"entries[{i}] ({key if len(key) <= 200 else key[:200] + '...'})"
        try:
            problem = Problem.from_key(key)  # refuses non-canonical keys, naming the canonical one
        except (ValueError, TypeError) as ex:
            raise _err(path, f"{where}.key", _cut(str(ex))) from None
        if key in table.entries:
            raise _err(path, f"{where}.key", "duplicate entry")
        choices = e.get("choices")
        if not isinstance(choices, list) or not choices:
            raise _err(path, f"{where}.choices", "must be a non-empty list")
        parsed: list[TableChoice] = []
        seen: set[str] = set()
        for j, c in enumerate(choices):
            cw = f"{where}.choices[{j}]"
            if not isinstance(c, dict):
                raise _err(path, cw, f"must be an object, not {type(c).__name__}")
            extra = _unknown(c, CHOICE_FIELDS)
            if extra:
                raise _err(path, cw, f"unknown field(s) {_listed(extra)}")
            cid = c.get("id")
            if not isinstance(cid, str):
                raise _err(path, f"{cw}.id", f"missing or not a string (got {_show(cid)})")
            try:
                choice = Choice.parse(cid)
            except (ValueError, TypeError) as ex:
                raise _err(path, f"{cw}.id", _cut(str(ex))) from None
            if choice.id != cid:
                raise _err(path, f"{cw}.id", f"{_quote(cid)} is not canonical; did you mean {choice.id!r}?")
            if cid in seen:
                raise _err(path, f"{cw}.id", f"{_quote(cid)} is listed twice")
            seen.add(cid)
            runs_on = problem.padded() if choice.pad else problem
            fam = kernels.spec(choice.family)  # validate and constraint, without Triton
            try:
                fam.validate(runs_on, choice.config)
            except (ValueError, TypeError) as ex:
                raise _err(path, f"{cw}.id", _cut(f"{cid}: {ex}")) from None
            if device is not None:
                reason = fam.constraint(choice.config, runs_on, device)
                if reason is not None:
                    raise _err(path, f"{cw}.id", f"{cid} cannot run on {device.name} "
                                                 f"(provenance.device_name): {reason}")
            ms = c.get("device_ms")
            if ms is not None and (isinstance(ms, bool) or not isinstance(ms, (int, float))
                                   or not _finite_float(ms) or ms <= 0):
                raise _err(path, f"{cw}.device_ms", f"must be a positive finite number, got {_show(ms)}")
            parsed.append(TableChoice(choice, float(ms) if ms is not None else None))
        table.entries[key] = parsed
    return table


def _finite_float(x: int | float) -> bool:
    """Whether ``x`` is a finite float, or an int that converts to one. A JSON integer of 400
    digits is an exact Python int: ``math.isfinite`` raised OverflowError on it, a traceback that
    load_or_none (which must never raise) let out to the dispatch path."""
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def _no_duplicate_fields(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise _DuplicateField(k)
        d[k] = v
    return d


class _DuplicateField(Exception):
    pass


def loads(text: str | bytes, path: str = "<table>") -> LookupTable:
    """Parse and validate table text (or UTF-8 bytes)."""
    if isinstance(text, (bytes, bytearray)):
        from ..store.schema import SQLITE_MAGIC  # (lazy, as jsonio reads it: the store package imports more)

        if bytes(text[:len(SQLITE_MAGIC)]) == SQLITE_MAGIC:  # tune's other file, taken for the table
            raise TableError(f"{path}: a SQLite file (a results store, not a lookup table; "
                             f"gemmtune report --store {path} summarizes it)")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise TableError(f"{path}: not UTF-8 text: byte {e.start}: {e.reason}") from None
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicate_fields)
    except json.JSONDecodeError as e:
        raise TableError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except _DuplicateField as e:
        raise TableError(f"{path}: not a valid table: field {e.args[0]!r} appears twice in one object") from None
    except (ValueError, RecursionError) as e:  # e.g. an integer of 5,000 digits, or nesting 10^5 deep
        raise TableError(f"{path}: not valid JSON: {type(e).__name__}: {str(e)[:200]}") from None
    return from_json(doc, path)


def load(path: str | os.PathLike) -> LookupTable:
    """Read and validate a table file; raises TableError with the file, entry and field."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TableError(f"{path}: cannot read: {e.strerror or e}") from None
    return loads(data, str(path))


def load_or_none(path: str | os.PathLike, *, on_error: str = "warn", device_name: str | None = None,
                 triton_version: str | None = None) -> LookupTable | None:
    """Load a table for the dispatch path: never raises on a bad table.

    On any TableError it emits ONE ``TableWarning`` per path (``on_error="warn"``,
    later failures of the same path are silent) saying that the default heuristic is
    used instead, and returns None; ``on_error="ignore"`` returns None silently. With
    ``device_name`` and ``triton_version`` the provenance is checked too
    (``check_provenance``: warns, and marks the table untrusted).

    Example::

        >>> t = load_or_none("missing.json")   # doctest: +SKIP
        TableWarning: missing.json: cannot read: No such file or directory; ...
    """
    if on_error not in ("warn", "ignore"):
        raise ValueError(f"on_error must be 'warn' or 'ignore', got {on_error!r}")
    try:
        table = load(path)
    except TableError as e:
        key = str(Path(path).resolve()) if str(path) else str(path)
        if on_error == "warn" and key not in _WARNED_PATHS:
            _WARNED_PATHS.add(key)
            warnings.warn(f"{e}; ignoring this lookup table and using the default heuristic instead",
                          TableWarning, stacklevel=2)
        return None
    if device_name is not None and triton_version is not None:
        from .trust import check_provenance
        check_provenance(table, device_name, triton_version)
    return table
