"""What every sub-command shares: the help formatter and parser (one-line usage errors, every
default shown), deprecated option spellings, argument types, the shape options and the check
that a shape's operands can be allocated."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys


# Option values that may begin with '-' (a negative size, so that the shape parser, not
# argparse, says what is wrong with it).
_VALUE_OPTIONS = ("--shape", "--size")


class Help(argparse.RawDescriptionHelpFormatter):
    """Raw descriptions (the examples keep their lines) and every default shown in the help."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "%(default)" in text or "(default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return text + " (default: %(default)s)"
        return text


def alias(p: argparse.ArgumentParser, old: str, new: str, **kw) -> None:
    """``old`` as a deprecated spelling of the option ``new`` (same value, same checks)."""
    dest = next(a.dest for a in p._actions if new in a.option_strings)  # noqa: SLF001
    p.add_argument(old, dest=dest, new=new, action=Deprecated, default=argparse.SUPPRESS, **kw)


def int_at_least(lo: int):
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


positive_int = int_at_least(1)
nonneg_int = int_at_least(0)


def seed_int(text: str) -> int:
    """An argparse type: a random seed, an int in [0, 2**63 - 1]. numpy refuses a negative seed
    and torch's generators one past 64 bits ("Overflow when unpacking long long"), each only once
    the run is under way (in tune, inside the worker, for every candidate)."""
    v = int_at_least(0)(text)
    if v > 2**63 - 1:
        raise argparse.ArgumentTypeError(f"must be at most 2**63 - 1, got {v}")
    return v


seed_int.__name__ = "seed"


def version_text(text: str) -> str:
    """An argparse type: a MAJOR.MINOR[.PATCH...] version such as triton's ('3.6', '3.6.0')."""
    if not re.fullmatch(r"\d+\.\d+(\.\w+)*", text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a version such as 3.6 or 3.6.0")
    return text.strip()


version_text.__name__ = "version"


def column_text(text: str) -> str:
    """An argparse type: a non-empty value for one CSV column (no comma, quote or line break)."""
    if not text.strip() or re.search(r"[,\"\r\n]", text):
        raise argparse.ArgumentTypeError(f"{text!r}: give a non-empty name without commas, quotes or line breaks")
    return text.strip()


column_text.__name__ = "name"


# Where Once keeps the options a parse has met (dest -> the spelling given); Parser removes it
# from the parsed namespace.
_GIVEN = "_gemmtune_given"


class Once(argparse.Action):
    """A single-valued option that refuses to be given twice: argparse keeps the last value without
    a word ("bench --deadline 5 --deadline 10" ran to 10, "tune --out a --out b" wrote b alone).
    Parser makes every plain store option one of these (see Parser). Two spellings of one value
    (bench's --suite and --preset, an option and its Deprecated alias) count as one option."""

    def __call__(self, parser, namespace, values, option_string=None):
        if self.option_strings:  # (a positional is consumed once by argparse itself)
            given = namespace.__dict__.setdefault(_GIVEN, {})
            first = given.get(self.dest)
            if first is not None:
                also = "" if first == option_string else f" (as {first}, then {option_string})"
                parser.error(f"{option_string} given twice{also}: this command takes one value")
            given[self.dest] = option_string
        setattr(namespace, self.dest, values)


class Deprecated(Once):
    """An old option spelling, kept for one release: hidden from the help, it still sets its
    new option's value (once: the new spelling and the old one together are refused) and says on
    stderr what to write instead."""

    def __init__(self, option_strings, dest, new: str, **kw):
        self.new = new
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, values, option_string)
        print(f"{parser.prog}: warning: {option_string} is deprecated and goes in the next release; "
              f"use {self.new}", file=sys.stderr)


def _number(text: str) -> float:
    """``text`` as a finite float, else ArgumentTypeError. float() takes 'nan', 'inf' and
    '-infinity': none is a time, a count of minutes or a fraction, and each slipped through a
    comparison (nan > 0 and nan < 1 are both False) or overflowed later (threading.Timer(inf))."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return v


def float_above(lo: float, unit: str, or_equal: bool = False):
    """An argparse type: a finite float > ``lo`` (>= with ``or_equal``), else a one-line error
    naming the ``unit``."""
    def parse(text: str) -> float:
        v = _number(text)
        if not (v >= lo if or_equal else v > lo):
            raise argparse.ArgumentTypeError(f"must be {'>=' if or_equal else '>'} {lo:g} ({unit}), got {v:g}")
        return v
    parse.__name__ = f"{unit} {'>=' if or_equal else '>'} {lo:g}"
    return parse


positive_float = float_above(0, "seconds")
nonneg_minutes = float_above(0, "minutes", or_equal=True)
# bench --deadline: a Unix time in seconds. One in the past is taken (no shape starts, and the
# JSON says so); a negative one, nan or inf is no time at all.
unix_time = float_above(0, "a Unix time in seconds")


def fraction(text: str) -> float:
    """An argparse type: a fraction strictly between 0 and 1 (train's --test-fraction)."""
    v = _number(text)
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (exclusive), got {v:g}")
    return v


def gain_fraction(text: str) -> float:
    """An argparse type: a fraction in [0, 1) (tune's --min-gain and --runoff: 0 turns them off,
    1 or more would ask a kernel to take no time), as TuneOptions checks them; refused here so the
    error names the option before the shapes are read."""
    v = _number(text)
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"must be a fraction in [0, 1), e.g. 0.02, got {v:g}")
    return v


def family_list(text: str | None) -> list[str] | None:
    """``--families``' comma list, the same in every command: names stripped, empty items (a
    trailing comma) dropped, every name checked before anything runs or prints (ValueError naming
    an unknown one); None when the option was not given.

    >>> family_list("triton_mm, aten,")
    ['triton_mm', 'aten']
    >>> family_list(",")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --families ',' names no family; give a comma-separated list of triton_mm, triton_static, ...
    """
    from .. import kernels

    if text is None:
        return None
    names = [f.strip() for f in text.split(",") if f.strip()]
    if not names:
        raise ValueError(f"--families {text!r} names no family; give a comma-separated list of "
                         f"{', '.join(kernels.family_names())}")
    for name in names:
        kernels.spec(name)  # ValueError naming an unknown family and the known ones; imports no Triton
    return names


def families_help() -> str:
    """The family names for an option's help."""
    from .. import kernels
    return ", ".join(kernels.family_names())


def join_values(argv: list[str]) -> list[str]:
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


def refuse_same_file(out_flag: str, out, inputs, why: str = "give another path") -> None:
    """Raise ValueError when ``out``, a file this command writes, is the same file as one of
    ``inputs`` ((flag, path) pairs; a None path is skipped): written over, it replaced what the
    run read (a results store, a table, a suite). Checked before the work.

    >>> refuse_same_file("--json", "a/../s.sqlite", [("--store", "s.sqlite"), ("--table", None)])
    Traceback (most recent call last):
    ...
    ValueError: --json and --store are one file, a/../s.sqlite: give another path
    """
    if not out:
        return
    from pathlib import Path
    target = Path(out).resolve()
    for flag, path in inputs:
        if path and Path(path).resolve() == target:
            raise ValueError(f"{out_flag} and {flag} are one file, {out}: {why}")


def model_dtype(text: str) -> str:
    """A model's ``--dtype`` (capture, bench-model): fp16, bf16 or fp32 by any alias, as its
    canonical name. fp8 names a scaled_mm's operands, not a model's weights: a model built in it
    died in its forward with torch's traceback (capture) or ran to 'not run' (bench-model), where
    int8 was one line.

    >>> model_dtype("half")
    'float16'
    >>> model_dtype("fp8")
    Traceback (most recent call last):
    ...
    ValueError: --dtype fp8: a model's dtype is fp16, bf16 or fp32 (fp8 is scaled_mm's operands: tune --op scaled_mm)
    """
    from ..problem import dtype_name

    name = dtype_name(text)
    if name not in ("float16", "bfloat16", "float32"):
        raise ValueError(f"--dtype {text}: a model's dtype is fp16, bf16 or fp32 (fp8 is scaled_mm's operands: "
                         "tune --op scaled_mm)")
    return name


def host_memory_bytes() -> int | None:
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

    from ..bench.server import serving_info
    from ..problem import element_size
    served = serving_info()
    if served is not None:
        # Run inside a worker server (a forwarded tune): its process must not open a CUDA
        # context; the GPU is its workers', known by name.
        from ..device import BUILTIN_MEMORY_BYTES
        name = served.get("device_name", "?")
        limit, where = BUILTIN_MEMORY_BYTES.get(name, 80 * 2**30), f"{name} (the server's GPU)"
    elif torch.cuda.is_available():
        limit = torch.cuda.mem_get_info()[1]
        where = torch.cuda.get_device_name()
    else:
        from ..device import BUILTIN_MEMORY_BYTES, current_or
        dev = current_or(device)
        limit = BUILTIN_MEMORY_BYTES.get(dev.name, 80 * 2**30)
        where = f"{dev.name} (built-in facts)"
        host = host_memory_bytes()
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


def refuse_empty(args, *dests: str) -> None:
    """Raise ValueError for an option of ``dests`` given an empty value, which the code reading it
    took for an option not given."""
    for d in dests:
        v = getattr(args, d, None)
        if isinstance(v, str) and not v.strip():
            raise ValueError(f"--{d.replace('_', '-')} is empty: give a value, or leave the option out")


def shapes_of(args) -> list:
    from ..shapes import load_suite, parse_shape, preset

    # An empty value (``--suite "$SUITE"`` with SUITE unset) counted as not given: the smoke preset
    # was tuned in place of the suite, an empty --groups kept every group.
    refuse_empty(args, "suite", "preset", "groups")
    op = getattr(args, "op", "mm")
    scaled = {k: getattr(args, k, None) for k in ("scale", "out_dtype", "bias")}
    if op != "scaled_mm" and any(scaled.values()):
        raise ValueError("--scale, --out-dtype and --bias are scaled_mm's (--op scaled_mm)")
    shapes = []
    for s in args.shape or []:
        shapes.append(parse_shape(s, op=op, **scaled) if op == "scaled_mm" else parse_shape(s, op=op))
    if args.suite:
        # A row's own op column wins. A preset's name, where no such file exists, is that preset,
        # as bench's and report's --suite take it: "--suite bmm" was "cannot read shape suite bmm".
        shapes += load_suite(args.suite, op=op)
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
        # Names trimmed (collect does too), and one that matches no shape refused, as bench and collect
        # refuse it: "decode, splitk" and the typo "split_k" were dropped without a word, and the tune
        # ran the rest (session 45's CPU hunt).
        groups = {g.strip() for g in args.groups.split(",") if g.strip()}
        have = {s.group for s in shapes}
        if groups - have:
            raise ValueError(f"--groups: no group {', '.join(sorted(groups - have))} among the selected shapes; "
                             f"they have {', '.join(sorted(have))}")
        shapes = [s for s in shapes if s.group in groups]
    if args.limit:
        shapes = shapes[: args.limit]
    if not shapes:
        raise ValueError("no shapes selected (check --groups / --limit)")
    return shapes


def add_problem_args(p: argparse.ArgumentParser) -> None:
    """``--op`` and ``--layout-b`` for the commands that look at one problem without running it
    (space, predict): what ``problem_of`` reads."""
    p.add_argument("--op", choices=("mm", "addmm", "scaled_mm", "bmm"), default="mm",
                   help="the operation: mm, addmm (bias fused), scaled_mm (fp8, --shape's dtype default "
                   "e4m3, B column-major) or bmm (--shape BxMxNxK, the batch first)")
    p.add_argument("--layout-b", choices=("row", "col"), default=None,
                   help="B's layout (col: x @ W.T with a row-major W, the Linear case; default: the op's, "
                   "row for mm, col for scaled_mm)")


def problem_of(text: str, args):
    """The Problem ``--shape text`` names with ``--op`` and ``--layout-b`` (B's alignment follows
    its layout: a column-major B's leading dim is K)."""
    import dataclasses

    from ..problem import Problem
    from ..shapes import parse_shape

    p = parse_shape(text, op=getattr(args, "op", "mm")).problem
    lay = getattr(args, "layout_b", None)
    if lay is None or lay == p.layout_b:
        return p
    if p.op == "bmm":
        return Problem.from_sizes(p.m, p.n, p.k, p.dtype, op="bmm", batch=p.batch, layout_b=lay)
    # B's alignment computed on a problem of the same op (and scaled_mm's fields): on the default
    # op, an fp8 dtype was refused as "use op='scaled_mm'" to a user who had given --op scaled_mm.
    same = Problem.from_sizes(p.m, p.n, p.k, p.dtype, p.out_dtype, layout_b=lay, op=p.op, scale=p.scale, bias=p.bias)
    return dataclasses.replace(p, layout_b=lay, aligned_b=same.aligned_b)


def add_shape_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shape", action="append", metavar="MxNxK[:dtype]",
                   help="a shape, e.g. 32x32x28672:bf16 (repeatable; dtype default bf16); with --op bmm "
                   "BxMxNxK[:dtype], the batch first")
    # Once: a second --suite / --preset replaced the first without a word (argparse keeps the last),
    # where a second --shape adds to the first.
    p.add_argument("--suite", metavar="CSV", help="a shape suite CSV (group,name,M,N,K,dtype[,layout_a,layout_b,op,batch]), "
                   "e.g. one gemmtune capture wrote, or a bundled preset's name where no such file exists")
    p.add_argument("--preset", help="a bundled suite: public (the benchmark suite), smoke (2 tiny shapes) or bmm "
                   "(attention and MoE batched products); without --shape/--suite/--preset: smoke")
    p.add_argument("--groups", metavar="G1,G2", help="keep only these comma-separated groups")
    alias(p, "--group", "--groups")
    p.add_argument("--limit", type=positive_int, metavar="N", help="keep only the first N shapes (N >= 1)")
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


