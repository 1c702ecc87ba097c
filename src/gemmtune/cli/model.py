"""``gemmtune predict`` (rank candidates with a performance model, no GPU) and ``gemmtune train``
(fit a learned model on a results store)."""

from __future__ import annotations

import math
import sys

from .common import (add_problem_args, alias, family_list, fraction, int_at_least, positive_int, problem_of,
                     refuse_empty, refuse_same_file, seed_int, version_text)


TOP = 10  # predict --top's default (a --top other than it, given with --eval, is refused)
TRAIN_OUT, TEST_FRACTION = "gemmtune-model.json", 0.2  # train's defaults for --out, --test-fraction


def _model_for(args, dev, triton_version: str | None = None):
    """--model PATH, else the shipped model for ``dev`` (both checked against
    ``triton_version``, default the installed triton), else the analytic model."""
    from ..model import default_model, load_model

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

    from .. import kernels
    from ..device import current_or
    from ..tune import candidates

    console = Console(width=None if sys.stdout.isatty() else 160)
    refuse_empty(args, "eval", "model")  # an empty --eval counted as not given: "give --shape"
    if args.eval:
        _refuse_ranking_options(args)
        return _predict_eval(args, console)
    if not args.shape:
        raise ValueError("give --shape MxNxK[:dtype] (repeatable), or --eval STORE to score a model")
    problems = [problem_of(text, args) for text in args.shape]  # bad shapes fail before the model loads
    families = family_list(args.families) or list(kernels.FAMILIES)  # before the model loads, as the shapes
    dev = current_or(args.device)
    model = _model_for(args, dev, triton_version=args.triton)
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


def _refuse_ranking_options(args) -> None:
    """Raise ValueError naming a ranking option given with --eval, which reads --model and --device
    alone (and the store's triton version): each was dropped without a word, exit 0."""
    given = {"--shape": args.shape, "--families": args.families, "--triton": args.triton,
             "--layout-b": args.layout_b, "--top": args.top != TOP, "--op": args.op != "mm",
             "--space": args.space != "default"}
    for opt, value in given.items():
        if value:
            raise ValueError(f"{opt} ranks shapes; --eval scores the model on the store's problems (with the "
                             "store's triton) and reads only --model and --device: give one or the other")


def _predict_eval(args, console) -> int:
    """Score a model's ranking against the measured times of a results store."""
    from rich.markup import escape
    from rich.table import Table

    from ..device import DeviceInfo
    from ..model import evaluate, load_dataset

    from ..model.data import MIN_RANKED_CHOICES

    data = load_dataset(args.eval)
    if not data.groups:
        raise ValueError(f"{args.eval}: no problem to evaluate on (none left with measured choices this gemmtune "
                         "can read: a choice id of another version, or only failed rows)")
    # Rows of another GPU or triton left out (and choices this version cannot read): said, as train
    # says it; dropped without a word before. The first few, then a count (one per problem at most).
    for note in data.notes[:5]:
        print(f"note: {note}", file=sys.stderr)
    if len(data.notes) > 5:
        print(f"note: ... and {len(data.notes) - 5} more", file=sys.stderr)
    # A problem with fewer measured choices than a ranking can be judged on (a --fast store's one
    # or two) has its best "found" whatever the model ranks: scored, it inflated 'best found' and
    # deflated the regrets. Left out with a count, as train and --cv leave them out.
    ranked = data.ranked()
    thin = len(data.groups) - len(ranked.groups)
    if thin:
        print(f"note: {thin} problems with fewer than {MIN_RANKED_CHOICES} measured choices left out "
              f"(too few to judge a ranking on)", file=sys.stderr)
    if not ranked.groups:
        raise ValueError(f"{args.eval}: every problem has fewer than {MIN_RANKED_CHOICES} measured choices: "
                         "too few to judge a ranking on")
    data = ranked
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
    # An empty path was read as the working directory ("cannot write the model to : it is a directory").
    refuse_empty(args, "store", "out", "ship", "compare", "policies", "report", "kinds")
    suites = args.exclude_suite or ["public"]
    suites = [] if [x.lower() for x in suites] == ["none"] else suites
    if args.compare and (args.cv or args.ship):
        raise ValueError("--compare writes a report of its own; give it without --cv / --ship")
    if args.report and not (args.cv or args.ship):
        raise ValueError("--report writes a cross-validation: give it with --cv (or --ship)")
    # Options of one mode, given to another, were dropped without a word (the plain training ran).
    if getattr(args, "policy_store", None) and not args.policies:
        raise ValueError("--policy-store replays the policies on another store: give it with --policies")
    if args.kinds and not (args.compare or args.cv or args.ship) or args.kinds and args.policies:
        raise ValueError("--kinds names the kinds --compare trains or --cv / --ship cross-validates; "
                         "a plain training and --policies take --kind")
    if args.compare and args.kind != "auto":
        # --compare trains --kinds (default gbt,lgbm_rank): "--compare DIR --kind mlp" trained
        # those two and no MLP, without a word.
        raise ValueError(f"--kind {args.kind}: --compare trains the kinds --kinds names (default gbt,lgbm_rank); "
                         f"give --kinds {args.kind}")
    if getattr(args, "pool_store", None) and (args.compare or args.policies):
        raise ValueError("--pool-store trains a model (plain, --cv or --ship); --compare and --policies "
                         "read --store alone")
    # --out is the plain training's model, --test-fraction its (and --compare's) held-out share:
    # given to --cv / --ship / --policies (folds) or --compare (a report), each was dropped without a
    # word: ``train --cv 5 --out m.json`` printed its table, exit 0, and wrote no m.json.
    mode = "--policies" if args.policies else "--cv / --ship" if args.cv or args.ship else \
        "--compare" if args.compare else None
    if mode and args.out is not None:
        raise ValueError(f"--out names the model a plain training writes; {mode} writes none there "
                         "(--ship PATH writes a cross-validated model)")
    if mode in ("--policies", "--cv / --ship") and args.test_fraction is not None:
        raise ValueError(f"--test-fraction is the plain training's (and --compare's) held-out share; {mode} "
                         "holds shapes out by folds (--cv K)")
    args.out = TRAIN_OUT if args.out is None else args.out
    args.test_fraction = TEST_FRACTION if args.test_fraction is None else args.test_fraction
    from ..model.regressors import training_threads

    with training_threads(args.threads):
        return _train_mode(args, suites)


