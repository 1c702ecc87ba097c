"""Bulk timing collection for the learned performance model (GPU, resumable, in 10-minute calls).

    python scripts/collect.py --list-shapes                    # the plan; any machine, no GPU
    python scripts/collect.py --dry-run                        # candidates per phase; any machine
    python scripts/collect.py --dry-run --resume-from data/collect/collect.sqlite.gz   # what is left
    python scripts/collect.py --resume-from ... --drop-stale-edges   # re-time rows of the old edge wrap
    python scripts/collect.py --resume-from ... --drop-launch-bound  # re-time rows the old early cut mis-timed
    python scripts/collect.py --max-minutes 8                  # one device call: $OUT/collect.sqlite(.gz)
    python scripts/collect.py --resume-from data/collect/collect.sqlite.gz --max-minutes 8   # next call
    python scripts/collect.py --export-only --resume-from ...  # just the compressed CSV for data/
    python scripts/collect.py --timing standard ...            # the tuner's full timer (4x the replays)

What it measures. At least 400 shapes, the same every run (seeded), none of them a
shape of the public benchmark suite (that suite is for evaluation only):

* llm:     qkv / o / gate-up / down / lm-head layers of 12 open models from 1B to 70B
           parameters, at decode and prefill token counts; half with the weight as
           nn.Linear holds it (B column-major), half row-major;
* decode:  M from 1 to 64 against those layers' (N, K);
* splitk:  small M x N (16..512) with long K (4k..128k);
* odd:     odd and unaligned sizes (the kernels' narrow-load paths and pad+);
* square:  squares, powers of two and not;
* random:  log-uniform M, N, K (capped at ~2 TFLOP a call).

Per shape: a seeded random sample of the exhaustive triton_mm space, of the exhaustive
split-K space, every DecomposeK split, cuBLAS, and for unaligned shapes some pad+
variants. Phases run bf16 first, then fp16, then fp32 (fp32 on a third of the shapes).

How. Each batch of shapes goes through ``gemmtune.tune`` with a lookup table that
fixes the sampled candidates, so the results store skips everything already measured:
a call that runs out of time loses nothing, and the next call (started with
``--resume-from`` the store the last one returned) goes on where it stopped.

Throughput. Every candidate is verified against fp64 and then timed with the ``quick``
timer profile (``--timing quick``, the default here; tune()'s default is ``standard``):
5 CUDA-graph replays of ~1 ms (at most 64 launches) instead of 20 of ~2 ms (at most 256),
3 eager calls instead of 20, one warm-up; still L2-cold (rotating input sets, more than
twice the L2), still median + inter-quartile spread: the same quantity as the standard
profile measures, from fewer samples; each row stores its ``repeats`` (5 here, 20 under
the standard profile), so the two can be told apart. Since 2026-11-22 (after the first
31,981 rows) the quick profile also cuts early: a candidate whose one event-timed pass takes
more than 3x the best time measured on its problem so far is stored from that pass
(``repeats`` 1, no eager time), provided the pass was GPU-bound (since 2026-11-23; before,
launch-bound passes were cut too: ``--drop-launch-bound``). On long-K shapes such
candidates took most of the time. Inside tune() the compile workers
compile the next shapes (``--compile-ahead``, default 2) while the GPU worker times the
current one, so the GPU no longer waits for each shape's compile phase; they run at lower
CPU priority. Batches grow to ``--batch`` shapes (one tune() call each, so worker start-up
and the first compile are paid once per batch): the first batch of each dtype is small (at
most 4 shapes) to measure seconds per shape, later batches are sized from that so that
they end before ``--max-minutes`` (counted from the start of the process). How fast this
is on a GPU: collect-progress.json records it per call and process
(``candidates_per_s``, and ``compile_wait_s``: how long the GPU worker waited for
compiles, which is large when compiling, not timing, is the bottleneck); data/collect/
README.md quotes the rates of the H200 calls.

At the end of every call it writes $OUT/collect.sqlite.gz (carry it to the next call),
$OUT/collect-<gpu>.csv.gz (the rows, for data/) and $OUT/collect-progress.json. Should a
batch still be running at ``--hard-stop-minutes`` (default ``--max-minutes`` + 1), a
watchdog writes the same three files from a consistent snapshot of the store and exits,
so that a mis-estimated batch cannot take the whole call's results with it.

Then, on any machine: ``gemmtune train --store collect.sqlite.gz --out model.json``.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import hashlib
import json
import math
import os
import re
import shutil
import sqlite3
import sys
import threading
import time
import traceback
import zlib
from pathlib import Path

_T_START = time.monotonic()

import numpy as np  # noqa: E402  (after _T_START: the run's clock includes imports)

ROOT = Path(__file__).resolve().parents[1]
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
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from gemmtune.problem import Problem  # noqa: E402

SEED = 1729
# (hidden, intermediate, query heads, kv heads, head dim, vocabulary): model cards.
MODELS = {
    "llama3.2-1b": (2048, 8192, 32, 8, 64, 128256),
    "llama3.2-3b": (3072, 8192, 24, 8, 128, 128256),
    "llama3-8b": (4096, 14336, 32, 8, 128, 128256),
    "mistral-7b": (4096, 14336, 32, 8, 128, 32000),
    "llama2-13b": (5120, 13824, 40, 40, 128, 32000),
    "llama3-70b": (8192, 28672, 64, 8, 128, 128256),
    "qwen2.5-7b": (3584, 18944, 28, 4, 128, 152064),
    "qwen2.5-14b": (5120, 13824, 40, 8, 128, 152064),
    "qwen2.5-32b": (5120, 27648, 40, 8, 128, 152064),
    "phi3-mini": (3072, 8192, 32, 32, 96, 32064),
    "gemma2-9b": (3584, 14336, 16, 8, 256, 256000),
    "gpt2-xl": (1600, 6400, 25, 25, 64, 50257),
}
DECODE_M = (1, 2, 3, 4, 8, 12, 16, 24, 32, 48, 64)
PREFILL_M = (128, 256, 512, 1024, 2048, 4096, 8192)
MAX_FLOPS = 2e12  # keeps the slowest candidates of one shape well under a second each
FIRST_BATCH = 4  # shapes in the first batch of each dtype, which measures seconds per shape
FIRST_EST_S = 30.0  # assumed seconds per shape before anything was measured
MARGIN = 1.3  # a batch starts only when MARGIN x its estimated time fits in what is left


def _layers(model: str) -> list[tuple[str, int, int]]:
    h, ffn, nq, nkv, hd, vocab = MODELS[model]
    return [("qkv", (nq + 2 * nkv) * hd, h), ("o", h, nq * hd), ("gateup", 2 * ffn, h),
            ("down", h, ffn), ("lmhead", vocab, h)]


def plan() -> list[tuple[str, str, int, int, int, str]]:
    """(group, name, M, N, K, layout_b) of every shape, deterministic, public suite excluded."""
    from gemmtune.model.learned import public_shapes

    rng = np.random.default_rng(SEED)
    public = public_shapes()
    out: list[tuple[str, str, int, int, int, str]] = []
    seen: set[tuple[int, int, int]] = set()

    def add(group, name, m, n, k, layout_b="row"):
        if (m, n, k) in public or (m, n, k) in seen or min(m, n, k) < 1 or 2.0 * m * n * k > MAX_FLOPS:
            return
        seen.add((m, n, k))
        out.append((group, name, int(m), int(n), int(k), layout_b))

    layer_dims = []
    for model in MODELS:
        for layer, n, k in _layers(model):
            layer_dims.append((n, k))
            ms = [int(rng.choice(DECODE_M)), int(rng.choice(PREFILL_M)), int(rng.choice(DECODE_M + PREFILL_M))]
            if layer == "lmhead":
                ms = ms[:2]
            for m in ms:
                add("llm", f"{model}_{layer}_m{m}", m, n, k, "col" if rng.random() < 0.5 else "row")
    for _ in range(80):
        n, k = layer_dims[int(rng.integers(len(layer_dims)))]
        m = int(rng.integers(1, 65))
        add("decode", f"decode_m{m}_{n}x{k}", m, n, k, "col" if rng.random() < 0.5 else "row")
    for _ in range(70):
        m = int(round(math.exp(rng.uniform(math.log(16), math.log(512)))))
        n = int(round(math.exp(rng.uniform(math.log(16), math.log(512)))))
        k = int(round(math.exp(rng.uniform(math.log(4096), math.log(131072))) / 64)) * 64
        add("splitk", f"splitk_{m}x{n}x{k}", m, n, k)
    for _ in range(60):
        m, n, k = (int(rng.integers(50, 2500)) * 2 + 1 for _ in range(3))
        add("odd", f"odd_{m}x{n}x{k}", m, n, k)
    for s in (64, 128, 256, 384, 512, 768, 1536, 2048, 2560, 3072, 6144, 10240, 1023, 1025, 2047, 3000, 5000):
        add("square", f"cube_{s}", s, s, s)
    while len(out) < 420:
        m = int(round(math.exp(rng.uniform(0, math.log(16384)))))
        n = int(round(math.exp(rng.uniform(math.log(16), math.log(32768)))))
        k = int(round(math.exp(rng.uniform(math.log(16), math.log(65536)))))
        if rng.random() < 0.75:  # most real sizes are multiples of 16
            n, k = max(16, n // 16 * 16), max(16, k // 16 * 16)
        add("random", f"rand_{m}x{n}x{k}", m, n, k)
    return out


def problems_for(dtype: str, shapes) -> list[tuple[str, str, Problem]]:
    picked = shapes if dtype != "float32" else shapes[::3]
    return [(g, f"{name}:{dtype}", Problem.from_sizes(m, n, k, dtype, layout_b=lb))
            for g, name, m, n, k, lb in picked]


@functools.lru_cache(maxsize=None)
def _exhaustive_raw(family: str) -> tuple:
    """The unscaled configs of a family's exhaustive space (kernels.*.space(kind='exhaustive'))."""
    import itertools

    from gemmtune.configs import SplitKConfig, exhaustive_tiles
    from gemmtune.kernels.splitk import SPLITS

    if family == "triton_mm":
        return tuple(exhaustive_tiles())
    # Same product as kernels/splitk.py space(kind="exhaustive"); tests/test_model.py checks
    # that sampling everything gives exactly that space.
    return tuple(SplitKConfig(bm, bn, bk, st, w, 8, s, d) for bm, bn, bk, st, w, s, d in itertools.product(
        (16, 32, 64, 128), (16, 32, 64, 128), (32, 64, 128, 256), (2, 3, 4, 5), (2, 4, 8), SPLITS, (True, False)))


