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
    gemmtune tune --preset public --fast             # exhaustive space, the model's first of its 2 best families
    gemmtune bench --groups splitk,odd               # side by side with cuBLAS, Inductor
    gemmtune bench --groups bmm                      # the bmm preset (attention, MoE) vs torch.bmm
    gemmtune bench-model --models gpt2,llama-1b      # real models end to end

on collected data (any machine):
    gemmtune train --store results.sqlite --out model.json   # learned model, checked against analytic
    gemmtune report RUN-bench.json                   # Markdown + plots; --merge A B; --tune-run DIR
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Sequence

from . import bench, capture, collect, kernels, lut, model, report, tune
from .common import Deprecated, Parser, check_allocatable, innermost, join_values, missing_command

# The sub-command groups, one module each, in the order of the help: each adds its parsers.
GROUPS = (tune.add_parsers, kernels.add_parsers, capture.add_parsers, lut.add_parsers, bench.add_parsers,
          report.add_parsers, model.add_parsers, collect.add_parsers, tune.add_worker_parser)


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    ap = Parser(prog="gemmtune", description=__doc__)
    ap.add_argument("--version", action="version", version=f"gemmtune {__version__}")
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=Parser,
                            help="what to do (gemmtune COMMAND --help for its options)")
    for add in GROUPS:
        add(sub)
    return ap


def main(argv: list[str] | None = None, prestarted: Sequence = ()) -> int:
    """``gemmtune ARGS``; returns the exit status (0 ok, 1 a check failed, 2 bad input).
    ``prestarted``: benchmark workers the entry point started for ``tune`` (gemmtune_entry.spawn)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, extra = parser.parse_known_args(join_values(argv))
    if extra:  # named by the sub-command's parser, so that its --help is the one pointed to
        innermost(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    args.argv = argv  # demo re-executes itself with them under the interpreter
    args.prestarted = tuple(prestarted)
    if args.cmd is None:
        return missing_command(parser)
    import warnings
    shown = warnings.formatwarning
    warnings.formatwarning = one_line_warning(shown)
    term = _on_sigterm() if args.cmd in RESUMABLE else None
    buffered = _line_buffered_stdout()
    try:
        from ..precision import fp32_setting
        fp32_setting()  # a bad GEMMTUNE_FP32_PRECISION named before any work, not at the first fp32 launch
        return args.fn(args)
    except (ValueError, TypeError) as e:
        # Bad input is the user's to fix: one clear line, no traceback.
        print(f"gemmtune {args.cmd}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        # A file that cannot be read or written (a read-only or missing folder, a directory given
        # for a file): the file and why, not a traceback.
        print(f"gemmtune {args.cmd}: error: {os_error_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        by = " (SIGTERM)" if isinstance(e, Terminated) else ""
        if args.cmd in RESUMABLE:
            print(f"interrupted{by}; every finished measurement is in the store, rerun to resume", file=sys.stderr)
        else:
            print(f"gemmtune {args.cmd}: interrupted{by}", file=sys.stderr)
        return 128 + signal.SIGTERM if by else 130
    finally:
        warnings.formatwarning = shown
        if buffered is not None:
            buffered.reconfigure(line_buffering=False)
        if term is not None:
            signal.signal(signal.SIGTERM, term)


def _line_buffered_stdout():
    """Make stdout flush at each line for the command's run; returns the stream to set back to
    block buffering after it (None where nothing was changed). Piped or redirected (``| tee log``,
    a batch job's log file), Python buffers stdout in blocks: the progress lines of long work
    (bench-model's per-mode lines, collect --dry-run's per-phase counts) showed up only at exit,
    or never when a time limit killed the process."""
    out = sys.stdout
    if not hasattr(out, "reconfigure") or getattr(out, "line_buffering", True):
        return None
    try:
        out.reconfigure(line_buffering=True)
    except (ValueError, OSError):
        return None
    return out


class Terminated(KeyboardInterrupt):
    """SIGTERM during a resumable command, raised where Ctrl-C's KeyboardInterrupt would be, so the
    same clean-up runs (workers stopped, the store's last transaction finished or rolled back) and
    the same line is printed. A batch scheduler's time limit (SLURM, Kubernetes) sends SIGTERM:
    its default action ended the process with no word of what was kept."""


def _raise_terminated(signum, frame):
    raise Terminated()


def _on_sigterm():
    """Install ``_raise_terminated`` for SIGTERM where nothing else handles it (the main thread,
    the default action); returns the handler to restore, or None where none was installed."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        return None
    return signal.signal(signal.SIGTERM, _raise_terminated)


def one_line_warning(other):
    """``warnings.formatwarning`` for the command line: gemmtune's own warnings (a model that does
    not apply, a table from another GPU) as one line, 'gemmtune: warning: ...', instead of the file,
    line number and source line they were raised from; any other library's as ``other`` shows it.

    >>> from gemmtune.model.errors import ModelWarning
    >>> one_line_warning(None)(ModelWarning("no learned model"), ModelWarning, "x.py", 3)
    'gemmtune: warning: no learned model\\n'
    """
    def fmt(message, category, filename, lineno, line=None):
        if getattr(category, "__module__", "").startswith("gemmtune"):
            return f"gemmtune: warning: {message}\n"
        return other(message, category, filename, lineno, line)
    return fmt


# The commands whose measurements go into a store as they finish (a rerun resumes them).
RESUMABLE = ("tune", "collect")


def os_error_line(e: OSError) -> str:
    """One line for a file error: its file first, then why.

    >>> os_error_line(FileNotFoundError(2, "No such file or directory", "/nowhere/t.json"))
    '/nowhere/t.json: No such file or directory'
    >>> os_error_line(OSError("something else"))
    'something else'
    """
    if e.filename is None:
        return str(e)
    other = f" (and {e.filename2})" if e.filename2 else ""
    return f"{e.filename}{other}: {e.strerror}"


__all__ = ["main", "build_parser", "check_allocatable", "Deprecated", "GROUPS"]