def _train_mode(args, suites) -> int:
    """cmd_train's mode (policies, cross-validation, comparison or a plain training), its options checked."""
    from rich.console import Console
    from rich.table import Table

    from ..model import train

    if args.policies:
        if args.compare or args.ship or args.report:
            raise ValueError("--policies writes a report of its own; give it without --compare / --ship / --report")
        return _train_policies(args, suites)
    if args.cv or args.ship:
        if args.ship:
            _not_a_store(args, args.ship, "--ship")
        return _train_cv(args, suites)
    if args.compare:
        from ..model.compare import compare, write_report

        kinds = [k.strip() for k in (args.kinds or "gbt,lgbm_rank").split(",") if k.strip()]
        res = compare(args.store, kinds=kinds, seed=args.seed, test_fraction=args.test_fraction,
                      exclude_suites=suites)
        path = write_report(res, args.compare)
        print(path.read_text())
        return 0
    from ..jsonio import check_file_target

    check_file_target(args.out, "the model")  # before the training, not after it
    _not_a_store(args, args.out, "--out")
    model, rep = train(args.store, exclude_suites=suites, test_fraction=args.test_fraction, kind=args.kind,
                       seed=args.seed, device=args.device, pool_stores=getattr(args, "pool_store", None) or ())
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


def _not_a_store(args, path, flag: str) -> None:
    """The model is written over ``path``: naming the --store (or a --pool-store) there replaced
    the timings it was trained on with the model JSON. Refused before the training."""
    stores = [("--store", args.store)] + [("--pool-store", s) for s in getattr(args, "pool_store", None) or ()]
    refuse_same_file(flag, path, stores, "the model would replace the data it is trained on; give another path")


