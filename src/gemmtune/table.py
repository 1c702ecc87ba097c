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

import dataclasses
import json
import math
import os
import reprlib
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .configs import Choice
from .device import DeviceInfo
from .problem import Problem
from .provenance import TABLE, Provenance, major_minor, now_iso  # noqa: F401  (major_minor, now_iso: re-exported)

SCHEMA_VERSION = 1
PRODUCERS = ("tuned", "predicted", "by-hand", "merged")
# Tables whose device_ms are measurements (merge keeps only measured times).
MEASURED_PRODUCERS = ("tuned", "merged")
PROVENANCE_FIELDS = tuple(f.name for f in dataclasses.fields(Provenance))
DOC_FIELDS = ("schema_version", "provenance", "entries")
ENTRY_FIELDS = ("key", "choices")
CHOICE_FIELDS = ("id", "device_ms")
MIXED_SEP = " + "  # joins the differing versions / devices of a merged table


class TableError(ValueError):
    """A lookup table that cannot be used; the message names the file, entry and field."""


class TableWarning(UserWarning):
    """A usable table with a caveat: from another GPU / Triton, or ignored (load_or_none)."""


@dataclass(frozen=True)
class TableChoice:
    choice: Choice
    device_ms: float | None = None


@dataclass
class LookupTable:
    """Problem key -> ordered choices, plus where the table came from.

    ``trusted`` turns False when ``check_provenance`` finds another GPU or Triton;
    ``source`` is the file it was loaded from. Neither takes part in equality.
    """

    provenance: dict
    entries: dict[str, list[TableChoice]] = field(default_factory=dict)
    trusted: bool = field(default=True, compare=False)
    source: str | None = field(default=None, compare=False)

    def choices(self, problem: Problem) -> list[TableChoice]:
        return self.entries.get(problem.key, [])

    def best(self, problem: Problem) -> Choice | None:
        """The first choice of the problem's entry, or None when it has none."""
        tcs = self.entries.get(problem.key)
        return tcs[0].choice if tcs else None

    @property
    def measured(self) -> bool:
        """True when device_ms are measurements (tuned or merged), not estimates."""
        return self.provenance.get("produced_by") in MEASURED_PRODUCERS

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

    def dumps(self) -> str:
        """The file text: sorted keys, one entry per line (diff-friendly)."""
        doc = self.to_json()
        lines = ["{", f'  "schema_version": {SCHEMA_VERSION},',
                 f'  "provenance": {json.dumps(doc["provenance"], sort_keys=True)},', '  "entries": [']
        for i, e in enumerate(doc["entries"]):
            sep = "," if i < len(doc["entries"]) - 1 else ""
            lines.append("    " + json.dumps(e, sort_keys=True) + sep)
        lines += ["  ]", "}"]
        return "\n".join(lines) + "\n"

    def save(self, path: str | os.PathLike) -> Path:
        """Write atomically (temp file + rename): a crash never leaves half a table.

        The table is validated first: a table that ``load`` would refuse is never written.
        """
        path = Path(path)
        text = self.dumps()
        loads(text, str(path))  # raises TableError naming the entry
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
        return path


def provenance(device_name: str, capability: str, torch_v: str, triton_v: str, gemmtune_v: str,
               produced_by: str = "tuned") -> dict:
    """A table's provenance object (gemmtune.provenance.Provenance as a dict), dated now."""
    return Provenance(device_name, capability, torch_v, triton_v, gemmtune_v, now_iso(), produced_by).to_dict()


# ------------------------------------------------------------------------ validation
def _err(path, where: str, msg: str) -> TableError:
    return TableError(f"{path}: {where}: {msg}")


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 120
_REPR.maxlevel = 3


def _show(value) -> str:
    """A short repr for messages: a 1 MB string or a list nested 10^4 deep stays one line."""
    return _REPR.repr(value)


