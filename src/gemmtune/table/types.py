"""The lookup table's types: ``LookupTable`` (problem key -> ordered choices, provenance),
``TableChoice``, the errors and warnings, the format's constants."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..configs import Choice
from ..problem import Problem
from ..provenance import Provenance, now_iso
from ..jsonio import write_atomic

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
    """One choice of a table entry, with its measured time. ``choice`` may be given as its id
    (``TableChoice("triton_mm:BM64-BN64-BK32-S3-W4-G8")``): a string left as it was failed deep
    inside the tuner's planning ("'str' object has no attribute 'needs_compile'")."""

    choice: Choice
    device_ms: float | None = None

    def __post_init__(self):
        if isinstance(self.choice, str):
            object.__setattr__(self, "choice", Choice.parse(self.choice))
        elif not isinstance(self.choice, Choice):
            raise TypeError(f"TableChoice.choice must be a Choice or its id string, not {type(self.choice).__name__}")


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
        from .io import loads
        loads(text, str(path))  # raises TableError naming the entry
        return write_atomic(path, text)


def provenance(device_name: str, capability: str, torch_v: str, triton_v: str, gemmtune_v: str,
               produced_by: str = "tuned") -> dict:
    """A table's provenance object (gemmtune.provenance.Provenance as a dict), dated now."""
    return Provenance(device_name, capability, torch_v, triton_v, gemmtune_v, now_iso(), produced_by).to_dict()
