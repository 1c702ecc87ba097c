"""Reading the JSON files gemmtune saves (dispatchers, models, bench results), with
errors that name the file instead of a traceback from deep inside json."""

from __future__ import annotations

import json
import os
from pathlib import Path


def read_json(path: str | os.PathLike, error: type[Exception] = ValueError):
    """Parse the JSON file at ``path``; raise ``error`` naming the file when it cannot."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