def _unknown(obj: dict, known: tuple[str, ...]) -> list[str]:
    return sorted(str(k) for k in obj if k not in known)


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
    if unknown:
        raise _err(path, "document", f"unknown field(s) {unknown}; expected {list(DOC_FIELDS)}")
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
        raise _err(path, "provenance", f"unknown field(s) {extra}")
    if prov["produced_by"] not in PRODUCERS:
        raise _err(path, "provenance.produced_by", f"must be one of {PRODUCERS}, got {_show(prov['produced_by'])}")
    device = _device_for(prov)
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise _err(path, "entries", "missing or not a list")
    from . import kernels

    table = LookupTable(dict(prov), source=path)
    for i, e in enumerate(entries):
        where = f"entries[{i}]"
        if not isinstance(e, dict):
            raise _err(path, where, f"must be an object, not {type(e).__name__}")
        extra = _unknown(e, ENTRY_FIELDS)
        if extra:
            raise _err(path, where, f"unknown field(s) {extra}")
        key = e.get("key")
        if not isinstance(key, str):
            raise _err(path, f"{where}.key", f"missing or not a string (got {_show(key)})")
        where = f"entries[{i}] ({key if len(key) <= 200 else key[:200] + '...'})"
        try:
            problem = Problem.from_key(key)  # refuses non-canonical keys, naming the canonical one
        except (ValueError, TypeError) as ex:
            raise _err(path, f"{where}.key", str(ex)) from None
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
                raise _err(path, cw, f"unknown field(s) {extra}")
            cid = c.get("id")
            if not isinstance(cid, str):
                raise _err(path, f"{cw}.id", f"missing or not a string (got {_show(cid)})")
            try:
                choice = Choice.parse(cid)
            except (ValueError, TypeError) as ex:
                raise _err(path, f"{cw}.id", str(ex)) from None
            if choice.id != cid:
                raise _err(path, f"{cw}.id", f"{cid!r} is not canonical; did you mean {choice.id!r}?")
            if cid in seen:
                raise _err(path, f"{cw}.id", f"{cid!r} is listed twice")
            seen.add(cid)
            runs_on = problem.padded() if choice.pad else problem
            fam = kernels.get(choice.family)
            try:
                fam.validate(runs_on, choice.config)
            except (ValueError, TypeError) as ex:
                raise _err(path, f"{cw}.id", f"{cid}: {ex}") from None
            if device is not None:
                reason = fam.constraint(choice.config, runs_on, device)
                if reason is not None:
                    raise _err(path, f"{cw}.id", f"{cid} cannot run on {device.name} "
                                                 f"(provenance.device_name): {reason}")
            ms = c.get("device_ms")
            if ms is not None and (isinstance(ms, bool) or not isinstance(ms, (int, float))
                                   or not math.isfinite(ms) or ms <= 0):
                raise _err(path, f"{cw}.device_ms", f"must be a positive finite number, got {_show(ms)}")
            parsed.append(TableChoice(choice, float(ms) if ms is not None else None))
        table.entries[key] = parsed
    return table


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


_WARNED_PATHS: set[str] = set()  # load_or_none warns once per path, not once per call


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
        check_provenance(table, device_name, triton_version)
    return table


# --------------------------------------------------------------------------- trust
def check_provenance(table: LookupTable, device_name: str, triton_version: str) -> list[str]:
    """Compare the table's provenance with this machine; warn, and return the warnings.

    Another GPU or another Triton MAJOR.MINOR warns (``TableWarning``) and sets
    ``table.trusted = False``: the choices stay usable, the times are not this
    machine's. See the module docstring for the whole policy.

    Example::

        >>> check_provenance(t, "NVIDIA H200", "3.6.0")   # doctest: +SKIP
        ['table.json: tuned on 'NVIDIA H100 80GB HBM3', this GPU is 'NVIDIA H200': ...']
    """
    prov = table.provenance
    src = table.source or "lookup table"
    out = []
    theirs = prov.get("device_name", "")
    differ = Provenance.from_dict(prov).mismatches(Provenance(device_name, triton=triton_version), TABLE)
    if "device" in differ:
        out.append(f"{src}: made on {theirs!r}, this GPU is {device_name!r}: its choices are still used, "
                   "but its device_ms are not this GPU's times (table marked untrusted)")
    if "triton" in differ:
        out.append(f"{src}: made with triton {prov.get('triton')!r}, this is triton {triton_version!r} "
                   "(another MAJOR.MINOR generates other code): its choices are still used, "
                   "but its device_ms are not this machine's times (table marked untrusted)")
    for msg in out:
        warnings.warn(msg, TableWarning, stacklevel=2)
    table.trusted = not out
    return out