# The pool sampler's fixed subsets of the exhaustive spaces (raw configs, before scaling).
POOL_SIZES = {"triton_mm": 256, "splitk": 128}
POOL_SEED = 20261123
SAMPLERS = ("random", "pool")


@functools.lru_cache(maxsize=None)
def _pool_raw(family: str) -> tuple:
    """A fixed, seeded subset of the family's unscaled exhaustive configs (``POOL_SIZES``).

    Why: the compiled kernel depends on the config, not on the shape, so shapes that draw
    from one pool share most compiles (Triton's cache), while per-shape draws from the
    whole space compile almost every candidate anew. Counted on the plan's remaining bf16
    shapes: 16,629 candidates needed 9,754 distinct compiles when drawn from the whole
    space, and 8,785 compiles for 40,610 candidates drawn from a 160/80 pool; compiling,
    not timing, was the bottleneck of the fifth collection call (155 s of its 299 s)."""
    raw = _exhaustive_raw(family)
    rng = np.random.default_rng(POOL_SEED)
    return tuple(raw[i] for i in sorted(rng.choice(len(raw), size=min(POOL_SIZES[family], len(raw)),
                                                   replace=False)))


def _sample_space(problem: Problem, family: str, device, n: int, rng, sampler: str = "random") -> list:
    """n distinct valid configs of the family's exhaustive space (``sampler='random'``) or
    of its fixed pool (``'pool'``, see ``_pool_raw``), drawn at random: raw configs in
    random order, scaled to the problem and pruned as the space does, until n are kept
    (much cheaper than building the whole space for every shape)."""
    import triton

    from gemmtune import kernels
    from gemmtune.configs import Choice, scale_tile

    if n <= 0:
        return []
    fam = kernels.get(family)
    raw = _exhaustive_raw(family) if sampler == "random" else _pool_raw(family)
    kept, seen = [], set()
    for i in rng.permutation(len(raw)):
        c = raw[i]
        k_len = triton.cdiv(problem.k, c.split_k) if family == "splitk" else None
        c = scale_tile(c, problem, k_len=k_len)
        if c in seen:
            continue
        seen.add(c)
        if fam.constraint(c, problem, device) is None:
            kept.append(Choice(family, c))
            if len(kept) == n:
                break
    return kept