def _train_cv(args, suites: list[str]) -> int:
    """``train --cv K``: cross-validate the kinds by shape and print the summaries; with
    ``--ship PATH``, train the better kind (or ``--kind``) on every shape and write it there."""
    from rich.console import Console
    from rich.table import Table

    from ..model import cv as cvmod
    from ..model.data import exclude, load_dataset, pool, suite_shapes

    data = load_dataset(args.store)
    if getattr(args, "pool_store", None):
        data = pool(data, [load_dataset(p) for p in args.pool_store])
        for note in data.notes[-len(args.pool_store):]:
            print(note, file=sys.stderr)
    excluded: set = set()
    for s in suites:
        excluded |= suite_shapes(s)
    data, n_excl = exclude(data, excluded)
    kinds = [args.kind] if args.kind != "auto" else \
        [k.strip() for k in (args.kinds or ",".join(cvmod.DEFAULT_KINDS)).split(",") if k.strip()]
    console = Console(width=None if sys.stdout.isatty() else 160)
    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    res = cvmod.cross_validate(data, kinds=kinds, folds=args.cv or 5, seed=args.seed, groups=cvmod.shape_groups(),
                               device=args.device, say=say)
    sums = res["summaries"]
    t = Table(title=f"{res['folds']}-fold cross-validation by shape: {res['shapes']} shapes, {res['scored']} problems "
                    f"scored ({n_excl} excluded: {', '.join(suites) or 'none'})")
    for col in ("model", "Spearman mean", "top-1 regret geomean", "top-1 within 10%", "best found",
                "top-5 regret geomean", "train s"):
        t.add_column(col, justify="left" if col == "model" else "right")
    for name in (*kinds, "analytic"):
        s = sums[name]
        t.add_row(name, f"{s['spearman_mean']:.3f}", _pct(s["top1_regret_geomean"]), _pct(s["top1_within_10pct"]),
                  _pct(s["top1_found"]), _pct(s["top5_regret_geomean"]),
                  f"{res['fit_s'][name]:.1f}" if name in res["fit_s"] else "-")
    console.print(t)
    kind = cvmod.choose_kind(res)
    console.print(f"chosen: {kind} (lower geomean top-1 regret over the folds)")
    command = "gemmtune " + " ".join(getattr(args, "argv", None) or [])
    if not args.ship:
        if args.report:
            console.print(f"report: {cvmod.write_report(res, args.report, command=command, data=data)}")
        return 0
    worse = learned_is_worse({"held_out": sums[kind], "held_out_analytic": sums["analytic"]})
    if worse and not args.force:
        console.print(f"not shipped: cross-validated, {kind} ranks worse than the analytic model ({worse}); "
                      "--force ships it anyway.")
        if args.report:
            console.print(f"report: {cvmod.write_report(res, args.report, command=command, data=data)}")
        return 1
    _, info = cvmod.ship(data, kind, args.ship, cv=res, seed=args.seed, device=args.device,
                         description={"excluded_suites": suites, "excluded_problems": n_excl})
    if args.report:
        console.print(f"report: {cvmod.write_report(res, args.report, command=command, data=data, shipped=info)}")
    console.print(f"{info['path']}: {kind} model trained on all {res['shapes']} shapes in {info['fit_s']:.1f} s "
                  f"({info['bytes'] / 1024:.0f} KiB), its {res['folds']}-fold cross-validation in its provenance"
                  + (f" (shipped with --force although {worse})" if worse else ""))
    return 0


def _train_policies(args, suites: list[str]) -> int:
    """``train --policies DIR``: the tuner's selection policies (fixed top k, adaptive,
    family-diverse) replayed on each shape held out once (--cv K folds, default 5)."""
    from ..model import cv as cvmod
    from ..model.data import exclude, load_dataset, suite_shapes

    data = load_dataset(args.store)
    excluded: set = set()
    for s in suites:
        excluded |= suite_shapes(s)
    data, _ = exclude(data, excluded)
    kind = "lgbm_rank" if args.kind == "auto" else args.kind
    others = {path: load_dataset(path) for path in args.policy_store or []}
    res = cvmod.policy_study(data, kind=kind, folds=args.cv or 5, seed=args.seed, groups=cvmod.shape_groups(),
                             device=args.device, others=others,
                             say=lambda msg: print(msg, file=sys.stderr, flush=True))
    command = "gemmtune " + " ".join(getattr(args, "argv", None) or [])
    path = cvmod.write_policy_report(res, args.policies, command=command, data=data)
    print(path.read_text())
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