def required_choices(table: LookupTable | None, problem: Problem) -> list[Choice]:
    """The choices the table lists for ``problem`` (in its order), or [] without an entry.

    Whatever filters candidates (a performance model's top-k, a budget) must keep
    these: choices listed in the table are always among those benchmarked.

    Example::

        >>> p = Problem.from_sizes(32, 32, 8192, "bf16")
        >>> t = LookupTable({}, {p.key: [TableChoice(Choice.parse("decompose_k:s8"), 0.01)]})
        >>> [c.id for c in required_choices(t, p)], required_choices(t, p.with_sizes(k=4096))
        (['decompose_k:s8'], [])
    """
    if table is None:
        return []
    return [tc.choice for tc in table.choices(problem)]


def as_table(table: LookupTable | str | os.PathLike | None) -> LookupTable | None:
    """A LookupTable from a table, a path (loaded and validated) or None."""
    if table is None or isinstance(table, LookupTable):
        return table
    if isinstance(table, (str, os.PathLike)):
        return load(table)
    raise TypeError(f"table must be a LookupTable, a path or None, not {type(table).__name__}")


# ---------------------------------------------------------------------- merge, diff
def _joined(values) -> str:
    out: list[str] = []
    for v in values:
        for part in v.split(MIXED_SEP):
            if part not in out:
                out.append(part)
    return MIXED_SEP.join(out)


def merge(tables: list[LookupTable], *, allow_mixed_devices: bool = False) -> LookupTable:
    """One table holding every entry of ``tables``; produced_by becomes "merged".

    Per problem, measured choices (device_ms from a tuned or merged table) come
    first, fastest first (an id measured twice keeps its faster time); then the
    unmeasured ones in the order the inputs list them, without times (an estimate or
    a hand-typed number is not a measurement). Tables from different GPUs
    (device_name or capability) are refused unless ``allow_mixed_devices``: their
    times do not compare; a mixed table's device_name joins the names with " + ".

    Example::

        >>> merged = merge([load("a.json"), load("b.json")])   # doctest: +SKIP
    """
    if not tables:
        raise ValueError("merge needs at least one table")
    devices = []
    for t in tables:
        d = (t.provenance["device_name"], t.provenance["capability"])
        if d not in devices:
            devices.append(d)
    if len(devices) > 1 and not allow_mixed_devices:
        names = "; ".join(f"{t.source or f'table {i}'}: {t.provenance['device_name']} "
                          f"(capability {t.provenance['capability']})" for i, t in enumerate(tables))
        raise TableError(f"refusing to merge tables from different GPUs ({names}): their times do not "
                         "compare; pass --allow-mixed-devices (allow_mixed_devices=True) to merge anyway")
    tritons = {t.provenance["triton"] for t in tables}
    if len(tritons) > 1:
        warnings.warn(f"merging tables made with different triton versions {sorted(tritons)}: "
                      "their times are compared as they are", TableWarning, stacklevel=2)
    keys = sorted({k for t in tables for k in t.entries})
    out = LookupTable(provenance(
        _joined(t.provenance["device_name"] for t in tables),
        _joined(t.provenance["capability"] for t in tables),
        _joined(t.provenance["torch"] for t in tables),
        _joined(t.provenance["triton"] for t in tables),
        _joined(t.provenance["gemmtune"] for t in tables), "merged"))
    for key in keys:
        measured: dict[str, TableChoice] = {}
        unmeasured: dict[str, TableChoice] = {}
        for t in tables:
            for tc in t.entries.get(key, []):
                cid = tc.choice.id
                if t.measured and tc.device_ms is not None:
                    old = measured.get(cid)
                    if old is None or tc.device_ms < old.device_ms:
                        measured[cid] = tc
                elif cid not in unmeasured:
                    unmeasured[cid] = TableChoice(tc.choice, None)
        ranked = sorted(measured.values(), key=lambda tc: (tc.device_ms, tc.choice.id))
        out.entries[key] = ranked + [tc for cid, tc in unmeasured.items() if cid not in measured]
    return out


