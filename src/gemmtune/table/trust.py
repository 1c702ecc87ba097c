"""Using a table: the trust policy (``check_provenance``: another GPU or Triton warns and marks it
untrusted), the choices it fixes for a problem, and ``as_table`` (a table or its path)."""

from __future__ import annotations

import os
import warnings

from ..configs import Choice
from ..problem import Problem
from ..provenance import TABLE, Provenance
from .io import load
from .types import LookupTable, TableChoice, TableWarning  # noqa: F401  (TableChoice: the doctest)

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
