"""Markdown tables as data, so that report tests assert on cells, not on whole rendered lines."""

from __future__ import annotations


def md_tables(md: str) -> list[list[dict[str, str]]]:
    """The Markdown tables of ``md``: each a list of rows, a row a dict from its column's
    header to the stripped cell (so tests assert on cells, not on whole rendered lines)."""
    tables, block = [], []
    for line in [*md.splitlines(), ""]:
        if line.startswith("|"):
            block.append([c.strip() for c in line.strip().strip("|").split("|")])
            continue
        if len(block) >= 2:
            header, rows = block[0], [r for r in block[1:] if not all(set(c) <= set("-: ") for c in r)]
            tables.append([dict(zip(header, r)) for r in rows])
        block = []
    return tables


def md_rows(md: str, **cells: str) -> list[dict[str, str]]:
    """Every table row whose named cells hold these values (``_`` in a keyword's name stands for a
    space; pass headers with other characters as ``**{"M×N×K": ...}``)."""
    want = {k.replace("_", " "): v for k, v in cells.items()}
    return [r for t in md_tables(md) for r in t if all(r.get(k) == v for k, v in want.items())]