@dataclass
class TableDiff:
    """What changed from table ``a`` to table ``b``, per problem key."""

    added: dict[str, list[TableChoice]] = field(default_factory=dict)
    removed: dict[str, list[TableChoice]] = field(default_factory=dict)
    changed: dict[str, tuple[list[TableChoice], list[TableChoice]]] = field(default_factory=dict)
    provenance: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def lines(self) -> list[str]:
        """One line per difference: '+' added, '-' removed, '~' changed (with time deltas)."""
        out = [f"  provenance.{f}: {a!r} -> {b!r}" for f, (a, b) in sorted(self.provenance.items())]
        for key, tcs in sorted(self.added.items()):
            out.append(f"+ {key}: {_choices_str(tcs)}")
        for key, tcs in sorted(self.removed.items()):
            out.append(f"- {key}: {_choices_str(tcs)}")
        for key, (old, new) in sorted(self.changed.items()):
            line = f"~ {key}: {_tc_str(old[0])} -> {_tc_str(new[0])}"
            a, b = old[0].device_ms, new[0].device_ms
            if a is not None and b is not None:
                line += f"  delta {b - a:+.4g} ms ({(b - a) / a * 100:+.1f}%)"
            if [tc.choice.id for tc in old] != [tc.choice.id for tc in new] and (len(old) > 1 or len(new) > 1):
                line += f"  [{', '.join(tc.choice.id for tc in old)}] -> [{', '.join(tc.choice.id for tc in new)}]"
            out.append(line)
        n = len(self.added) + len(self.removed) + len(self.changed)
        out.append(f"{len(self.added)} added, {len(self.removed)} removed, {len(self.changed)} changed"
                   if n else "no differences in entries")
        return out


def _tc_str(tc: TableChoice) -> str:
    return tc.choice.id + (f" ({tc.device_ms:.4g} ms)" if tc.device_ms is not None else "")


def _choices_str(tcs: list[TableChoice]) -> str:
    return ", ".join(_tc_str(tc) for tc in tcs)


def diff(a: LookupTable, b: LookupTable) -> TableDiff:
    """Entries added to, removed from and changed between ``a`` and ``b``.

    An entry changed when its choice ids, their order or their times differ; the
    time delta is that of the first (chosen) choice. Provenance differences other
    than ``created`` are listed too but do not count as differences.

    Example::

        >>> for line in diff(load("old.json"), load("new.json")).lines():   # doctest: +SKIP
        ...     print(line)
        ~ mm:M512-N512-K4096:bf16->bf16:row.a/row.a: triton_mm:... (0.02 ms) -> aten (0.019 ms)  delta -0.001 ms (-5.0%)
        0 added, 0 removed, 1 changed
    """
    d = TableDiff()
    for k in sorted(set(a.entries) | set(b.entries)):
        if k not in a.entries:
            d.added[k] = b.entries[k]
        elif k not in b.entries:
            d.removed[k] = a.entries[k]
        elif a.entries[k] != b.entries[k]:
            d.changed[k] = (a.entries[k], b.entries[k])
    for f in PROVENANCE_FIELDS:
        if f != "created" and a.provenance.get(f) != b.provenance.get(f):
            d.provenance[f] = (a.provenance.get(f), b.provenance.get(f))
    return d
