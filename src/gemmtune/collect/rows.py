"""What a collection store holds and what it should time again, and its export.

Rows timed before a kernel or timer change that altered what they measure are dropped (kept in
a CSV) and measured again: ``stale_edge_rows`` (the tiled kernel now masks small-M / odd-N edges
it wrapped before) and ``launch_bound_rows`` (the quick timer's early cut stored launch time).
The store's own queries (``ResultStore.timed_before``, ``cut_rows``, ``drop``, ``save_rows``)
do the SQL; the rules of which rows are affected are here.
"""

from __future__ import annotations

import gzip
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Callable, TypeVar

from ..configs import Choice
from ..jsonio import replacing
from ..problem import Problem
from ..store import GZIP_ERRORS, ResultStore, opened_readonly
from ..store.schema import open_readonly

T = TypeVar("T")

# When the tiled kernel began masking small-M / odd-N edges instead of wrapping them
# (unix time, 2026-11-22 05:00 UTC, after the last rows of the first four device calls).
EDGE_MASKS_SINCE = 1795323600.0
# When the quick timer's early cut began to check that its one-pass estimate was GPU-bound
# (bench.timing.should_cut's issue_ms; unix time, 2026-11-23 02:30 UTC, after the eighth
# device call). Before, on small problems every Triton candidate was cut and stored with
# its launch time instead of its kernel time (eager calls of fully timed Triton rows on
# small problems took 68 us at the 5th percentile, 134 us at the median, kernel included).
LAUNCH_BOUND_SINCE = 1795401000.0
# Cut rows of the old timer below this many ms may be launch time rather than kernel time
# (the eager times above, pad+ choices more); above it the launches queue behind the
# kernel, so the pass timed the device.
LAUNCH_BOUND_MS = 0.5
EDGE_FAMILIES = ("triton_mm", "splitk", "decompose_k")


# Every copy below goes through a temporary file renamed onto dst only once it is whole
# (jsonio.replacing): a copy cut short (a killed call, Ctrl-C, a corrupt source) used to leave half
# a file at dst, i.e. a cut export in place of the last good one, or a half-unpacked store that the
# next call resumed from.


def gzip_file(src: Path, dst: Path) -> None:
    # filename: the header names dst's file (what gunzip -N restores), not the temporary one.
    with replacing(dst, mode=None) as tmp, open(src, "rb") as f, open(tmp, "wb") as raw, \
            gzip.GzipFile(filename=Path(dst).name, mode="wb", compresslevel=9, fileobj=raw) as g:
        shutil.copyfileobj(f, g)


def unpack(src: Path, dst: Path) -> None:
    """Copy a store to ``dst``, decompressing it when it is a .gz (any case, as
    ``store.opened_readonly`` reads it). A truncated or corrupt .gz is a ValueError naming the
    file, and leaves nothing at ``dst``."""
    if not Path(src).name.lower().endswith(".gz"):
        # Through SQLite (read-only, its backup API): a file copy took the main file alone, and the
        # rows a collector killed before its checkpoint left in the -wal beside it were lost unsaid.
        conn = open_readonly(Path(src))
        try:
            with replacing(dst, mode=None) as tmp:
                out = sqlite3.connect(tmp)
                try:
                    conn.backup(out)
                finally:
                    out.close()
        finally:
            conn.close()
        return
    try:
        with replacing(dst, mode=None) as tmp, gzip.open(src, "rb") as f, open(tmp, "wb") as g:
            shutil.copyfileobj(f, g)
    except GZIP_ERRORS as e:
        raise ValueError(f"cannot read {src}: {e} (a truncated or corrupt gzip file)") from None


def with_store(path: Path, fn: Callable[[ResultStore], T]) -> T:
    """fn(store) on a store given as .sqlite or .sqlite.gz, opened read-only (``store.opened_readonly``:
    a .gz through a temporary copy). What calls it only reads (the dry run, ``measured_keys``): a
    read-write opening migrated a schema-1 ``--resume-from`` store in place on ``--dry-run``, and
    switched the file to WAL. A truncated or corrupt .gz is a ValueError naming the file."""
    path = Path(path)
    try:
        with opened_readonly(path) as st:
            return fn(st)
    except GZIP_ERRORS as e:
        # Neither a ValueError nor an OSError: an EOFError traceback otherwise.
        raise ValueError(f"cannot read {path}: {e} (a truncated or corrupt gzip file)") from None


def measured_keys(path: Path) -> set[tuple[str, str]]:
    """(problem key, choice id) of every row a store (.sqlite or .sqlite.gz) holds."""
    return with_store(path, ResultStore.keys)


def stale_edge_rows(store: ResultStore) -> list[tuple]:
    """The row keys (``store.rows.KEY_COLUMNS``: run context, problem key, choice id) of the
    Triton rows whose edges the tiled kernel now masks (``kernels.tiled.edge_masks``, 2026-11-22)
    but which were timed while it still wrapped them: their times are the old kernel's. cuBLAS
    rows are never stale."""
    from ..kernels.decompose_k import tile_for
    from ..kernels.tiled import edge_masks

    out = []
    for row_key in store.timed_before(EDGE_FAMILIES, EDGE_MASKS_SINCE):
        key, cid = row_key[-2:]
        p, ch = Problem.from_key(key), Choice.parse(cid)
        q = p.padded() if ch.pad else p  # what the kernel ran on
        if ch.family == "decompose_k":
            t = tile_for(q.m, q.n, q.k, ch.config.split)
            bm, bn = t.block_m, t.block_n
        else:
            bm, bn = ch.config.block_m, ch.config.block_n
        if edge_masks(q.m, q.n, bm, bn, m_contiguous=q.layout_a == "col",
                      n_contiguous=q.layout_b == "row") != (False, False):
            out.append(row_key)
    return out


def launch_bound_rows(store: ResultStore) -> list[tuple]:
    """The row keys (run context, problem key, choice id) of the rows the early cut stored before it checked that its
    pass was GPU-bound (``LAUNCH_BOUND_SINCE``) with a time short enough to be the launch's
    (< ``LAUNCH_BOUND_MS``): their time may be Python's, not the kernel's. Measured on the
    59 small shapes held in both dtypes: bf16, timed before the cut existed, had 54% of its
    Triton rows above 3x the best; fp16, timed with it, had 100% cut."""
    return store.cut_rows(LAUNCH_BOUND_MS, LAUNCH_BOUND_SINCE)


def export(store: Path, out_dir: Path) -> list[Path]:
    """collect.sqlite.gz (to resume from) and collect-<gpu>.csv.gz (for data/)."""
    written = []
    with ResultStore(store) as st:
        st.checkpoint()
        gz = Path(out_dir) / "collect.sqlite.gz"
        gzip_file(Path(store), gz)
        written.append(gz)
        names = sorted({c.device_name for c, _ in st.rows()}) or ["empty"]
        tag = re.sub(r"[^a-z0-9]+", "-", "-".join(names).lower()).strip("-")
        csv_path = Path(out_dir) / f"collect-{tag}.csv"
        st.export(csv_path)
    gzip_file(csv_path, csv_path.with_suffix(".csv.gz"))
    csv_path.unlink()
    written.append(csv_path.with_suffix(".csv.gz"))
    return written
