"""The ``gemmtune`` command line.

    gemmtune tune --preset smoke                     # the whole pipeline, any machine
    gemmtune tune --suite shapes.csv --out table.json
    gemmtune tune --shape 32x32x28672:bf16 --families splitk,decompose_k
    gemmtune demo                                    # each family on one shape, errors vs fp64
    gemmtune space --shape 4096x4096x4096:bf16 --family triton_mm --device h100
"""

from __future__ import annotations

import argparse
import sys


def _shapes(args) -> list:
    from .shapes import load_csv, parse_shape, preset

    shapes = []
    for s in args.shape or []:
        shapes.append(parse_shape(s))
    if args.suite:
        shapes += load_csv(args.suite)
    if args.preset:
        shapes += preset(args.preset)
    if not shapes:
        shapes = preset("smoke")
    if args.group:
        groups = set(args.group.split(","))
        shapes = [s for s in shapes if s.group in groups]
    if args.limit:
        shapes = shapes[: args.limit]
    if not shapes:
        raise ValueError("no shapes selected (check --group / --limit)")
    return shapes


def _add_shape_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shape", action="append", metavar="MxNxK[:dtype]",
                   help="a shape, e.g. 32x32x28672:bf16 (repeatable)")
    p.add_argument("--suite", metavar="CSV", help="a shape suite CSV (group,name,M,N,K,dtype)")
    p.add_argument("--preset", help="a bundled suite: public (the benchmark suite) or smoke (2 tiny shapes)")
    p.add_argument("--group", help="keep only these comma-separated groups")
    p.add_argument("--limit", type=int, help="keep only the first N shapes")


def cmd_tune(args) -> int:
    from .tune import render, tune

    shapes = _shapes(args)
    families = args.families.split(",") if args.families else None
    result = tune(shapes, families=families, space=args.space, store=args.store, out=args.out,
                  workers=args.workers, timeout=args.timeout, compile_workers=args.compile_workers,
                  progress=not args.quiet, device=args.device, seed=args.seed)
    render(result)
    if args.summary:
        import json

        from .tune import summary
        with open(args.summary, "w") as f:
            json.dump(summary(result), f, indent=1)
    return 0


def cmd_demo(args) -> int:
    """Run each kernel family on one small shape and print its error against fp64."""
    import os

    import torch
    from rich.console import Console
    from rich.table import Table

    import gemmtune
    from .problem import Problem
    from .verify import compare, reference, tolerance

    cuda = torch.cuda.is_available()
    if not cuda and not gemmtune.interpreter_enabled():
        os.environ["TRITON_INTERPRET"] = "1"
        # The interpreter is chosen when triton.jit decorates the kernels, so re-exec.
        os.execv(sys.executable, [sys.executable, "-m", "gemmtune.cli", *sys.argv[1:]])
    dev = "cuda" if cuda else "cpu"
    dtype = torch.bfloat16 if cuda else torch.float16
    m, n, k = (int(x) for x in args.size.split("x"))
    a = torch.randn(m, k, device=dev, dtype=dtype)
    b = torch.randn(k, n, device=dev, dtype=dtype)
    p = Problem.from_tensors(a, b)
    ref = reference(a, b)
    t = Table(title=f"gemmtune demo: {m}x{n}x{k} {p.dtype} on {dev}"
              + ("" if cuda else " (Triton interpreter)"))
    for col in ("family", "choice", "rel. error", "tolerance", "ok"):
        t.add_column(col)
    fails = 0
    for fam in gemmtune.families():
        choices = gemmtune.space(p, fam, "default")
        if not choices:
            t.add_row(fam, "(no valid config for this shape)", "-", "-", "-")
            continue
        ch = choices[0]
        r = compare(gemmtune.matmul(a, b, choice=ch), ref, tolerance(p))
        fails += not r.ok
        t.add_row(fam, ch.id, f"{r.rel_err:.2e}", f"{tolerance(p):.0e}", "yes" if r.ok else f"NO: {r.reason}")
    Console().print(t)
    return 1 if fails else 0


def cmd_space(args) -> int:
    import gemmtune
    from .shapes import parse_shape

    p = parse_shape(args.shape).problem
    kept, rejected = gemmtune.space(p, args.family, args.kind, args.device, with_rejected=True)
    for c in kept:
        print(c.id)
    print(f"# {len(kept)} kept, {len(rejected)} rejected", file=sys.stderr)
    if args.show_rejected:
        for c, why in rejected:
            print(f"# rejected {c.id}: {why}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="gemmtune", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("tune", help="benchmark candidates per shape, store every result, write a table")
    _add_shape_args(p)
    p.add_argument("--space", choices=("default", "exhaustive"), default="default")
    p.add_argument("--families", help="comma-separated: triton_mm,splitk,decompose_k,aten (default all)")
    p.add_argument("--store", default="gemmtune.sqlite", help="SQLite results file (resumable)")
    p.add_argument("--out", default="gemmtune-table.json", help="lookup table to write")
    p.add_argument("--workers", type=int, help="benchmark workers (default: one per GPU)")
    p.add_argument("--compile-workers", type=int, help="parallel compile processes (GPU only)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per candidate before it is killed")
    p.add_argument("--device", help="built-in GPU for the config spaces when no GPU is present (h100/h200/a100)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--summary", metavar="JSON", help="also write the per-shape results as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(fn=cmd_tune)

    p = sub.add_parser("demo", help="run every kernel family once and print its error vs fp64")
    p.add_argument("--size", default="37x53x300", help="MxNxK (default 37x53x300)")
    p.set_defaults(fn=cmd_demo)

    p = sub.add_parser("space", help="list the candidate configs of a family for a shape")
    p.add_argument("--shape", required=True)
    p.add_argument("--family", required=True)
    p.add_argument("--kind", choices=("default", "exhaustive"), default="default")
    p.add_argument("--device", default=None, help="h100, h200, a100 (default: the visible GPU, else h100)")
    p.add_argument("--show-rejected", action="store_true")
    p.set_defaults(fn=cmd_space)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except (ValueError, TypeError) as e:
        # Bad input is the user's to fix: one clear line, no traceback.
        print(f"gemmtune {args.cmd}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; every finished measurement is in the store, rerun to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
