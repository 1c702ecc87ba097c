"""Bulk timing collection for the learned performance model (GPU, resumable, in 10-minute calls).

    python scripts/collect.py --list-shapes                    # the plan; any machine, no GPU
    python scripts/collect.py --dry-run                        # candidates per phase; any machine
    python scripts/collect.py --max-minutes 8                  # one device call: $OUT/collect.sqlite(.gz)
    python scripts/collect.py --resume-from data/collect/collect.sqlite.gz --max-minutes 8   # next call
    python scripts/collect.py --export-only --resume-from ...  # just the compressed CSV for data/

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

How. Each batch of shapes goes through ``gemmtune.tune`` (compile workers, CUDA-graph
L2-cold timing, verification) with a lookup table that fixes the sampled candidates,
so the results store skips everything already measured: a call that runs out of time
loses nothing, and the next call (started with ``--resume-from`` the store the last
one returned) goes on where it stopped. The script stops starting batches when the
next would pass ``--max-minutes``. At the end of every call it writes
$OUT/collect.sqlite.gz (carry it to the next call), $OUT/collect-<gpu>.csv.gz (the
rows, for data/) and $OUT/collect-progress.json.

Then, on any machine: ``gemmtune train --store collect.sqlite.gz --out model.json``.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import math
import os
import re
import shutil
import sqlite3
import sys
import time
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
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


def _sample_space(problem: Problem, family: str, device, n: int, rng) -> list:
    """n distinct valid configs of the family's exhaustive space, drawn at random: raw
    configs in random order, scaled to the problem and pruned as the space does, until
    n are kept (much cheaper than building the whole space for every shape)."""
    import triton

    from gemmtune import kernels
    from gemmtune.configs import Choice, scale_tile

    fam = kernels.get(family)
    raw = _exhaustive_raw(family)
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


def sample_choices(problem: Problem, device, *, mm: int, splitk: int, pad: int) -> list:
    """A seeded (by problem key) random sample of the exhaustive spaces, cuBLAS first."""
    import gemmtune
    from gemmtune.configs import AtenConfig, Choice

    rng = np.random.default_rng(zlib.crc32(problem.key.encode()))
    out = [Choice("aten", AtenConfig())]
    out += _sample_space(problem, "triton_mm", device, mm, rng)
    out += _sample_space(problem, "splitk", device, splitk, rng)
    out += gemmtune.space(problem, "decompose_k", "exhaustive", device)[:12]
    if not (problem.aligned_a and problem.aligned_b):
        padded = problem.padded()
        out.append(Choice("aten", AtenConfig(), True))
        pool = [c.padded() for fam in ("triton_mm", "splitk", "decompose_k")
                for c in gemmtune.space(padded, fam, "default", device)]
        out += [pool[i] for i in sorted(rng.choice(len(pool), size=min(pad, len(pool)), replace=False))]
    return out


def _checkpoint(path: Path) -> None:
    con = sqlite3.connect(str(path), timeout=30)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()


def _gzip(src: Path, dst: Path) -> None:
    with open(src, "rb") as f, gzip.open(dst, "wb", compresslevel=9) as g:
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    out_default = Path(os.environ.get("OUT", "out"))
    ap.add_argument("--store", type=Path, help="results store to fill (default: $OUT/collect.sqlite)")
    ap.add_argument("--resume-from", type=Path, metavar="STORE[.gz]",
                    help="start from this earlier store (copied/decompressed to --store when that is missing)")
    ap.add_argument("--max-minutes", type=float, default=8.0,
                    help="stop starting batches after this many minutes (default 8: one 10-minute call)")
    ap.add_argument("--dtypes", default="bf16,fp16,fp32", help="phases, in order (default bf16,fp16,fp32)")
    ap.add_argument("--groups", help="only these comma-separated shape groups")
    ap.add_argument("--batch", type=int, default=4, help="shapes per tune() call (default 4)")
    ap.add_argument("--mm-sample", type=int, default=80, help="triton_mm configs per shape (default 80)")
    ap.add_argument("--splitk-sample", type=int, default=40, help="split-K configs per shape (default 40)")
    ap.add_argument("--pad-sample", type=int, default=16, help="pad+ configs per unaligned shape (default 16)")
    ap.add_argument("--compile-workers", type=int, help="parallel compile processes (default: tune's)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per candidate before it is killed")
    ap.add_argument("--list-shapes", action="store_true", help="print the shape plan as CSV and exit")
    ap.add_argument("--dry-run", action="store_true", help="count candidates per phase and exit (no GPU)")
    ap.add_argument("--export-only", action="store_true", help="only write the compressed store and CSV")
    args = ap.parse_args(argv)

    shapes = plan()
    if args.groups:
        keep = set(args.groups.split(","))
        shapes = [s for s in shapes if s[0] in keep]
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
        for dt in dtypes:
            probs = problems_for(dt, shapes)
            n = sum(len(sample_choices(p, dev, mm=args.mm_sample, splitk=args.splitk_sample, pad=args.pad_sample))
                    for _, _, p in probs)
            print(f"{dt}: {len(probs)} shapes, {n} candidates")
        return 0

    out_dir = out_default
    out_dir.mkdir(parents=True, exist_ok=True)
    store = args.store or out_dir / "collect.sqlite"
    if not store.exists() and args.resume_from:
        src = args.resume_from
        if src.suffix == ".gz":
            with gzip.open(src, "rb") as f, open(store, "wb") as g:
                shutil.copyfileobj(f, g)
        else:
            shutil.copyfile(src, store)
        print(f"resumed from {src}")
    if args.export_only:
        for p in export(store, out_dir):
            print(p)
        return 0

    import torch

    if not torch.cuda.is_available():
        print("collect.py measures on a GPU; this machine has none (use --list-shapes / --dry-run here)",
              file=sys.stderr)
        return 2
    import gemmtune
    from gemmtune.device import DeviceInfo
    from gemmtune.shapes import Shape
    from gemmtune.store import ResultStore, RunContext
    from gemmtune.table import LookupTable, TableChoice, provenance

    dev = DeviceInfo.from_torch()
    ctx = RunContext.current(dev.name, dev.capability_str)
    t0 = time.monotonic()
    budget = args.max_minutes * 60.0
    per_shape_s: list[float] = []
    done_shapes = measured = 0
    stopped = False
    todo_total = 0
    with ResultStore(store) as db:
        for dt in dtypes:
            pending = []
            for group, name, p in problems_for(dt, shapes):
                cands = sample_choices(p, dev, mm=args.mm_sample, splitk=args.splitk_sample, pad=args.pad_sample)
                have = db.done(ctx, p.key)
                if all(c.id in have for c in cands):
                    done_shapes += 1
                else:
                    pending.append((Shape(group, name, p), cands))
            todo_total += len(pending)
            for i in range(0, len(pending), args.batch):
                chunk = pending[i:i + args.batch]
                est = (np.median(per_shape_s) if per_shape_s else 30.0) * len(chunk)
                elapsed = time.monotonic() - t0
                if elapsed + 1.3 * est > budget:
                    stopped = True
                    break
                lut = LookupTable(provenance(dev.name, dev.capability_str, ctx.torch_version,
                                             ctx.triton_version, gemmtune.__version__, "by-hand"),
                                  {s.problem.key: [TableChoice(c) for c in cands] for s, cands in chunk})
                tb = time.monotonic()
                r = gemmtune.tune([s for s, _ in chunk], store=db, table=lut, progress=False, timeout=args.timeout,
                                  compile_workers=args.compile_workers)
                per_shape_s.append((time.monotonic() - tb) / len(chunk))
                measured += r.measured
                done_shapes += len(chunk)
                print(f"[{time.monotonic() - t0:6.0f} s] {dt}: {done_shapes} shapes done, +{r.measured} rows "
                      f"({', '.join(s.name for s, _ in chunk)})", flush=True)
            if stopped:
                break
        rows = db.count()
    progress = {"device": dev.name, "context": ctx.__dict__, "shapes_planned": len(shapes),
                "dtypes": dtypes, "shapes_done": done_shapes, "finished": not stopped,
                "rows_in_store": rows, "measured_this_call": measured, "wall_s": time.monotonic() - t0,
                "median_s_per_shape": float(np.median(per_shape_s)) if per_shape_s else None}
    (out_dir / "collect-progress.json").write_text(json.dumps(progress, indent=1) + "\n")
    for p in export(store, out_dir):
        print(p)
    print(json.dumps(progress))
    return 0


if __name__ == "__main__":
    sys.exit(main())
