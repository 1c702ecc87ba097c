"""``gemmtune demo`` (each family once, checked against fp64) and ``gemmtune space`` (a family's
candidate configs for a shape, with the rejected ones and why)."""

from __future__ import annotations

import os
import sys

from .common import Help, alias, check_allocatable


def cmd_demo(args) -> int:
    """Run each kernel family on one small shape and print its error against fp64."""
    import torch
    from rich.console import Console
    from rich.table import Table

    import gemmtune
    from ..problem import DTYPES, Problem
    from ..shapes import parse_shape
    from ..verify import compare, reference, tolerance

    shape = parse_shape(args.shape)  # a bad shape fails here, before any re-exec
    check_allocatable([shape])
    p0 = shape.problem
    cuda = torch.cuda.is_available()
    if not cuda and not gemmtune.interpreter_enabled():
        os.environ["TRITON_INTERPRET"] = "1"
        # The interpreter is chosen when triton.jit decorates the kernels, so re-exec.
        os.execv(sys.executable, [sys.executable, "-m", "gemmtune.cli", *getattr(args, "argv", sys.argv[1:])])
    dev = "cuda" if cuda else "cpu"
    m, n, k = p0.m, p0.n, p0.k
    dtype = DTYPES[p0.dtype]
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
    from ..shapes import parse_shape

    if not args.families:
        raise ValueError("give --families F1,F2 (e.g. triton_mm,skinny; all: triton_mm,splitk,skinny,persistent_tma,decompose_k,aten)")
    p = parse_shape(args.shape).problem
    for fam in args.families.split(","):
        kept, rejected = gemmtune.space(p, fam.strip(), args.space, args.device, with_rejected=True)
        for c in kept:
            print(c.id)
        print(f"# {fam}: {len(kept)} kept, {len(rejected)} rejected", file=sys.stderr)
        if args.show_rejected:
            for c, why in rejected:
                print(f"# rejected {c.id}: {why}", file=sys.stderr)
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("demo", help="run every kernel family once and print its error vs fp64", formatter_class=Help)
    p.add_argument("--shape", default="37x53x300", metavar="MxNxK[:dtype]", help="the problem (dtype default bf16)")
    alias(p, "--size", "--shape")
    p.set_defaults(fn=cmd_demo)

    p = sub.add_parser("space", help="list the candidate configs of families for a shape", formatter_class=Help)
    p.add_argument("--shape", required=True, metavar="MxNxK[:dtype]", help="the problem, e.g. 4096x4096x4096:bf16")
    # Required, checked in cmd_space: argparse would not count the old spelling as given.
    p.add_argument("--families", metavar="F1,F2", help="comma-separated families, e.g. triton_mm,skinny (required)")
    alias(p, "--family", "--families")
    p.add_argument("--space", choices=("default", "exhaustive"), default="default", help="which space")
    alias(p, "--kind", "--space", choices=("default", "exhaustive"))
    p.add_argument("--device", default=None, help="h100, h200, a100 (default: the visible GPU, else h100)")
    p.add_argument("--show-rejected", action="store_true", help="also list the rejected configs with their reasons")
    p.set_defaults(fn=cmd_space)
