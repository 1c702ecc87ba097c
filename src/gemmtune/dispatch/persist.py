"""Loading a saved dispatcher (``Dispatcher.save`` writes it): provenance checked, decisions kept
(re-verified on another GPU or software), the kernel binaries put back into Triton's cache."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from ..configs import Choice
from ..jsonio import read_json
from ..table import from_json as table_from_json
from .common import DIMS, FORMAT, SCHEMA_VERSION, Decision, HintChoice, ProvenanceWarning, provenance_mismatches
from .core import Dispatcher, _named, check_decision


def load(path: str | os.PathLike, *, timer=None, strict: bool = False) -> Dispatcher:
    """Restore a saved dispatcher: hints, hint choices, decisions, table; no tuning.

    Provenance is checked: another GPU (name or capability) or another triton or
    torch major.minor gives a ``ProvenanceWarning`` (``strict=True``: ValueError), and
    the saved decisions are then re-verified on their first call.

    Example::

        >>> mm = gemmtune.load("mm.json")    # doctest: +SKIP
    """
    path = Path(path)
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"{path}: not a saved gemmtune dispatcher (format != {FORMAT!r})")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path}: schema_version {doc.get('schema_version')!r}, expected {SCHEMA_VERSION}")
    prov = doc.get("provenance")
    if not isinstance(prov, dict):  # provenance_mismatches's AttributeError / a KeyError named neither file nor field
        raise ValueError(f"{path}: malformed dispatcher file: 'provenance' is missing or not an object")
    for field in ("dims", "hints"):
        # Dispatcher reads them with .get / [d]: a hand-edited "dims": 16 raised AttributeError
        # from inside its constructor, naming neither the file nor the field.
        if not isinstance(doc.get(field), dict):
            raise ValueError(f"{path}: malformed dispatcher file: {field!r} is missing or not an object "
                             f"(got {type(doc.get(field)).__name__})")
    problems = provenance_mismatches(prov)
    if problems:
        msg = f"{path}: " + "; ".join(problems) + (
            ": the saved choices may be slower here; decisions will be re-verified on first use")
        if strict:
            raise ValueError(msg)
        warnings.warn(msg, ProvenanceWarning, stacklevel=2)

    def size(v):
        # JSON gives ints as ints: int() of a hand-edited 1.5 or true made 1 without a word
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"a size must be an int, got {v!r}")
        return v

    def sizes(d):
        if d is None:
            return None
        mnk = tuple(size(d[x]) for x in DIMS)
        return (size(d["batch"]), *mnk) if "batch" in d else mnk

    def choice(entry, where: str) -> Choice:
        # Choice.parse names the id and what is wrong with it; this adds which entry holds it,
        # as Dispatcher's own check of the choices does (core._check_choices).
        try:
            return Choice.parse(entry["choice"])
        except ValueError as e:
            raise ValueError(f"{where} ({_named(sizes(entry['sizes']))}): {e}") from None

    def decision(d, i: int) -> tuple[tuple, Decision]:
        # Its fields read as the constructor reads a Decision's (core.check_decision, which says why).
        s, where = sizes(d["sizes"]), f"decisions[{i}] ({_named(sizes(d['sizes']))})"
        hint, reason = sizes(d["hint"]), d.get("reason", "")
        times = check_decision(where, s, source=d["source"], verified=d["verified"], hint=hint,
                               times_ms=d.get("times_ms"), reason=reason)
        return s, Decision(choice(d, f"decisions[{i}]"), d["source"], hint, d["verified"] and not problems, times,
                           reason)

    try:
        hint_choices = [HintChoice(sizes(h["sizes"]), choice(h, f"hint_choices[{i}]"), h.get("device_ms"))
                        for i, h in enumerate(doc["hint_choices"])]
        decisions = dict(decision(d, i) for i, d in enumerate(doc["decisions"]))
        table = table_from_json(doc["table"], str(path)) if doc.get("table") is not None else None
        note = _restore_binaries(path, doc.get("binaries"), skip=bool(problems))
        d = Dispatcher(dims=doc["dims"], dtype=doc["dtype"], hints=doc["hints"],
                          hint_choices=hint_choices, mode=doc["mode"], table=table, timer=timer,
                          verify=bool(doc.get("verify", True)), layout_a=doc["layout_a"],
                          layout_b=doc["layout_b"], provenance=prov, decisions=decisions,
                          batch=doc.get("batch"))  # (compile_bmm's; files before it have none)
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, ValueError) and str(e).startswith(f"{path}:"):
            raise  # names the file already (the binaries field, a table)
        # A bad value (an int() of 'x', an unknown family or mode) said neither which file nor that it was one.
        raise ValueError(f"{path}: malformed dispatcher file: {type(e).__name__}: {e}") from None
    d.binaries_note = note
    return d


def _restore_binaries(path: Path, spec, *, skip: bool) -> str:
    """Put the saved kernel binaries into Triton's cache; a one-line note of what happened."""
    if spec is None:
        return "no kernel binaries saved: kernels compile on first launch"
    if not isinstance(spec, dict) or not isinstance(spec.get("dir"), str) or not isinstance(
            spec.get("kernels"), list) or not all(isinstance(n, str) for n in spec["kernels"]):
        raise ValueError(f"{path}: malformed 'binaries' field: expected {{'dir': str, 'kernels': [str]}}")
    if skip:
        return "kernel binaries not restored: saved on another GPU or software version"
    for name in (spec["dir"], *spec["kernels"]):
        if not name or "/" in name or "\\" in name or name in (".", ".."):
            raise ValueError(f"{path}: 'binaries' names must be plain folder names, got {name!r}")
    from .. import binaries as bins

    _n, note = bins.restore(path.with_name(spec["dir"]), spec["kernels"])
    return note