class Parser(argparse.ArgumentParser):
    """Every parser: defaults shown in every help, a usage error is one line (what is wrong,
    and where the help is) instead of the whole usage block, and a single-value option given
    twice is a usage error.

    Which options may be repeated: every plain ``store`` option (the default action: one value,
    ``--out``, ``--deadline``, ``--families``) is made a ``Once``, since argparse would keep its last
    value and drop the first without a word. Repeatable by design: ``append`` options (``--shape``
    of tune, each one tuned), and the flags (``store_true``, ``store_false``, ``store_const``,
    ``count``): ``-q -q`` asks for the same thing twice, so a repeat loses nothing."""

    def __init__(self, *a, **kw):
        kw.setdefault("formatter_class", Help)
        super().__init__(*a, **kw)
        # The registry maps an action name to its class for this parser and its argument groups.
        self.register("action", None, Once)
        self.register("action", "store", Once)

    def parse_known_args(self, args=None, namespace=None):
        ns, extra = super().parse_known_args(args, namespace)
        ns.__dict__.pop(_GIVEN, None)  # Once's bookkeeping, not an option
        return ns, extra

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def missing_command(parser: argparse.ArgumentParser) -> int:
    """No sub-command given: list the ones there are (argparse would say 'required: cmd')."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    what = "command" if parser.prog == "gemmtune" else "action"
    print(f"{parser.prog}: give a{'n' if what == 'action' else ''} {what}: {', '.join(sub.choices)}\n"
          f"({parser.prog} {what.upper()} --help for its options; {parser.prog} --help for more)",
          file=sys.stderr)
    return 2


def innermost(parser: argparse.ArgumentParser, args) -> argparse.ArgumentParser:
    """The parser of the (sub-)sub-command that ``args`` ran: gemmtune, gemmtune tune, gemmtune lut show."""
    for dest in ("cmd", "lut_cmd"):
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)  # noqa: SLF001
        name = getattr(args, dest, None)
        if sub is None or name not in sub.choices:
            break
        parser = sub.choices[name]
    return parser
