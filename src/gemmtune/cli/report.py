"""``gemmtune report``: a bench JSON's Markdown and plots (``--merge`` partial runs), a tuning-run
directory (``--tune-run``), a results store's per-problem summary (``--store``) or a tune's worker
and tuner traces (``--trace``)."""

from __future__ import annotations

import sys

from .common import refuse_empty, refuse_same_file


def cmd_report(args) -> int:
    """Render a bench JSON (or merge several), or a tuning-run directory's Markdown."""
    from pathlib import Path

    from .. import report

    # An empty --store / --trace / --tune-run counted as not given: "give a bench JSON to render".
    refuse_empty(args, "store", "trace", "tune_run", "json", "run_summary", "tune_json", "suite", "out", "title")
    try:
        _refuse_other_modes(args)
        if args.trace:
            if args.inputs or args.tune_run or args.store:
                raise ValueError("--trace summarises a trace directory; give no bench JSON, --tune-run or --store with it")
            from ..report.trace import check_dir, summarise
            check_dir(Path(args.trace))
            print("\n".join(summarise(Path(args.trace))))
            return 0
        if args.store:
            if args.inputs or args.tune_run:
                raise ValueError("--store summarizes a results store; give no bench JSON or --tune-run with it")
            if not Path(args.store).is_file():
                raise ValueError(f"no results store at {args.store}")
            if Path(args.store).stat().st_size == 0:
                # Opening it would write a new store's tables into the file: a summary must not.
                raise ValueError(f"{args.store} is empty, not a results store")
            # The summary is written over its path: naming the store there replaced every
            # measurement with it, naming --tune-json that run's JSON.
            inputs = (("--store", args.store), ("--tune-json", args.tune_json))
            for flag, dest in (("--json", args.json), ("--run-summary", args.run_summary)):
                refuse_same_file(flag, dest, inputs)
                if dest:
                    # Another results store there (not --store: b.sqlite) was replaced by the JSON,
                    # every measurement in it lost; checked as tune's --summary is, before the work.
                    from ..jsonio import check_file_target
                    check_file_target(dest, flag)
            import json

            from ..jsonio import write_atomic
            from ..report.files import finite, save_bench
            from ..report.store import markdown, run_summary, run_summary_text, summarize
            if args.run_summary:
                doc = run_summary(args.store, args.tune_json, args.suite or "public")
                # NaN / inf (a spread, an eager time) as null, as a bench JSON: json.dumps wrote bare
                # NaN / Infinity
                save_bench(doc, args.run_summary)  # never over a store
                sys.stdout.write(run_summary_text(doc))
                return 0
            rows = summarize(args.store)
            sys.stdout.write(markdown(rows))
            if args.json:
                write_atomic(args.json, json.dumps(finite({"store": str(args.store), "problems": rows}), indent=1,
                                                   allow_nan=False) + "\n")
            return 0
        if args.tune_run:
            if args.inputs:
                raise ValueError("--tune-run renders a run directory; give no bench JSON with it")
            sys.stdout.write(report.render_tune_run(args.tune_run, args.title or "gemmtune tune, default space"))
            return 0
        if not args.inputs:
            raise ValueError("give a bench JSON to render (several with --merge), or --tune-run DIR")
        if len(args.inputs) > 1 and not args.merge:
            raise ValueError("several bench JSONs: add --merge to combine them")
        if args.out:
            from ..jsonio import check_dir_target
            check_dir_target(args.out, "--out")
        if args.merge:
            doc = report.merge_bench([report.load_bench(f) for f in args.inputs])
            out = Path(args.out or Path(args.inputs[0]).parent)
            out.mkdir(parents=True, exist_ok=True)
            # Never over one of the inputs, nor over any other bench JSON there: the merged name is a
            # full run's (no groups), and a full run of that day in --out was replaced without a word.
            path = report.unused_bench_path(out, doc["header"], avoid=args.inputs)
            if path.name != report.bench_filename(doc["header"]):
                path = report.unused_bench_path(out, doc["header"], "merged", avoid=args.inputs)
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


def _refuse_other_modes(args) -> None:
    """Raise ValueError naming an option that the mode being run does not read. report has four
    modes (a bench JSON, --tune-run, --trace, --store), and each took the others' options and
    dropped them without a word: ``report X-bench.json --json j.json`` wrote no j.json, exit 0;
    ``report --store S --out rep`` made no rep."""
    mode = ("--trace" if args.trace else "--store" if args.store else "--tune-run" if args.tune_run
            else "a bench JSON")
    owners = {"--json": "--store", "--run-summary": "--store", "--tune-json": "--store --run-summary",
              "--suite": "--store --run-summary", "--title": "--tune-run", "--out": "a bench JSON",
              "--merge": "a bench JSON", "--no-plots": "a bench JSON"}
    given = {"--json": args.json, "--run-summary": args.run_summary, "--tune-json": args.tune_json,
             "--suite": args.suite, "--title": args.title, "--out": args.out, "--merge": args.merge,
             "--no-plots": args.no_plots}
    for opt, owner in owners.items():
        if not given[opt]:
            continue
        reads = mode == owner or (owner == "--store --run-summary" and mode == "--store" and args.run_summary)
        if not reads:
            raise ValueError(f"{opt} applies to {owner} only; this report is of {mode}, which does not read it")


def add_parsers(sub) -> None:
    p = sub.add_parser("report", help="Markdown + PNG report of a bench JSON; --merge partial runs")
    p.add_argument("inputs", nargs="*", metavar="BENCH_JSON", help="bench JSON file(s) to render or merge")
    p.add_argument("--merge", action="store_true", help="combine several partial bench JSONs into one")
    p.add_argument("--out", metavar="DIR", help="where the report (and a merged JSON) go (default: beside the input)")
    p.add_argument("--no-plots", action="store_true", help="Markdown only")
    p.add_argument("--tune-run", metavar="DIR", help="print the Markdown of a `gemmtune tune` run directory "
                   "(tune-summary.json, tune-run.json, inductor.json) instead")
    p.add_argument("--title", help="title for --tune-run (default: gemmtune tune, default space)")
    p.add_argument("--trace", metavar="DIR", help="summarise the worker and tuner traces a tune wrote with "
                   "GEMMTUNE_WORKER_TRACE=DIR instead: where its seconds went, shape by shape")
    p.add_argument("--store", metavar="SQLITE", help="print a per-problem summary of a results store instead "
                   "(.sqlite, or .sqlite.gz as collect writes it; best choice, cuBLAS, speedup, failures)")
    p.add_argument("--json", metavar="FILE", help="with --store: also write the summary as JSON")
    p.add_argument("--run-summary", metavar="FILE", help="with --store: instead write a tuning run's "
                   "tune-summary.json (what --tune-run renders: each problem named by --suite, its family bests, "
                   "spreads, eager times, --tune-json's tuning time) and print it as a table")
    p.add_argument("--tune-json", metavar="FILE", help="with --run-summary: the tune run's --summary JSON "
                   "(per-shape tuning wall time)")
    p.add_argument("--suite", help="with --run-summary: the preset or suite CSV that names the problems "
                   "(default: public)")
    p.set_defaults(fn=cmd_report)
