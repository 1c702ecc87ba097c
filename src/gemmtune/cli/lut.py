"""``gemmtune lut``: validate, show, merge, diff and export lookup tables."""

from __future__ import annotations

import sys
from pathlib import Path

from .common import Parser, missing_command
from ..jsonio import check_file_target, refuse_results_store


def _entries(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def _lut_errors(fn):
    """Bad tables (TableError), outputs that cannot be written (OSError) and a torch
    without Inductor's lookup table (RuntimeError): one line naming the command, exit 2."""
    import functools

    @functools.wraps(fn)
    def run(args) -> int:
        try:
            return fn(args)
        except (ValueError, TypeError, OSError, RuntimeError) as e:
            if isinstance(e, OSError) and e.filename and e.strerror:
                e = f"cannot write {str(e.filename).removesuffix('.tmp')}: {e.strerror}"
            print(f"gemmtune lut {args.lut_cmd}: error: {e}", file=sys.stderr)
            return 2
    return run


def cmd_lut_validate(args) -> int:
    """Exit 0 when every file is a valid table, 1 otherwise; one line per file."""
    from ..table import TableError, load

    bad = 0
    for f in args.files:
        try:
            t = load(f)
        except TableError as e:
            bad += 1
            print(f"FAIL {e}")
            continue
        p = t.provenance
        print(f"OK   {f}: {_entries(len(t.entries))}, {p['produced_by']} on {p['device_name']} "
              f"(capability {p['capability']}, triton {p['triton']})")
    return 1 if bad else 0


def cmd_lut_show(args) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ..table import load

    t = load(args.file)
    console = Console(width=None if sys.stdout.isatty() else 200)
    prov = "  ".join(f"{k}={v}" for k, v in sorted(t.provenance.items()))
    rt = Table(title=escape(f"{args.file}: {_entries(len(t.entries))}"), caption=escape(prov))
    rt.add_column("key", no_wrap=True)
    rt.add_column("choices", no_wrap=True)
    rt.add_column("ms", justify="right")
    for key, tcs in sorted(t.entries.items()):
        rt.add_row(key, "\n".join(tc.choice.id for tc in tcs),
                   "\n".join(f"{tc.device_ms:.4g}" if tc.device_ms is not None else "-" for tc in tcs))
    console.print(rt)
    return 0


def cmd_lut_merge(args) -> int:
    from ..jsonio import locked
    from ..table import load, merge

    out = Path(args.out)
    with locked(out):  # a tune --out run sharing the table waits: neither drops the other's entries
        return _lut_merge(args, out, load, merge)


def _lut_merge(args, out: Path, load, merge) -> int:
    refuse_results_store(out, "the merged table")  # before reading the inputs, --overwrite or not
    # A read-only OUT (chmod 444) was replaced all the same (the atomic rename needs only the
    # directory writable); tune --out refuses one, and a directory or a missing folder, likewise.
    check_file_target(out, "the merged table")
    if out.exists() and not args.overwrite and not any(out.resolve() == Path(f).resolve() for f in args.inputs):
        # ``lut merge a.json b.json`` read as "merge b into a" used to replace a with b's entries.
        raise ValueError(f"{out} exists and is not one of the tables merged: list it among the inputs to merge "
                         f"into it (gemmtune lut merge {out} {out} ...), or pass --overwrite to replace it")
    merged = merge([load(f) for f in args.inputs], allow_mixed_devices=args.allow_mixed_devices)
    merged.save(args.out)
    print(f"{args.out}: {_entries(len(merged.entries))} merged from {len(args.inputs)} tables "
          f"({merged.provenance['device_name']})")
    return 0


def cmd_lut_diff(args) -> int:
    """Exit 0 when the entries are the same, 1 when they differ (as diff(1) does)."""
    from ..table import diff, load

    d = diff(load(args.a), load(args.b))
    for line in d.lines():
        print(line)
    return 1 if d else 0


def cmd_lut_export_inductor(args) -> int:
    from ..inductor_export import NothingToExport, export

    if Path(args.out).resolve() == Path(args.table).resolve():
        # The Inductor table would replace the gemmtune table it is made from.
        raise ValueError(f"OUT {args.out} is the gemmtune table being exported; give another file name")
    try:
        r = export(args.table, args.out, device_key=args.device_key, include_aten=not args.no_aten,
                   force=args.force)
    except NothingToExport as e:  # the same exit code as a first run that exports nothing (below)
        print(f"gemmtune: {e}", file=sys.stderr)
        return 1
    for s in r.skipped:
        print(f"skipped {s}")
    for n in r.notes:
        print(f"note    {n}")
    # install's handler, not the plain LookupTableChoices: that one served a graph of dynamic K the
    # configs of its hint's K (inductor_export.lookup_choices_class)
    print(f"{args.out}: {len(r.table)} Inductor entries ({len(r.skipped)} skipped); use it with "
          "gemmtune.inductor_export.install(OUT) in the thread that compiles")
    return 0 if r.table else 1


def add_parsers(sub) -> None:
    lut = sub.add_parser("lut", help="lookup tables: validate, show, merge, diff, export to torch.compile")
    lsub = lut.add_subparsers(dest="lut_cmd", metavar="ACTION", parser_class=Parser,
                              help="what to do with tables (gemmtune lut ACTION --help for its options)")
    lut.set_defaults(fn=lambda args: missing_command(lut))
    p = lsub.add_parser("validate", help="check table files; exit 0 when all are valid, 1 otherwise")
    p.add_argument("files", nargs="+", metavar="FILE", help="lookup-table JSON files")
    p.set_defaults(fn=_lut_errors(cmd_lut_validate))
    p = lsub.add_parser("show", help="print a table (entries, choices, times, provenance)")
    p.add_argument("file", metavar="FILE", help="a lookup-table JSON file")
    p.set_defaults(fn=_lut_errors(cmd_lut_show))
    p = lsub.add_parser("merge", help="merge tables: per problem, measured choices first, fastest first")
    p.add_argument("out", metavar="OUT", help="the merged table to write")
    p.add_argument("inputs", nargs="+", metavar="TABLE", help="tables to merge")
    p.add_argument("--allow-mixed-devices", action="store_true",
                   help="merge tables from different GPUs (their times do not compare)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace OUT when it exists and is not among the inputs (refused otherwise)")
    p.set_defaults(fn=_lut_errors(cmd_lut_merge))
    p = lsub.add_parser("diff", help="entries added / removed / changed from A to B; exit 1 when they differ")
    p.add_argument("a", metavar="A", help="the old table")
    p.add_argument("b", metavar="B", help="the new table")
    p.set_defaults(fn=_lut_errors(cmd_lut_diff))
    p = lsub.add_parser("export-inductor", help="write torch.compile's (Inductor's) lookup table")
    p.add_argument("table", metavar="TABLE", help="gemmtune lookup table")
    p.add_argument("out", metavar="OUT", help="Inductor lookup-table JSON to write")
    p.add_argument("--device-key", help="prefix keys with this device key (gcnArchName); default: any GPU")
    p.add_argument("--no-aten", action="store_true", help="leave aten (cuBLAS) choices out")
    p.add_argument("--force", action="store_true",
                   help="write even when this torch has no Inductor lookup table (for another machine)")
    p.set_defaults(fn=_lut_errors(cmd_lut_export_inductor))
