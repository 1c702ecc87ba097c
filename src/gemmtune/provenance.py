"""Where a saved result came from, and whether it still holds on this machine.

One frozen ``Provenance`` (GPU name, compute capability, torch / triton / gemmtune versions,
date, how it was produced) for everything gemmtune saves: lookup tables (table.py), saved
dispatchers (dispatch.py) and the shipped learned models (model/shipped.py).
``a.mismatches(b, policy)`` names the facts that differ, by one set of rules:

- the device: by name (case and surrounding spaces ignored), and by capability where the
  policy says so; a built-in GPU's short name ('h200') matches its full name
  ('NVIDIA H200') where the policy allows aliases. One CPU is one device, whether its
  Triton kernels ran in the interpreter (a tuner's workers: 'cpu (Triton interpreter)',
  capability 'interp') or not ('cpu', 'cpu');
- library versions by MAJOR.MINOR only (``major_minor``): a patch release generates the
  same code; another minor may not.

The policies are the rules each user applies: ``TABLE`` (a table's times hold on the same
GPU and triton), ``DISPATCH`` (a saved dispatcher also checks the capability and torch)
and ``MODEL`` (a learned model: GPU by name or alias, and triton).

    >>> a = Provenance("NVIDIA H200", "9.0", "2.11.0+cu130", "3.6.0")
    >>> a.mismatches(Provenance("NVIDIA H200", "9.0", "2.11.1", "3.6.1"), DISPATCH)
    []
    >>> a.mismatches(Provenance("NVIDIA H100 80GB HBM3", "9.0", "2.10.0", "3.5.0"), DISPATCH)
    ['device', 'triton', 'torch']
    >>> a.mismatches(Provenance("h200", "", "", "3.6.0"), MODEL)
    []
    >>> Provenance("cpu (Triton interpreter)", "interp", "2.13.0", "3.6.0").mismatches(
    ...     Provenance("cpu", "cpu", "2.13.0", "3.6.0"), DISPATCH)
    []
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import re
from dataclasses import dataclass
from typing import Mapping

__all__ = ["Provenance", "Policy", "TABLE", "DISPATCH", "MODEL", "major_minor", "now_iso"]

_MAJOR_MINOR = re.compile(r"\s*(\d+)\.(\d+)(?:[.+\-a-zA-Z0-9]*)\s*")


def major_minor(version: str) -> tuple[int, int] | None:
    """(MAJOR, MINOR) of a version string such as '2.11.0+cu130' (None when unparseable).
    Tables, saved dispatchers and learned models are trusted across patch releases only.

    A merged table's versions are joined with " + " (gemmtune.table.MIXED_SEP): they have one
    MAJOR.MINOR when all of theirs agree. (Read as unparseable, a table merged from triton 3.6.0 and
    3.6.1 tables was untrusted everywhere, though each of its inputs was trusted on 3.6.x.)

    >>> major_minor("2.11.0+cu130"), major_minor("3.6"), major_minor("nightly")
    ((2, 11), (3, 6), None)
    >>> major_minor("3.6.0 + 3.6.1"), major_minor("3.5.0 + 3.6.0")
    ((3, 6), None)
    """
    found = set()
    for part in str(version).split(" + "):
        m = _MAJOR_MINOR.fullmatch(part)
        found.add((int(m.group(1)), int(m.group(2))) if m else None)
    return found.pop() if len(found) == 1 else None


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Policy:
    """What must match. ``capability``: compare compute capabilities too; ``aliases``: a
    built-in GPU's names match each other; ``libs``: the versions compared by MAJOR.MINOR;
    ``strict_versions``: a version that does not parse never matches (else two unparseable
    versions match each other)."""

    capability: bool = False
    aliases: bool = False
    libs: tuple[str, ...] = ("triton",)
    strict_versions: bool = False


TABLE = Policy(strict_versions=True)
DISPATCH = Policy(capability=True, libs=("triton", "torch"))
MODEL = Policy(aliases=True)


@dataclass(frozen=True)
class Provenance:
    """The facts saved with a result. ``capability`` is 'MAJOR.MINOR' on a GPU, 'interp' in
    the Triton interpreter, 'cpu' on a CPU without it; '' when not known."""

    device_name: str
    capability: str = ""
    torch: str = ""
    triton: str = ""
    gemmtune: str = ""
    created: str = ""
    produced_by: str = ""

    @classmethod
    def from_dict(cls, d: Mapping) -> Provenance:
        """From a saved provenance object; missing or non-string fields read as ''."""
        return cls(**{f.name: (v if isinstance(v := d.get(f.name, ""), str) else str(v) if v is not None else "")
                      for f in dataclasses.fields(cls)})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def current(cls, produced_by: str = "tuned", device=None) -> Provenance:
        """This machine's: the GPU ``device`` (a torch.device; default the current one), or the
        CPU named as the tuner's workers name it."""
        import torch
        import triton

        from . import __version__
        from .api import interpreter_enabled

        if torch.cuda.is_available() and (device is None or device.type == "cuda"):
            idx = torch.cuda.current_device() if device is None or device.index is None else device.index
            cap = torch.cuda.get_device_capability(idx)
            name, capability = torch.cuda.get_device_name(idx), f"{cap[0]}.{cap[1]}"
        elif interpreter_enabled():
            name, capability = "cpu (Triton interpreter)", "interp"
        else:
            name, capability = "cpu", "cpu"
        return cls(name, capability, torch.__version__, triton.__version__, __version__, now_iso(), produced_by)

    @property
    def is_cpu(self) -> bool:
        return self.device_name.strip().lower().startswith("cpu") and self.capability in ("cpu", "interp", "")

    def same_device(self, other: Provenance, policy: Policy = TABLE) -> bool:
        if self.is_cpu or other.is_cpu:
            return self.is_cpu and other.is_cpu
        if policy.capability and self.capability != other.capability:
            return False
        a, b = self.device_name.strip().lower(), other.device_name.strip().lower()
        if a == b:
            return True
        if not policy.aliases:
            return False
        from .device import DeviceInfo

        try:  # 'h200' and 'NVIDIA H200' name the same built-in device
            return DeviceInfo.lookup(a).name == DeviceInfo.lookup(b).name
        except ValueError:
            return False

    def mismatches(self, other: Provenance, policy: Policy = TABLE) -> list[str]:
        """The facts that differ under ``policy``: 'device', then each of ``policy.libs``
        whose MAJOR.MINOR differs (or does not parse), in that order; [] when all hold."""
        out = [] if self.same_device(other, policy) else ["device"]
        for lib in policy.libs:
            mine, theirs = major_minor(getattr(self, lib)), major_minor(getattr(other, lib))
            if mine != theirs or (mine is None and policy.strict_versions):
                out.append(lib)
        return out
