"""Learned models that ship inside the package (``gemmtune/data/models/*.json``; a
ranker's LightGBM text model beside its JSON, ``*.lgbm.txt``, gzipped as ``*.lgbm.txt.gz`` here).

Each file is a ``LearnedModel`` saved with its provenance (GPU, triton version,
training set, held-out metrics). ``default_model`` (gemmtune.model) picks the one
made on the GPU it is asked about and loads it with ``load_model``, which trusts it
only with the same triton MAJOR.MINOR; on any other GPU or triton the analytic
model ranks instead, after a ``ModelWarning``.

Example::

    >>> from gemmtune.model.shipped import shipped_models
    >>> [p.name for p in shipped_models()]
    ['nvidia-h100-rank.json', 'nvidia-h100.json', 'nvidia-h200-rank.json', 'nvidia-h200.json']
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from ..device import DeviceInfo
from ..provenance import MODEL, Provenance

SHIPPED_DIR = Path(__file__).resolve().parents[1] / "data" / "models"


def shipped_models() -> list[Path]:
    """The model files that ship with this gemmtune, sorted by name."""
    return sorted(SHIPPED_DIR.glob("*.json")) if SHIPPED_DIR.is_dir() else []


@functools.lru_cache(maxsize=None)
def _provenance(path: str, mtime_ns: int) -> dict:
    try:
        doc = json.loads(Path(path).read_text())
        prov = doc.get("provenance", {}) if isinstance(doc, dict) else {}
        return prov if isinstance(prov, dict) else {}
    except (OSError, ValueError):
        return {}


def provenance(path: Path) -> dict:
    """A shipped file's provenance ({} when unreadable: the loader then names the problem)."""
    return _provenance(str(path), path.stat().st_mtime_ns)


def _same_gpu(a: str, b: str) -> bool:
    """'h200' and 'NVIDIA H200' name the same built-in device (provenance.MODEL)."""
    return Provenance(a).same_device(Provenance(b), MODEL)


def _kind(path: Path) -> str:
    try:
        doc = json.loads(path.read_text())
        return str(doc.get("family", "")) if isinstance(doc, dict) else ""
    except (OSError, ValueError):
        return ""


def shipped_for(device: DeviceInfo) -> Path | None:
    """The shipped model made on ``device``'s GPU (by name), or None. Where a ranker
    (lgbm_rank, the H200's default since benchmarks/results/2026-11-24-ranker) and a numpy
    model both ship, the ranker: it predicts with lightgbm when that imports and with
    ``lgbm_text``'s numpy reader of its trees otherwise."""
    mine = [p for p in shipped_models() if _same_gpu(str(provenance(p).get("device_name", "")), device.name)]
    ranked = sorted(mine, key=lambda p: _kind(p) != "lgbm_rank")  # rankers first
    return ranked[0] if ranked else None


def describe() -> list[str]:
    """'GPU (triton X.Y.Z, file)' of every shipped model, for messages."""
    out = []
    for path in shipped_models():
        prov = provenance(path)
        out.append(f"{prov.get('device_name', '?')} with triton {prov.get('triton', '?')} ({path.name})")
    return out
