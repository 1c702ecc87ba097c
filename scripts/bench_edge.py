"""Small-M / small-N edges of the tiled kernel: wrapped loads against masked loads (GPU).

    python scripts/bench_edge.py --out DIR      # DIR/bench_edge.json + report.md, a table on stdout
    python scripts/bench_edge.py --render DIR/bench_edge.json   # report.md again (any machine)

Why. With ``rm % M`` wrapping, every program of a decode-like problem (M much smaller than
BLOCK_M) reads the same M rows of A BLOCK_M/M times over. On an H200 (2026-11-22,
benchmarks/results/2026-11-22-h200-dispatch) a 64x32x128 tile took 41.7 us at M = 1 and
13.1 us at M = 64 (N = K = 4096 bf16): more rows, less time. The kernel can instead mask
the rows past the edge (``edge="mask"``; ``auto``, the default, masks a dim smaller than
its block). This script measures both on the same compiled configs, side by side with
cuBLAS, in interleaved rounds, after checking every output against fp64.

Each case: device time as ``gemmtune bench`` takes it (``benchmark.round_robin`` and
``aggregate``): each kernel captured once in a CUDA graph of back-to-back launches over
rotating input sets that exceed twice the L2, then replayed 10 times per round in rounds
whose order rotates; the time is the median of the round medians, the spread the larger
of the median within-round relative IQR and the across-round range.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

# (label, M, N, K): the dispatcher sweep's small M at N = K = 4096, and the decode shapes
# of the public suite whose Triton candidates lost to cuBLAS.
SHAPES = [(f"m{m}_4096x4096", m, 4096, 4096) for m in (1, 2, 4, 8, 16, 32, 48, 64)] + [
    ("gpt2_lmhead_m1", 1, 50257, 768), ("llama3_8b_qkv_m1", 1, 6144, 4096),
    ("llama3_8b_down_m1", 1, 4096, 14336), ("llama3_8b_o_m8", 8, 4096, 4096),
    ("tiny_n_24", 2048, 24, 4096),
    # Odd N with a row-major B: rows are not 16-byte aligned, so wrapping (rn % N) gives the
    # compiler no contiguity along N at all, while masking keeps it (and there is no vector
    # width to lose). Inductor's 128x128x64 tile ran gpt2_lmhead_m96 in 54 us where ours,
    # wrapped, took 122-268 us (2026-11-22 bench). Not measured with masking yet.
    ("gpt2_lmhead_m96", 96, 50257, 768), ("odd_n_1531", 777, 1531, 2048), ("odd_n_4097", 333, 4097, 1024)]
CONFIGS = ["BM64-BN32-BK128-S5-W4-G8", "BM16-BN64-BK64-S3-W4-G8", "BM16-BN128-BK64-S3-W4-G1",
           "BM64-BN128-BK128-S4-W4-G8", "BM128-BN128-BK64-S3-W4-G8"]


def tile(cfg: str):
    """The TileConfig a config string such as ``BM64-BN32-BK128-S5-W4-G8`` names."""
    from gemmtune.configs import Choice

    return Choice.parse(f"triton_mm:{cfg}").config


def render(doc: dict) -> str:
    """Markdown of a bench_edge.json: per shape and config, wrapped vs masked device time."""
    from gemmtune.kernels.tiled import edge_masks

    method = " ".join(doc["method"].split())
    L = [f"# Edge loads at small M / N: wrap vs mask ({doc['device']}, {doc['date']})", "",
         f"torch {doc['torch']}, triton {doc['triton']}. Time: {method} Every output was checked "
         "against fp64 first; A and B are row-major. `default now`: what the kernel does today "
         "for this config and shape (`kernels.tiled.edge_masks`), which may differ from the rule "
         "it had when this was measured.", "",
         "| shape | M×N×K | config | wrap µs | mask µs | mask / wrap | default now | cuBLAS µs |",
         "|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        cub = r["cases"].get("cuBLAS", {}).get("device_us")
        cfgs = dict.fromkeys(n.rsplit(" ", 1)[0] for n in r["cases"] if n != "cuBLAS")
        for cfg in cfgs:
            w, m = r["cases"].get(f"{cfg} wrap", {}), r["cases"].get(f"{cfg} mask", {})
            wu, mu = w.get("device_us"), m.get("device_us")
            cell = lambda c, u: f"{u:.1f}" if u else c.get("status", "-")  # noqa: E731
            t = tile(cfg)
            auto = edge_masks(r["M"], r["N"], t.block_m, t.block_n, n_contiguous=True)
            L.append(f"| {r['shape']} | {r['M']}×{r['N']}×{r['K']} | `{cfg}` | {cell(w, wu)} | {cell(m, mu)} | "
                     + (f"{mu / wu:.2f}" if wu and mu else "-") + " | "
                     + (f"{'mask' if auto[0] else 'wrap'} M, {'mask' if auto[1] else 'wrap'} N" if auto else "-")
                     + f" | {f'{cub:.1f}' if cub else '-'} |")
    return "\n".join(L) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("out"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="CPU interpreter: two tiny cases, no timing")
    ap.add_argument("--render", type=Path, metavar="JSON", help="only write report.md beside a recorded JSON")
    args = ap.parse_args()
    if args.render:
        doc = json.loads(args.render.read_text())
        (args.render.parent / "report.md").write_text(render(doc))
        print(args.render.parent / "report.md")
        return 0

    import torch

    from gemmtune.bench.timing import CudaGraphTimer, WallTimer, sets_for
    from gemmtune.benchmark import aggregate, make_entry, round_robin
    from gemmtune.device import DeviceInfo
    from gemmtune.kernels.tiled import launch_tiled, tile_kwargs
    from gemmtune.verify import TOLERANCE, compare

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    dname = str(dtype).removeprefix("torch.")
    shapes = SHAPES if not args.smoke else [("m1_64x40", 1, 64, 40), ("tiny_n_3", 20, 3, 32)]
    configs = CONFIGS if not args.smoke else ["BM16-BN32-BK16-S2-W4-G4"]
    l2 = DeviceInfo.from_torch().l2_bytes if dev == "cuda" else 0
    # 10 samples per kernel per round (the smoke run: 1, host wall clock, not representative).
    timer = (CudaGraphTimer(replays=10, target_ms_per_replay=1.0, max_launches=128, eager_calls=1, warmup=1)
             if dev == "cuda" else WallTimer(repeats=1, warmup=0))
    per_round = timer.replays if dev == "cuda" else timer.repeats
    rows = []
    t0 = time.monotonic()
    for label, m, n, k in shapes:
        g = torch.Generator(device=dev).manual_seed(0)
        per_set = (m * k + k * n) * dtype.itemsize + m * n * dtype.itemsize
        n_sets = sets_for(per_set, l2) if dev == "cuda" else 1
        sets = [(torch.randn(m, k, device=dev, generator=g).to(dtype),
                 torch.randn(k, n, device=dev, generator=g).to(dtype),
                 torch.empty(m, n, device=dev, dtype=dtype)) for _ in range(n_sets)]
        ref = torch.mm(sets[0][0].double(), sets[0][1].double())
        fns = {"cuBLAS": lambda i: torch.mm(sets[i][0], sets[i][1], out=sets[i][2])}
        row = {"shape": label, "M": m, "N": n, "K": k, "dtype": dname,
               "n_sets": n_sets, "cases": {}}
        for cfg in configs:
            kw = tile_kwargs(tile(cfg), allow_tf32=False)
            for edge in ("wrap", "mask"):
                name = f"{cfg} {edge}"

                def launch(i, kw=kw, edge=edge):
                    a, b, c = sets[i]
                    launch_tiled(a, b, c, k_per_split=k, edge=edge, **kw)
                try:
                    sets[0][2].fill_(float("nan"))
                    launch(0)
                    res = compare(sets[0][2], ref, TOLERANCE[(dname, dname)])
                except Exception as e:  # noqa: BLE001 - e.g. out of shared memory: recorded, not fatal
                    row["cases"][name] = {"status": "error", "reason": f"{type(e).__name__}: {str(e)[:200]}"}
                    continue
                if not res.ok:
                    row["cases"][name] = {"status": "wrong", "reason": res.reason}
                    continue
                fns[name] = launch
                row["cases"][name] = {"status": "ok"}
        # The bench's interleaved rounds (gemmtune.benchmark): each kernel captured once,
        # replayed per round in rotating order.
        entries = {name: make_entry(timer, fn, n_sets) for name, fn in fns.items()}
        try:
            timed = round_robin(entries, per_round * args.rounds, args.rounds)
        finally:
            for e in entries.values():
                e.close()
        for name, res in timed.items():
            cell = row["cases"].setdefault(name, {"status": "ok"})
            if isinstance(res, BaseException):
                cell.update(status="error", reason=f"{type(res).__name__}: {str(res)[:200]}")
                continue
            agg = aggregate(res)
            cell.update(device_us=agg["ms"] * 1e3, rounds_us=[x * 1e3 for x in agg["round_ms"]],
                        spread=agg["spread"])
        rows.append(row)
        del sets
        line = [f"{label:20s}"]
        for name, cell in row["cases"].items():
            if cell.get("device_us"):
                line.append(f"{name.replace('-S', ' S').split(' ')[0]}:{name.split()[-1]} {cell['device_us']:.1f}")
            elif cell["status"] != "ok":
                line.append(f"{name}: {cell['status']}")
        print("  ".join(line), flush=True)
    doc = {"device": torch.cuda.get_device_name() if dev == "cuda" else "cpu (interpreter smoke)",
           "torch": torch.__version__, "triton": __import__("triton").__version__,
           "date": time.strftime("%Y-%m-%d", time.gmtime()), "wall_s": time.monotonic() - t0,
           "method": __doc__.split("Each case:")[1].strip(), "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_edge.json").write_text(json.dumps(doc, indent=1))
    (args.out / "report.md").write_text(render(doc))
    # Wrong results always fail; in the smoke run any error does (a GPU run may meet a
    # config that does not fit shared memory, which is recorded, not fatal).
    bad = [(r["shape"], n) for r in rows for n, c in r["cases"].items()
           if c["status"] == "wrong" or (args.smoke and c["status"] != "ok")]
    if bad:
        print("WRONG (or, in the smoke run, failed):", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