def add_parsers(sub) -> None:
    p = sub.add_parser("predict", help="rank a shape's candidates with a performance model (no GPU needed)")
    p.add_argument("--shape", action="append", metavar="MxNxK[:dtype]", help="a shape (repeatable)")
    p.add_argument("--device", help="h100, h200, a100 (default: the visible GPU, else h100)")
    p.add_argument("--families", metavar="F1,F2", help="comma-separated families (default: all)")  # as tune's
    alias(p, "--family", "--families")
    p.add_argument("--space", choices=("default", "exhaustive"), default="default", help="the search space")
    p.add_argument("--top", type=positive_int, default=TOP, metavar="N", help="rows to show (N >= 1)")
    add_problem_args(p)
    p.add_argument("--model", metavar="PATH", help="a learned model (default: the one shipped for this GPU "
                   "and triton MAJOR.MINOR, else the analytic model)")
    p.add_argument("--triton", metavar="VERSION", type=version_text, help="triton version of the machine the ranking is for "
                   "(default: the installed one); e.g. --device h200 --triton 3.6 ranks with the model "
                   "shipped for H200 + triton 3.6 from any machine")
    p.add_argument("--eval", metavar="STORE", help="instead: score the model's ranking against the measured "
                   "times of a results store (.sqlite, .sqlite.gz, .csv, .csv.gz), at its triton version; reads "
                   "--model and --device only")
    p.set_defaults(fn=cmd_predict)

    p = sub.add_parser("train", help="fit a learned performance model on a results store")
    p.add_argument("--store", required=True, help="results store or its CSV export (.sqlite[.gz], .csv[.gz])")
    # Defaults None, filled in cmd_train: given to a mode that does not read them, they are refused.
    p.add_argument("--out", help=f"model file to write (JSON; replaced if it exists; default: {TRAIN_OUT})")
    p.add_argument("--exclude-suite", action="append", metavar="NAME|CSV",
                   help="leave these shapes out of training (repeatable; default: public; 'none' for nothing)")
    p.add_argument("--kind", choices=("auto", "gbt", "mlp", "lgbm_rank"), default="auto",
                   help="gradient-boosted trees, a small MLP, auto (the better of those two on validation "
                   "shapes), or lgbm_rank: a LightGBM lambdarank ranker (pip install 'gemmtune[learn]')")
    p.add_argument("--compare", metavar="DIR", help="instead: train each of --kinds on one split by shape, "
                   "score them and the analytic model on the held-out shapes (ranking, training time, fixed "
                   "and adaptive top-k), write DIR/README.md and DIR/results.json")
    p.add_argument("--kinds", metavar="K1,K2", help="model kinds --compare trains (default gbt,lgbm_rank) or --cv "
                   "cross-validates (default gbt,mlp; --kind other than auto: that one)")
    p.add_argument("--cv", type=int_at_least(2), nargs="?", const=5, metavar="K",
                   help="instead: K-fold cross-validation by shape (folds dealt per collection-plan shape group; "
                   "K default 5) of --kinds and the analytic model; prints the summaries and the better kind")
    p.add_argument("--ship", metavar="PATH", help="with --cv (5 folds unless given): train the better kind (or "
                   "--kind) on every shape and write it to PATH, its cross-validation in the provenance; refused "
                   "when it ranks worse than the analytic model (--force)")
    p.add_argument("--policies", metavar="DIR", help="instead: replay the tuner's selection policies (cuBLAS "
                   "plus the model's top k for k in 1,2,3,5, the adaptive k, and the family-diverse selection: each "
                   "family's first choice, the best 2 or 3 of those) on every shape held out once (--cv K folds, "
                   "default 5; --kind, default lgbm_rank); write DIR/README.md and DIR/policies.json")
    p.add_argument("--pool-store", action="append", metavar="STORE", help="also train on this store of another "
                   "GPU of the same compute capability (repeatable), each problem featurized with the GPU that "
                   "measured it; the model ranks for --store's GPU, and the held-out shapes (or the "
                   "cross-validation) score only --store's problems (a pooled problem of a held-out shape is "
                   "left out of that training)")
    p.add_argument("--policy-store", action="append", metavar="STORE", help="with --policies: also replay them on "
                   "this store's problems (repeatable), with the model trained on every other shape")
    p.add_argument("--report", metavar="DIR", help="with --cv: write the cross-validation (overall and per "
                   "kernel family) to DIR/README.md and DIR/cv.json")
    p.add_argument("--test-fraction", type=fraction, metavar="F",
                   help="share of shapes held out, between 0 and 1; the learned model is compared with the "
                   f"analytic one on them (plain training and --compare; default: {TEST_FRACTION})")
    p.add_argument("--force", action="store_true",
                   help="write the model even when it ranks worse than the analytic model on the held-out shapes")
    p.add_argument("--device", help="built-in GPU whose facts the features use (default: from the store)")
    p.add_argument("--seed", type=seed_int, default=0, help="random seed")
    p.add_argument("--threads", type=positive_int, metavar="N", help="CPU threads LightGBM trains and ranks on "
                   "(default: the machine's cores, at most 8)")
    p.set_defaults(fn=cmd_train)