def sample_choices(problem: Problem, device, *, mm: int, splitk: int, pad: int, sampler: str = "random") -> list:
    """A seeded (by problem key) random sample of the exhaustive spaces (or of their fixed
    pools: ``sampler='pool'``), cuBLAS first."""
    import gemmtune
    from gemmtune.configs import AtenConfig, Choice

    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {', '.join(SAMPLERS)}, not {sampler!r}")
    rng = np.random.default_rng(zlib.crc32(problem.key.encode()))
    out = [Choice("aten", AtenConfig())]
    out += _sample_space(problem, "triton_mm", device, mm, rng, sampler)
    out += _sample_space(problem, "splitk", device, splitk, rng, sampler)
    out += gemmtune.space(problem, "decompose_k", "exhaustive", device)[:12]
    if not (problem.aligned_a and problem.aligned_b):
        padded = problem.padded()
        out.append(Choice("aten", AtenConfig(), True))
        pool = [c.padded() for fam in ("triton_mm", "splitk", "decompose_k")
                for c in gemmtune.space(padded, fam, "default", device)]
        out += [pool[i] for i in sorted(rng.choice(len(pool), size=min(pad, len(pool)), replace=False))]
    return out


def shape_choices(problem: Problem, device, have, *, mm: int, splitk: int, pad: int, sampler: str) -> list:
    """The candidates a shape is measured with: a shape the store already holds rows of
    keeps the sampler it was started with (the one whose sample holds more of them; the
    first 35,892 rows were all drawn by 'random'), so that finished shapes stay finished
    and a half-measured one is completed, not re-sampled; a new shape gets ``sampler``."""
    kw = {"mm": mm, "splitk": splitk, "pad": pad}
    if not have:
        return sample_choices(problem, device, sampler=sampler, **kw)
    best, hits = None, -1
    for name in SAMPLERS:
        cands = sample_choices(problem, device, sampler=name, **kw)
        n = sum(c.id in have for c in cands)
        if n > hits:
            best, hits = cands, n
    return best


