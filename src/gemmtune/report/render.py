"""Writing a bench JSON's report: the Markdown and, with matplotlib, its plots."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from ..jsonio import write_atomic
from .files import load_bench
from .markdown import render_markdown
from .plots import _PLOTTERS, PLOTS

def render(doc: dict, out_dir: str | os.PathLike, stem: str, *, plots: bool = True) -> dict[str, Path]:
    """Write ``<stem>.md`` and, with matplotlib, ``<stem>-{speedup,roofline,tuning}.png`` under
    ``out_dir``. Returns {'markdown': path, 'speedup': path, ...}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    names: dict[str, str] = {}
    if plots and importlib.util.find_spec("matplotlib") is None:
        doc = {**doc, "notes": [*doc.get("notes", []),
                                "plots not drawn: matplotlib is not installed (pip install 'gemmtune[report]')"]}
    elif plots:
        failed = []
        for k in PLOTS:
            # A plot that cannot be drawn costs its picture, not the Markdown (a suite's name that
            # matplotlib could not parse as math, "$x_{$", ended a whole bench run with no report).
            try:
                written[k] = _PLOTTERS[k](doc, out / f"{stem}-{k}.png")
                names[k] = written[k].name
            except Exception as e:  # noqa: BLE001 - said in the report's notes
                failed.append(f"plot {k} not drawn: {type(e).__name__}: {' '.join(str(e).split())}"[:300])
        if failed:
            doc = {**doc, "notes": [*doc.get("notes", []), *failed]}
    md = out / f"{stem}.md"
    # Atomically, as the bench JSON is (files.save_bench): written in place, a reader (or a run killed
    # mid-write) saw the previous report cut short.
    write_atomic(md, render_markdown(doc, names))
    written["markdown"] = md
    return written


def render_file(path: str | os.PathLike, out_dir: str | os.PathLike | None = None, *,
                plots: bool = True) -> dict[str, Path]:
    """Render a bench JSON beside itself (or into ``out_dir``)."""
    path = Path(path)
    doc = load_bench(path)
    return render(doc, out_dir or path.parent, path.name.removesuffix(".gz").removesuffix(".json"), plots=plots)
