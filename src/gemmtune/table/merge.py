"""Combining tables: ``merge`` (per problem, measured choices first, fastest first) and ``diff``."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from ..provenance import TABLE, Provenance, major_minor
from .types import PROVENANCE_FIELDS, MIXED_SEP, LookupTable, TableChoice, TableError, TableWarning, provenance

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
    a hand-typed number is not a measurement). Tables from different GPUs (by
    device_name, compared as ``check_provenance`` compares it: case and surrounding
    spaces ignored) are refused unless ``allow_mixed_devices``: their times do not
    compare; a mixed table's device_name joins the names with " + ".

    Example::

        >>> merged = merge([load("a.json"), load("b.json")])   # doctest: +SKIP
    """
    if not tables:
        raise ValueError("merge needs at least one table")
    # One GPU by the trust policy's rule (Provenance.same_device under TABLE, as check_provenance
    # compares a table with this GPU): the name without case or surrounding spaces, a CPU one device
    # with or without the interpreter. Compared as exact (device_name, capability) pairs, tables of
    # one H100 whose names differed in case, or a by-hand table without a capability, were two GPUs:
    # refused, or with --allow-mixed-devices made a mixed table, untrusted on that very H100.
    first = Provenance.from_dict(tables[0].provenance)
    one_device = all(first.same_device(Provenance.from_dict(t.provenance), TABLE) for t in tables)
    if not one_device and not allow_mixed_devices:
        names = "; ".join(f"{t.source or f'table {i}'}: {t.provenance['device_name']} "
                          f"(capability {t.provenance['capability']})" for i, t in enumerate(tables))
        raise TableError(f"refusing to merge tables from different GPUs ({names}): their times do not "
                         "compare; pass --allow-mixed-devices (allow_mixed_devices=True) to merge anyway")
    tritons = {t.provenance["triton"] for t in tables}
    # By MAJOR.MINOR, as the trust policy compares them (check_provenance): a patch release
    # generates the same code, and its tables' times compare.
    versions = {major_minor(v) for v in tritons}
    if len(tritons) > 1 and (len(versions) > 1 or None in versions):
        warnings.warn(f"merging tables made with different triton versions {sorted(tritons)}: "
                      "their times are compared as they are", TableWarning, stacklevel=2)
    keys = sorted({k for t in tables for k in t.entries})
    if one_device:  # its first table's spelling, and the capability any of them gives
        device_name = tables[0].provenance["device_name"]
        capability = next((t.provenance["capability"] for t in tables if t.provenance["capability"]), "")
    else:
        device_name = _joined(t.provenance["device_name"] for t in tables)
        capability = _joined(t.provenance["capability"] for t in tables)
    out = LookupTable(provenance(
        device_name,
        capability,
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