def claim(claims: Path, key: str) -> bool:
    """Atomically claim a shape for this process (several collect.py processes, one per
    GPU, share one store and one claims folder): True for the one process that creates
    the claim file first."""
    name = hashlib.sha1(key.encode()).hexdigest()
    try:
        fd = os.open(claims / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(f"{os.getpid()} {key}\n")
    return True


def _checkpoint(path: Path) -> None:
    con = sqlite3.connect(str(path), timeout=30)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()


def _gzip(src: Path, dst: Path) -> None:
    with open(src, "rb") as f, gzip.open(dst, "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)


def _unpack(src: Path, dst: Path) -> None:
    """Copy a store to ``dst``, decompressing it when it is a .gz."""
    if src.suffix != ".gz":
        shutil.copyfile(src, dst)
        return
    with gzip.open(src, "rb") as f, open(dst, "wb") as g:
        shutil.copyfileobj(f, g)


def export(store: Path, out_dir: Path) -> list[Path]:
    """collect.sqlite.gz (to resume from) and collect-<gpu>.csv.gz (for data/)."""
    from gemmtune.store import ResultStore

    _checkpoint(store)
    written = []
    gz = out_dir / "collect.sqlite.gz"
    _gzip(store, gz)
    written.append(gz)
    with ResultStore(store) as st:
        names = sorted({c.device_name for c, _ in st.rows()}) or ["empty"]
        tag = re.sub(r"[^a-z0-9]+", "-", "-".join(names).lower()).strip("-")
        csv_path = out_dir / f"collect-{tag}.csv"
        st.export(csv_path)
    _gzip(csv_path, csv_path.with_suffix(".csv.gz"))
    csv_path.unlink()
    written.append(csv_path.with_suffix(".csv.gz"))
    return written


def batch_size(left_s: float, est_s_per_shape: float, max_batch: int, calibrated: bool) -> int:
    """Shapes in the next tune() call: up to ``max_batch`` (``FIRST_BATCH`` until this dtype
    has been measured), and no more than fit in ``left_s`` with the margin; 0: stop."""
    n = max_batch if calibrated else min(max_batch, FIRST_BATCH)
    fit = int(left_s // (MARGIN * max(est_s_per_shape, 1e-3)))
    return max(0, min(n, fit))


def _with_plain_store(store: Path, fn):
    """fn(path) on a store given as .sqlite or .sqlite.gz (unpacked to a temporary file)."""
    if store.suffix != ".gz":
        return fn(store)
    import tempfile

    tmp = Path(tempfile.mkdtemp()) / "store.sqlite"
    try:
        _unpack(store, tmp)
        return fn(tmp)
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)


def measured_keys(store: Path) -> set[tuple[str, str]]:
    """(problem key, choice id) of every row a store (.sqlite or .sqlite.gz) holds."""
    def read(path: Path) -> set[tuple[str, str]]:
        con = sqlite3.connect(str(path))
        try:
            return {(k, c) for k, c in con.execute("SELECT problem_key, choice_id FROM results")}
        except sqlite3.OperationalError:  # no results table
            return set()
        finally:
            con.close()
    return _with_plain_store(store, read)


def stale_edge_rows(store: Path) -> list[tuple[str, str]]:
    """(problem key, choice id) of the Triton rows whose edges the tiled kernel now masks
    (``kernels.tiled.edge_masks``, 2026-11-22) but which were timed while it still wrapped
    them: their times are the old kernel's. cuBLAS rows are never stale."""
    from gemmtune.configs import Choice
    from gemmtune.kernels.decompose_k import tile_for
    from gemmtune.kernels.tiled import edge_masks

    con = sqlite3.connect(str(store))
    try:
        rows = con.execute("SELECT problem_key, choice_id, created_at FROM results "
                           "WHERE family IN ('triton_mm', 'splitk', 'decompose_k')").fetchall()
    except sqlite3.OperationalError:  # no results table
        return []
    finally:
        con.close()
    out = []
    for key, cid, created in rows:
        if created >= EDGE_MASKS_SINCE:
            continue
        p, ch = Problem.from_key(key), Choice.parse(cid)
        q = p.padded() if ch.pad else p  # what the kernel ran on
        if ch.family == "decompose_k":
            t = tile_for(q.m, q.n, q.k, ch.config.split)
            bm, bn = t.block_m, t.block_n
        else:
            bm, bn = ch.config.block_m, ch.config.block_n
        if edge_masks(q.m, q.n, bm, bn, m_contiguous=q.layout_a == "col",
                      n_contiguous=q.layout_b == "row") != (False, False):
            out.append((key, cid))
    return out


def launch_bound_rows(store: Path) -> list[tuple[str, str]]:
    """(problem key, choice id) of the rows the early cut stored before it checked that its
    pass was GPU-bound (``LAUNCH_BOUND_SINCE``) with a time short enough to be the launch's
    (< ``LAUNCH_BOUND_MS``): their time may be Python's, not the kernel's. Measured on the
    59 small shapes held in both dtypes: bf16, timed before the cut existed, had 54% of its
    Triton rows above 3x the best; fp16, timed with it, had 100% cut."""
    con = sqlite3.connect(str(store))
    try:
        return [(k, c) for k, c in con.execute(
            "SELECT problem_key, choice_id FROM results WHERE status = 'ok' AND repeats = 1 "
            "AND device_ms < ? AND created_at < ?", (LAUNCH_BOUND_MS, LAUNCH_BOUND_SINCE))]
    except sqlite3.OperationalError:  # no results table
        return []
    finally:
        con.close()


# Rows named by (problem key, choice id), through a keyed temporary table (_key_table): the
# results' primary key starts with the run context, so per-key lookups scanned the whole
# table (32k keys took minutes).
_KEYED = "(problem_key, choice_id) IN (SELECT problem_key, choice_id FROM temp.keys)"


def _key_table(con: sqlite3.Connection, keys: list[tuple[str, str]]) -> None:
    """Fill the temporary table ``keys`` that ``_KEYED`` selects by."""
    con.execute("CREATE TEMP TABLE IF NOT EXISTS keys (problem_key TEXT, choice_id TEXT, "
                "PRIMARY KEY (problem_key, choice_id))")
    con.execute("DELETE FROM temp.keys")
    con.executemany("INSERT OR IGNORE INTO temp.keys VALUES (?, ?)", keys)


def save_rows(store: Path, keys: list[tuple[str, str]], path: Path) -> int:
    """Write these rows, every column, to a gzipped CSV (what a drop removes is kept)."""
    import csv

    con = sqlite3.connect(str(store))
    try:
        _key_table(con, keys)
        cur = con.execute(f"SELECT * FROM results WHERE {_KEYED}")
        cols = [d[0] for d in cur.description]
        rows = cur.fetchall()
    finally:
        con.close()
    with gzip.open(path, "wt", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        w.writerows(rows)
    return len(rows)


def drop_rows(store: Path, keys: list[tuple[str, str]]) -> int:
    """Delete these (problem key, choice id) rows; the plan then measures them again."""
    con = sqlite3.connect(str(store))
    try:
        with con:
            _key_table(con, keys)
            n = con.execute(f"DELETE FROM results WHERE {_KEYED}").rowcount
        con.execute("VACUUM")  # the exported store should not carry the freed pages
        return n
    finally:
        con.close()


def status_counts(store: Path) -> dict[str, int]:
    """Rows per status in the whole store (a separate read-only look; WAL readers see commits)."""
    con = sqlite3.connect(str(store), timeout=30)
    try:
        return {st: int(n) for st, n in con.execute("SELECT status, COUNT(*) FROM results GROUP BY status")}
    except sqlite3.OperationalError:  # no results table yet
        return {}
    finally:
        con.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    out_default = Path(os.environ.get("OUT", "out"))
    ap.add_argument("--store", type=Path, help="results store to fill (default: $OUT/collect.sqlite)")
    ap.add_argument("--resume-from", type=Path, metavar="STORE[.gz]",
                    help="start from this earlier store (copied/decompressed to --store when that is missing)")
    ap.add_argument("--max-minutes", type=float, default=8.0,
                    help="size batches to end within this many minutes of the start (default 8: one 10-minute call)")
    ap.add_argument("--hard-stop-minutes", type=float,
                    help="if a batch is still running after this many minutes, export what the store holds "
                    "and exit (default: --max-minutes + 1; 0: never)")
    ap.add_argument("--dtypes", default="bf16,fp16,fp32", help="phases, in order (default bf16,fp16,fp32)")
    ap.add_argument("--groups", help="only these comma-separated shape groups")
    ap.add_argument("--batch", type=int, default=24,
                    help="most shapes per tune() call (default 24; fewer when the time left is short)")
    ap.add_argument("--limit-shapes", type=int, help="only the first N shapes of the plan (after --groups)")
    ap.add_argument("--mm-sample", type=int, default=80, help="triton_mm configs per shape (default 80)")
    ap.add_argument("--splitk-sample", type=int, default=40, help="split-K configs per shape (default 40)")
    ap.add_argument("--pad-sample", type=int, default=16, help="pad+ configs per unaligned shape (default 16)")
    ap.add_argument("--sampler", choices=SAMPLERS, default="pool",
                    help="how new shapes draw their configs: 'pool' (default: from a fixed subset of each "
                    "exhaustive space, so that shapes share compiled kernels) or 'random' (the whole space); "
                    "shapes the store already holds keep the sampler they were started with")
    ap.add_argument("--claims", type=Path, metavar="DIR",
                    help="several collect.py processes (one per GPU) share --store: each shape is measured by "
                    "the process that claims it first in DIR (empty it before a new set of processes starts)")
    ap.add_argument("--no-export", action="store_true",
                    help="write only the progress file at the end, not the compressed store and CSV "
                    "(processes sharing a store: export once, with --export-only, after all have ended)")
    ap.add_argument("--progress-name", default="collect-progress.json",
                    help="file name of the progress record in $OUT (default collect-progress.json)")
    ap.add_argument("--compile-workers", type=int, help="parallel compile processes (default: tune's)")
    ap.add_argument("--compile-ahead", type=int, default=2,
                    help="shapes compiled ahead of the one being timed (default 2; 0: separate phases)")
    ap.add_argument("--timing", choices=("quick", "standard"), default="quick",
                    help="timer profile (default quick: 5 CUDA-graph replays; standard: 20)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per candidate before it is killed")
    ap.add_argument("--drop-stale-edges", action="store_true",
                    help="first delete the rows timed before the kernel masked small-M / odd-N edges, "
                         "for the configs it now masks, so the plan measures them again")
    ap.add_argument("--drop-launch-bound", action="store_true",
                    help="first delete the rows the early cut stored before it checked for launch-bound passes, "
                         f"with times under {LAUNCH_BOUND_MS} ms (they may be Python's launch time); they are "
                         "written to $OUT/dropped-launch-bound.csv.gz, and the plan measures them again")
    ap.add_argument("--list-shapes", action="store_true", help="print the shape plan as CSV and exit")
    ap.add_argument("--dry-run", action="store_true", help="count candidates per phase and exit (no GPU)")
    ap.add_argument("--export-only", action="store_true", help="only write the compressed store and CSV")
    ap.add_argument("--cpu-interpreter", action="store_true",
                    help="measure in the Triton CPU interpreter (tests only: needs TRITON_INTERPRET=1; "
                    "timings mean nothing)")
    args = ap.parse_args(argv)
    # How every shape's candidates are drawn (shape_choices), in the dry run and the real one.
    sampling = {"mm": args.mm_sample, "splitk": args.splitk_sample, "pad": args.pad_sample, "sampler": args.sampler}

    shapes = plan()
    if args.groups:
        keep = set(args.groups.split(","))
        shapes = [s for s in shapes if s[0] in keep]
    if args.limit_shapes is not None:
        shapes = shapes[:args.limit_shapes]
    if args.batch < 1:
        ap.error("--batch must be at least 1")
    if args.list_shapes:
        print("# group,name,M,N,K,layout_b")
        for s in shapes:
            print(",".join(map(str, s)))
        print(f"# {len(shapes)} shapes", file=sys.stderr)
        return 0
    from gemmtune.problem import dtype_name

    dtypes = [dtype_name(d) for d in args.dtypes.split(",")]
    if args.dry_run:
        from gemmtune.device import current_or

        dev = current_or()
        done = None
        if args.resume_from:  # one unpacking for both reads
            done, stale, bound = _with_plain_store(args.resume_from, lambda path: (
                measured_keys(path), stale_edge_rows(path) if args.drop_stale_edges else [],
                launch_bound_rows(path) if args.drop_launch_bound else []))
            if args.drop_stale_edges:
                print(f"--drop-stale-edges: {len(stale)} rows of {args.resume_from.name} would be measured again")
                done -= set(stale)
            if args.drop_launch_bound:
                print(f"--drop-launch-bound: {len(bound)} rows of {args.resume_from.name} would be measured again")
                done -= set(bound)
        have_of: dict[str, set[str]] = {}  # problem key -> measured choice ids
        for k, c in (done or ()):
            have_of.setdefault(k, set()).add(c)
        for dt in dtypes:
            probs = problems_for(dt, shapes)
            per = [[c.id for c in shape_choices(p, dev, have_of.get(p.key), **sampling)] for _, _, p in probs]
            line = f"{dt}: {len(probs)} shapes, {sum(map(len, per))} candidates"
            if done is not None:  # what a resumed run still has to measure
                left = [[c for c in ids if (p.key, c) not in done] for (_, _, p), ids in zip(probs, per)]
                line += (f"; left after {args.resume_from.name}: {sum(map(len, left))} candidates "
                         f"on {sum(1 for x in left if x)} shapes")
            print(line)
        return 0

    out_dir = out_default
    out_dir.mkdir(parents=True, exist_ok=True)
    store = args.store or out_dir / "collect.sqlite"
    if args.claims is not None:
        args.claims.mkdir(parents=True, exist_ok=True)
    if not store.exists() and args.resume_from:
        _unpack(args.resume_from, store)
        print(f"resumed from {args.resume_from}")
    if args.drop_stale_edges and store.exists():
        print(f"--drop-stale-edges: {drop_rows(store, stale_edge_rows(store))} rows dropped, to be measured again")
    if args.drop_launch_bound and store.exists():
        bound = launch_bound_rows(store)
        kept = out_dir / "dropped-launch-bound.csv.gz"
        save_rows(store, bound, kept)
        print(f"--drop-launch-bound: {drop_rows(store, bound)} rows dropped (kept in {kept}), to be measured again")
    if args.export_only:
        for p in export(store, out_dir):
            print(p)
        return 0

    import torch

    import gemmtune
    from gemmtune.device import DeviceInfo
    from gemmtune.shapes import Shape
    from gemmtune.store import ResultStore, RunContext
    from gemmtune.table import LookupTable, TableChoice, provenance

    if args.cpu_interpreter:
        from gemmtune.api import interpreter_enabled
        from gemmtune.bench.runner import WorkerState, info

        if not interpreter_enabled():
            print("--cpu-interpreter needs TRITON_INTERPRET=1 in the environment", file=sys.stderr)
            return 2
        facts = info(WorkerState(device="cpu"))  # the context the tuner's workers report
        ctx = RunContext(facts["device_name"], facts["capability"], facts["torch"], facts["triton"],
                         facts["gemmtune"])
        dev = DeviceInfo.lookup("h100")  # the spaces tune() uses in the interpreter
    elif not torch.cuda.is_available():
        print("collect.py measures on a GPU; this machine has none (use --list-shapes / --dry-run here)",
              file=sys.stderr)
        return 2
    else:
        dev = DeviceInfo.from_torch()
        ctx = RunContext.current(dev.name, dev.capability_str)
    t0 = _T_START  # the budgets count from the start of the process (imports included)
    budget = args.max_minutes * 60.0
    hard_stop = args.hard_stop_minutes if args.hard_stop_minutes is not None else args.max_minutes + 1.0
    spent: dict[str, list[float]] = {}  # dtype -> [tune() seconds, shapes]
    st = {"tune_s": 0.0, "compile_wait_s": 0.0, "done_shapes": 0, "measured": 0, "batches": 0,
          "per_shape_s": [], "stopped": False, "batch_t0": None}
    before = status_counts(store) if store.exists() else {}

    def progress(db_path: Path, hard: bool = False) -> dict:
        after = status_counts(db_path)
        added = {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}
        rows_added = sum(added.values())
        wall = time.monotonic() - t0
        tuning = st["tune_s"] + (time.monotonic() - st["batch_t0"] if st["batch_t0"] is not None else 0.0)
        return {"device": ctx.device_name, "context": ctx.__dict__, "shapes_planned": len(shapes),
                "dtypes": dtypes, "shapes_done": st["done_shapes"], "finished": not (st["stopped"] or hard),
                "hard_stop": hard, "timing": args.timing, "compile_ahead": args.compile_ahead,
                "sampler": args.sampler, "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                # With --claims, other processes write the same store at the same time: rows_added
                # and rows_in_store count all of them, measured_this_call this process alone.
                "shared_store": args.claims is not None,
                "batches": st["batches"], "rows_in_store": sum(after.values()),
                "measured_this_call": st["measured"], "rows_added": rows_added, "rows_added_by_status": added,
                "wall_s": wall, "tune_s": tuning,
                # candidates this process recorded (every status) per second of this call, and
                # per second inside tune(); ok rows per second only where no other process
                # writes the store (rows_added_by_status counts them all)
                "candidates_per_s": st["measured"] / wall if wall > 0 else None,
                "candidates_per_tune_s": st["measured"] / tuning if tuning > 0 else None,
                "ok_per_s": added.get("ok", 0) / wall if wall > 0 and args.claims is None else None,
                "compile_wait_s": st["compile_wait_s"],
                "median_s_per_shape": float(np.median(st["per_shape_s"])) if st["per_shape_s"] else None,
                "s_per_shape_by_dtype": {d: sec / n for d, (sec, n) in spent.items()}}

    finishing = threading.Lock()

    def stop_hard() -> None:
        """The call is about to run out of time (a batch took longer than estimated): export
        a consistent snapshot of the store and exit. Rows already recorded are kept, and the
        next call resumes from them."""
        if not finishing.acquire(blocking=False):
            return  # the normal end is already exporting
        code = 1
        try:
            snap = out_dir / "collect.snapshot.sqlite"
            src, dst = sqlite3.connect(str(store), timeout=30), sqlite3.connect(str(snap))
            try:
                src.backup(dst)
            finally:
                src.close()
                dst.close()
            doc = progress(snap, hard=True)
            (out_dir / args.progress_name).write_text(json.dumps(doc, indent=1) + "\n")
            if not args.no_export:
                for path in export(snap, out_dir):
                    print(path, flush=True)
            snap.unlink()
            print(f"hard stop: still running after {hard_stop:g} minutes; exported what the store holds",
                  file=sys.stderr, flush=True)
            print(json.dumps(doc), flush=True)
            code = 0
        except BaseException:  # noqa: BLE001 -- whatever it was, say so and exit
            traceback.print_exc()
        finally:
            os._exit(code)  # workers notice their parent is gone and exit

    watchdog = None
    with ResultStore(store) as db:
        if hard_stop > 0:  # started once the store exists
            watchdog = threading.Timer(max(0.0, hard_stop * 60.0 - (time.monotonic() - t0)), stop_hard)
            watchdog.daemon = True
            watchdog.start()
        for dt in dtypes:
            pending = []  # (shape, its candidates or None: computed when its batch comes)
            for group, name, p in problems_for(dt, shapes):
                have = db.done(ctx, p.key)
                if not have:
                    pending.append((Shape(group, name, p), None))
                    continue
                cands = shape_choices(p, dev, have, **sampling)
                if all(c.id in have for c in cands):
                    st["done_shapes"] += 1
                else:
                    pending.append((Shape(group, name, p), cands))
            i = 0
            while i < len(pending):
                mine = spent.get(dt)
                if mine:
                    est = mine[0] / mine[1]
                else:  # a new dtype: the slowest seen so far, or the first guess
                    est = max([FIRST_EST_S] + [sec / n for sec, n in spent.values()])
                n = batch_size(budget - (time.monotonic() - t0), est, args.batch, bool(mine))
                if n == 0:
                    st["stopped"] = True
                    break
                chunk = []
                while len(chunk) < n and i < len(pending):
                    s, c = pending[i]
                    i += 1
                    if args.claims is not None and not claim(args.claims, s.problem.key):
                        continue  # another process measures it
                    chunk.append((s, c if c is not None else shape_choices(s.problem, dev, None, **sampling)))
                if not chunk:
                    break
                lut = LookupTable(provenance(ctx.device_name, ctx.capability, ctx.torch_version,
                                             ctx.triton_version, gemmtune.__version__, "by-hand"),
                                  {s.problem.key: [TableChoice(c) for c in cands] for s, cands in chunk})
                tb = st["batch_t0"] = time.monotonic()
                r = gemmtune.tune([s for s, _ in chunk], store=db, table=lut, progress=False, timeout=args.timeout,
                                  compile_workers=args.compile_workers, compile_ahead=args.compile_ahead,
                                  timing=args.timing)
                took = time.monotonic() - tb
                st["tune_s"] += took
                st["batch_t0"] = None
                st["compile_wait_s"] += r.compile_wait_s
                st["batches"] += 1
                acc = spent.setdefault(dt, [0.0, 0])
                acc[0] += took
                acc[1] += len(chunk)
                st["per_shape_s"].append(took / len(chunk))
                st["measured"] += r.measured
                st["done_shapes"] += len(chunk)
                print(f"[{time.monotonic() - t0:6.0f} s] {dt}: {st['done_shapes']} shapes done, +{r.measured} rows "
                      f"in {took:.0f} s ({r.measured / took:.1f}/s, waited {r.compile_wait_s:.0f} s for compiles; "
                      f"{', '.join(s.name for s, _ in chunk)})", flush=True)
            if st["stopped"]:
                break
    if not finishing.acquire(blocking=False):  # the hard stop is exporting: it exits the process
        time.sleep(3600)
    if watchdog is not None:
        watchdog.cancel()
    doc = progress(store)
    (out_dir / args.progress_name).write_text(json.dumps(doc, indent=1) + "\n")
    if not args.no_export:
        for p in export(store, out_dir):
            print(p)
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
