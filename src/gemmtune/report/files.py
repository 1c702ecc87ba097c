"""Bench JSON files: load (schema checked), save, their names, and merging partial runs."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from ..jsonio import read_json, write_atomic
from .records import GROUPS

SCHEMA = "gemmtune-bench/1"
# The note a bench JSON holds until its run has measured every shape (header "unmeasured": their names).
UNFINISHED = "run not finished"
# The note of a run whose --deadline left shapes out (gemmtune.bench.suite): "deadline: N of M ...".
DEADLINE = "deadline: "


def unfinished_note(left: list[str], total: int) -> str:
    return (f"{UNFINISHED}: {len(left)} of {total} shapes not measured (the run was interrupted or killed "
            f"before them): {', '.join(left)}")
_SAME = ("device_name", "torch", "triton", "gemmtune")


def load_bench(path: str | os.PathLike) -> dict:
    """Read a bench JSON (or the ``.json.gz`` the benchmarks keep); ValueError names the file when
    it is not one."""
    path = Path(path)
    if path.suffix == ".gz":
        import gzip
        import json

        try:
            doc = json.loads(gzip.decompress(path.read_bytes()))
        except (OSError, EOFError, ValueError) as e:
            raise ValueError(f"cannot read {path}: {e}") from None
    else:
        doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"{path} is not a gemmtune bench JSON (schema {SCHEMA!r}); "
                         "for a `gemmtune tune` run directory use --tune-run")
    # The parts the report reads, checked here: a file of the right schema without them raised
    # KeyError / AttributeError from deep inside the render (session 45's CPU hunt).
    # The header's GPU and date (the title, the merged file's name) and each shape's key and sizes
    # (the tables, a merge's identity) were read unchecked: KeyError tracebacks.
    shapes = doc.get("shapes")
    header = doc.get("header")
    if not isinstance(header, dict) or not isinstance(shapes, list):
        raise ValueError(f"{path}: a gemmtune bench JSON needs a 'header' object and a 'shapes' list")
    missing = [k for k in ("device_name", "date") if not isinstance(header.get(k), str)]
    if missing:
        raise ValueError(f"{path}: its header has no {' or '.join(repr(k) for k in missing)} (text)")
    for i, s in enumerate(shapes):
        if not isinstance(s, dict) or not all(k in s for k in SHAPE_FIELDS):
            raise ValueError(f"{path}: shape {i} is not an object with {', '.join(map(repr, SHAPE_FIELDS))}")
    return doc


# What every shape record of a bench JSON holds (gemmtune.bench.suite.measure_shape writes more).
SHAPE_FIELDS = ("group", "name", "key", "m", "n", "k", "dtype")


def slug(text: str) -> str:
    """File-name-safe lower-case text: 'NVIDIA H200' -> 'h200', '2.11.0+cu130' -> '2.11.0-cu130'."""
    t = text.lower().replace("nvidia", " ")
    out = "".join(c if c.isalnum() or c == "." else "-" for c in t)
    return "-".join(p for p in out.split("-") if p)


def bench_filename(header: dict, suffix: str = "") -> str:
    """``<date>-<gpu>-torch<v>-triton<v>[-suffix]-bench.json`` from a bench header."""
    # .get: load_bench requires only the GPU and the date; a header without the versions (which
    # the report renders) ended ``report --merge`` with KeyError 'torch'.
    parts = [header["date"][:10], slug(header["device_name"]), "torch" + slug(str(header.get("torch") or "unknown")),
             "triton" + slug(str(header.get("triton") or "unknown"))]
    if suffix:
        parts.append(slug(suffix))
    return "-".join(parts) + "-bench.json"


def unused_bench_path(out: Path, header: dict, suffix: str = "", avoid=()) -> Path:
    """``out / bench_filename(header, suffix)``; where that JSON or its report is there already (or
    it is one of ``avoid``), the same with the header's time of day added, ``-t<HHMMSS>`` (then
    ``-2``, ``-3``, ...): a second bench run on the same day (another --suite, a rerun after an
    interrupted run), or a ``report --merge`` whose name was a full run's, replaced the earlier
    results without a word. A later run's name sorts after the first's (``t`` after ``b``), so
    ``report --merge DIR/*-bench.json`` lets the later run's records win, as it lists them last.

    >>> import tempfile; d = Path(tempfile.mkdtemp()); h = {"date": "2026-11-30T14:22:33Z",
    ...     "device_name": "NVIDIA H200", "torch": "2.9", "triton": "3.5"}
    >>> unused_bench_path(d, h, "odd").name
    '2026-11-30-h200-torch2.9-triton3.5-odd-bench.json'
    >>> _ = (d / "2026-11-30-h200-torch2.9-triton3.5-odd-bench.json").write_text("{}")
    >>> unused_bench_path(d, h, "odd").name
    '2026-11-30-h200-torch2.9-triton3.5-odd-t142233-bench.json'
    """
    avoid = {Path(a).resolve() for a in avoid}

    def free(p: Path) -> bool:
        return not (p.exists() or p.with_suffix(".md").exists() or p.resolve() in avoid)

    path = Path(out) / bench_filename(header, suffix)
    if free(path):
        return path
    clock = "t" + "".join(c for c in str(header.get("date", ""))[11:19] if c.isdigit())
    stem, n = f"{suffix}-{clock}" if suffix else clock, 2
    path = Path(out) / bench_filename(header, stem)
    while not free(path):
        path, n = Path(out) / bench_filename(header, f"{stem}-{n}"), n + 1
    return path


def save_bench(doc: dict, path: str | os.PathLike) -> Path:
    """Write atomically (a killed run never leaves half a file). A value that is not a finite
    number is written as null: a check's relative error is inf where a peer's output held NaN
    or inf (verify.compare), and a bench that recorded one stopped right there, with a ValueError
    from json.dumps, every later shape unmeasured and no report."""
    return write_atomic(path, json.dumps(finite(doc), indent=1, allow_nan=False))


def finite(value):
    """``value`` with every float that is NaN or infinite replaced by None (JSON's null).

    >>> finite({"rel_err": float("inf"), "x": [1.5, float("nan")]})
    {'rel_err': None, 'x': [1.5, None]}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def merge_bench(docs: list[dict]) -> dict:
    """One bench document from partial runs (``--groups`` / ``--limit``) on the same GPU and
    software. A shape measured in several parts keeps the last part's record. Ceilings
    are the first part's (each part's own stay under ``parts``; its shapes' floors were
    computed from them)."""
    if not docs:
        raise ValueError("nothing to merge")
    h0 = docs[0]["header"]
    for d in docs[1:]:
        diff = [k for k in _SAME if d["header"].get(k) != h0.get(k)]
        if diff:
            raise ValueError("cannot merge runs that differ in " + ", ".join(
                f"{k} ({h0.get(k)} vs {d['header'].get(k)})" for k in diff)
                + ": their times do not compare")
    shapes: dict[str, dict] = {}
    notes: list[str] = []
    for d in docs:
        for s in d["shapes"]:
            shapes.pop(s["key"] + "|" + s["name"], None)
            shapes[s["key"] + "|" + s["name"]] = s
        notes += [n for n in d.get("notes", []) if n not in notes]
    order = {g: i for i, g in enumerate(GROUPS)}
    merged = sorted(shapes.values(), key=lambda s: order.get(s["group"], len(order)))
    groups = [g for g in GROUPS if any(s["group"] == g for s in merged)]
    groups += sorted({s["group"] for s in merged} - set(groups))
    header = {**h0, "date": max(d["header"]["date"] for d in docs), "groups": groups, "limit": None,
              "merged_from": len(docs)}
    modes, mode_notes = _merge_modes(docs, merged)
    if modes is not None:
        header["modes"] = modes
    notes += [n for n in mode_notes if n not in notes]
    # Parts of several suites (a hidden suite's run merged with the public one's): the report named
    # the first part's suite only.
    suites = list(dict.fromkeys(str(d["header"]["suite"]) for d in docs if d["header"].get("suite")))
    if len(suites) > 1:
        header["suite"] = " + ".join(suites)
    # A part stopped part way names the shapes it did not measure; another part may have measured
    # them since (the rerun of an interrupted run): what no part measured is what is left.
    names = {s["name"] for s in merged}
    left = list(dict.fromkeys(n for d in docs for n in d["header"].get("unmeasured") or () if n not in names))
    header.pop("unmeasured", None)
    # A --deadline run's note ("deadline: N of M shapes not measured ...: names") too: merged with
    # the run that measured the rest, the report still said they were not measured. What is left
    # gets the one note below.
    notes = [n for n in notes if not str(n).startswith((UNFINISHED + ":", DEADLINE))]
    if left:
        header["unmeasured"] = left
        notes.append(unfinished_note(left, len(merged) + len(left)))
    parts = []
    for d in docs:
        for p in d.get("parts") or [{"date": d["header"]["date"], "groups": d["header"].get("groups"),
                                     "limit": d["header"].get("limit"), "ceilings": d.get("ceilings")}]:
            parts.append(p)
    return {"schema": SCHEMA, "source": docs[0].get("source", ""), "header": header,
            "ceilings": docs[0].get("ceilings"), "notes": notes, "parts": parts, "shapes": merged}


# A mode's per-run counts in a bench header (gemmtune.bench.suite): each part of a merge paid its own.
_MODE_SUMS = ("wall_s", "measured", "startup_s", "compile_wait_s", "precompile_s")


def _merge_modes(docs: list[dict], merged: list[dict]) -> tuple[dict | None, list[str]]:
    """The header ``modes`` of a merge: each mode's times and counts summed over the parts that
    kept a shape in it (a part whose every shape a later part measured again counts nothing). The
    first part's alone were kept: the report said each mode tuned that part's candidates in that
    part's time, and the tuning target added one worker start-up where every part paid one (a
    ratio understated). A mode run with other options in another part is named in a note: its
    label stood for either. None where no part records modes (older JSONs)."""
    kept = {id(s) for s in merged}
    parts = [d for d in docs if any(id(s) in kept for s in d["shapes"])]
    if not any(d["header"].get("modes") for d in parts):
        return None, []
    out: dict[str, dict] = {}
    notes = []
    for d in parts:
        for m, r in (d["header"].get("modes") or {}).items():
            if m not in out:
                out[m] = dict(r)
                continue
            acc = out[m]
            for k in _MODE_SUMS:
                if isinstance(r.get(k), (int, float)) and isinstance(acc.get(k), (int, float)):
                    acc[k] = acc[k] + r[k]
            if r.get("kwargs") != acc.get("kwargs"):
                notes.append(f"merged parts ran {m} with different options ({acc.get('kwargs')} and "
                             f"{r.get('kwargs')}): its rows mix both")
    return out, notes
