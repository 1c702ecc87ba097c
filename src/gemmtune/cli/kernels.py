"""``gemmtune demo`` (each family once, checked against fp64), ``gemmtune space`` (a family's
candidate configs for a shape, with the rejected ones and why) and ``gemmtune inspect`` (what a
choice compiles to for a GPU target, on any machine)."""

from __future__ import annotations

import contextlib
import os
import re
import sys

from .common import (Help, add_problem_args, alias, check_allocatable, families_help, family_list, int_at_least,
                     problem_of)


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
        # A choice id is what a user copies into matmul(choice=...): folded, never cut to "…".
        t.add_column(col, overflow="fold" if col == "choice" else "ellipsis")
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
    Console(width=None if sys.stdout.isatty() else 160).print(t)
    return 1 if fails else 0


def cmd_space(args) -> int:
    import gemmtune

    if args.families is None:
        raise ValueError(f"give --families F1,F2 (e.g. triton_mm,skinny; all: {families_help()})")
    families = family_list(args.families)  # every name checked before any is listed
    p = problem_of(args.shape, args)
    for fam in families:
        kept, rejected = gemmtune.space(p, fam, args.space, args.device, with_rejected=True)
        for c in kept:
            print(c.id)
        print(f"# {fam}: {len(kept)} kept, {len(rejected)} rejected", file=sys.stderr)
        if args.show_rejected:
            for c, why in rejected:
                print(f"# rejected {c.id}: {why}", file=sys.stderr)
    return 0


def cmd_inspect(args) -> int:
    import json

    from ..kernelinfo import dump, inspect_choice

    if os.environ.get("TRITON_INTERPRET") == "1":
        raise ValueError("inspect compiles real kernels for a GPU target: unset TRITON_INTERPRET")
    # B's alignment follows --layout-b (problem_of, as space and predict): set on the row-major
    # problem alone, "8x8x6:fp16 --layout-b col" compiled for an aligned B whose leading dim is K=6.
    p = problem_of(args.shape, args)
    rows = []
    for cid in args.choices:
        try:
            with _compiler_stderr() as log:
                infos = inspect_choice(cid, p, args.arch)
            sys.stderr.write("".join(log))  # a compile that worked: its warnings, if any, as before
        except Exception as e:  # triton's compile errors (an arch ptxas or its passes do not know: --arch 0, 999)
            if isinstance(e, (ValueError, TypeError)):
                raise
            why = (str(e).strip().splitlines() or [""])[0]
            raise ValueError(f"cannot compile {cid} for sm_{args.arch} ({type(e).__name__}: {why})") from None
        if not infos:
            # On stderr under --json: ahead of the document on stdout, it made that no JSON at all.
            print(f"{cid}: no Triton kernel (a library call)", file=sys.stderr if args.json else sys.stdout)
            continue
        if args.dump:
            stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", cid)
            for path in dump(infos, args.dump, stem):
                print(f"# wrote {path}", file=sys.stderr)
        for info in infos:
            r = info.row()
            rows.append({"choice": cid, **r})
            if not args.json:
                print(f"{cid}  {r.pop('kernel')} {r.pop('arch')} grid {r.pop('grid')}: "
                      + ", ".join(f"{k} {v}" for k, v in r.items() if v not in (None, 0) or k in ("spill B",)))
    if args.json:
        print(json.dumps({"shape": args.shape, "layout_b": p.layout_b, "arch": args.arch, "kernels": rows}, indent=1))
    return 0


@contextlib.contextmanager
def _compiler_stderr():
    """Hold what Triton's native passes write to file descriptor 2 while a choice compiles; yields
    a list that holds that text after the block. On a failed compile (``--arch 999``: a target
    its passes do not know) MLIR printed a 105-line crash reproducer ahead of the one-line error,
    straight to the descriptor, past Python's sys.stderr; it is dropped with the failure."""
    import tempfile
    sys.stderr.flush()
    saved = os.dup(2)
    text: list[str] = []
    with tempfile.TemporaryFile(mode="w+", errors="replace") as f:
        os.dup2(f.fileno(), 2)
        try:
            yield text
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            f.seek(0)
            text.append(f.read())


def add_parsers(sub) -> None:
    p = sub.add_parser("demo", help="run every kernel family once and print its error vs fp64", formatter_class=Help)
    # Once: demo runs one problem; a second --shape replaced the first without a word.
    p.add_argument("--shape", default="37x53x300", metavar="MxNxK[:dtype]",
                   help="the problem (dtype default bf16)")
    alias(p, "--size", "--shape")
    p.set_defaults(fn=cmd_demo)

    p = sub.add_parser("space", help="list the candidate configs of families for a shape", formatter_class=Help)
    p.add_argument("--shape", required=True, metavar="MxNxK[:dtype]",
                   help="the problem, e.g. 4096x4096x4096:bf16")
    # Required, checked in cmd_space: argparse would not count the old spelling as given.
    p.add_argument("--families", metavar="F1,F2", help="comma-separated families, e.g. triton_mm,skinny (required)")
    alias(p, "--family", "--families")
    p.add_argument("--space", choices=("default", "exhaustive"), default="default", help="which space")
    alias(p, "--kind", "--space", choices=("default", "exhaustive"))
    p.add_argument("--device", default=None, help="h100, h200, a100 (default: the visible GPU, else h100)")
    p.add_argument("--show-rejected", action="store_true", help="also list the rejected configs with their reasons")
    add_problem_args(p)
    p.set_defaults(fn=cmd_space)

    p = sub.add_parser("inspect", help="what a choice compiles to for a GPU target, on any machine: registers, "
                       "spills, shared memory, load widths, wgmma / cp.async / TMA", formatter_class=Help)
    p.add_argument("choices", nargs="+", metavar="CHOICE", help="choice ids, e.g. triton_mm:BM128-BN128-BK64-S3-W8-G8")
    p.add_argument("--shape", required=True, metavar="MxNxK[:dtype]",
                   help="the problem, e.g. 1x6144x4096:bf16")
    p.add_argument("--layout-b", choices=("row", "col", "bcast_row", "bcast_col"),
                   help="B's layout (col: x @ W.T with a row-major W, the Linear case; bcast_*: a bmm's B "
                   "broadcast over the batch; default: the op's, row for mm)")
    p.add_argument("--op", choices=("mm", "addmm", "scaled_mm", "bmm"), default="mm",
                   help="the operation (bmm: --shape BxMxNxK[:dtype], the batch first)")
    p.add_argument("--arch", type=int_at_least(50), default=90, help="compute capability to compile for, e.g. 90 (H100/H200), 80")
    p.add_argument("--dump", metavar="DIR", help="also write each kernel's TTIR/TTGIR/LLIR/PTX/SASS under DIR")
    p.add_argument("--json", action="store_true", help="print JSON instead of one line per kernel")
    p.set_defaults(fn=cmd_inspect)
