"""JSON as strict readers take it, for tests of files gemmtune writes."""

from __future__ import annotations

import json


def strict_loads(text: str):
    """json.loads refusing NaN / Infinity, as jq or a browser does."""
    def refuse(c):
        raise ValueError(f"not JSON: {c}")
    return json.loads(text, parse_constant=refuse)
