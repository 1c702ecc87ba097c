"""Bad command-line input is a one-line usage error (exit 2) that names the option, never a value
silently kept or a traceback (session 55); and two decisions behind it: the step gate's failed
timings, and which tables ``lut merge`` takes as one GPU's. Each test failed before its fix (CPU)."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import run_cli

from gemmtune import cli
from gemmtune.eager_gate import gate_eager

# (tests/ is on sys.path under pytest) The scripted step timer's helpers are the gate's own tests'.
from test_eager_gate import TRITON, _paths, _tune  # noqa: E402


def usage_error(argv, capsys) -> str:
    """The one-line usage error ``argv`` gets when parsed (exit 2); its text."""
    with pytest.raises(SystemExit) as e:
        cli.build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize("argv,option", [
    (["bench", "--deadline", "5", "--deadline", "10"], "--deadline"),
    (["bench", "--out", "a", "--out", "b"], "--out"),
    (["tune", "--out", "a.json", "--out", "b.json"], "--out"),
    (["tune", "--store", "a.sqlite", "--store", "b.sqlite"], "--store"),
    (["tune", "--timeout", "5", "--timeout", "9"], "--timeout"),
    (["tune", "--groups", "a", "--groups", "b"], "--groups"),
    (["collect", "--max-minutes", "3", "--max-minutes", "4"], "--max-minutes"),
    (["train", "--store", "a", "--store", "b"], "--store"),
    (["capture", "--model", "tiny-llama", "--model", "gpt2"], "--model"),
    (["lut", "export-inductor", "t.json", "o.json", "--device-key", "a", "--device-key", "b"], "--device-key"),
    (["bench-model", "--models", "gpt2", "--models", "minilm"], "--models"),
])
def test_a_single_value_option_given_twice_is_refused_by_every_command(argv, option, capsys):
    """argparse keeps the last of a repeated option without a word: ``bench --deadline 5 --deadline
    10`` ran to 10, ``tune --out a --out b`` wrote b alone. Only some options (--suite, --families)
    refused a repeat, one by one; the common Parser now refuses it for every single-value option."""
    err = usage_error(argv, capsys)
    assert f"{option} given twice" in err, err


def test_an_old_spelling_and_the_new_one_together_are_refused(capsys):
    """``--group a --groups b`` (the deprecated spelling, then the new one) kept b alone. (The old
    spelling's warning comes first: it was met first.)"""
    with pytest.raises(SystemExit) as e:
        cli.build_parser().parse_args(["tune", "--group", "a", "--groups", "b"])
    warning, error = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and "--group is deprecated" in warning
    assert error.startswith("gemmtune tune: error: --groups given twice (as --group, then --groups)"), error


def test_repeatable_options_and_flags_still_repeat_and_leave_no_bookkeeping():
    """``--shape`` (append: each is tuned) and the flags (``-q -q``: the same thing asked twice) may
    be repeated. The parse leaves nothing but options in the namespace (the refusal's record of the
    options seen was left there as ``_given_once``)."""
    args = cli.build_parser().parse_args(["tune", "--shape", "8x8x8", "--shape", "16x16x16", "-q", "-q",
                                          "--families", "aten", "--overwrite", "--overwrite"])
    assert args.shape == ["8x8x8", "16x16x16"] and args.quiet and args.overwrite and args.families == "aten"
    assert not [k for k in vars(args) if k.startswith("_")], vars(args)


@pytest.mark.parametrize("argv,needle", [
    # nan > 0 and nan < 1 are both False: a NaN deadline never stopped a shape; inf hard-stop
    # minutes overflowed threading.Timer; a negative run-off or gain was taken until TuneOptions,
    # after the shapes were read, named "min_gain" rather than the option.
    (["bench", "--deadline", "nan"], "argument --deadline: 'nan' is not a finite number"),
    (["bench", "--deadline", "inf"], "argument --deadline: 'inf' is not a finite number"),
    (["bench", "--deadline", "-1"], "argument --deadline: must be > 0 (a Unix time in seconds)"),
    (["tune", "--timeout", "inf"], "argument --timeout: 'inf' is not a finite number"),
    (["worker", "--serve", "x.sock", "--timeout", "inf"], "argument --timeout: 'inf' is not a finite number"),
    (["collect", "--timeout", "inf"], "argument --timeout: 'inf' is not a finite number"),
    (["collect", "--max-minutes", "inf"], "argument --max-minutes: 'inf' is not a finite number"),
    (["collect", "--hard-stop-minutes", "inf"], "argument --hard-stop-minutes: 'inf' is not a finite number"),
    (["tune", "--min-gain", "nan"], "argument --min-gain: 'nan' is not a finite number"),
    (["tune", "--min-gain", "-0.1"], "argument --min-gain: must be a fraction in [0, 1)"),
    (["tune", "--min-gain", "1"], "argument --min-gain: must be a fraction in [0, 1)"),
    (["tune", "--runoff", "-0.5"], "argument --runoff: must be a fraction in [0, 1)"),
    (["tune", "--runoff", "inf"], "argument --runoff: 'inf' is not a finite number"),
    # numpy refuses a negative seed and torch's generators one past 64 bits, once the run is under way
    (["tune", "--seed", "-1"], "argument --seed: must be >= 0"),
    (["tune", "--seed", str(2**64)], "argument --seed: must be at most 2**63 - 1"),
    (["bench", "--seed", "-3"], "argument --seed: must be >= 0"),
    (["capture", "--model", "tiny-llama", "--seed", "-1"], "argument --seed: must be >= 0"),
    (["train", "--store", "x", "--seed", "-1"], "argument --seed: must be >= 0"),
])
def test_numbers_out_of_their_range_are_usage_errors(argv, needle, capsys):
    err = usage_error(argv, capsys)
    assert needle in err, err


def test_each_range_keeps_its_edges(capsys):
    """What each option means decides its range: 0 turns --min-gain and --runoff off (taken), a
    seed is 0 to 2**63 - 1, 0 minutes is a budget already spent; the numbers just past each edge
    are refused."""
    parse = cli.build_parser().parse_args
    args = parse(["tune", "--min-gain", "0", "--runoff", "0.999", "--timeout", "0.5", "--seed", str(2**63 - 1)])
    assert (args.min_gain, args.runoff, args.timeout, args.seed) == (0.0, 0.999, 0.5, 2**63 - 1)
    assert parse(["tune", "--seed", "0"]).seed == 0
    assert parse(["bench", "--deadline", "1700000000"]).deadline == 1700000000.0
    assert parse(["collect", "--max-minutes", "0", "--hard-stop-minutes", "0"]).max_minutes == 0.0
    for argv in (["tune", "--min-gain", "-0.0001"], ["tune", "--runoff", "1.0"], ["tune", "--seed", str(2**63)],
                 ["bench", "--deadline", "0"]):
        assert "argument " + argv[1] in usage_error(argv, capsys)


def test_the_deadline_variable_is_checked_as_the_option_is(monkeypatch, capsys):
    """GEMMTUNE_BENCH_DEADLINE=nan (the deprecated spelling of --deadline) was float()ed and taken."""
    from gemmtune.bench import suite

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(suite, "run", lambda *a, **k: pytest.fail("ran with a NaN deadline"))
    monkeypatch.setenv("GEMMTUNE_BENCH_DEADLINE", "nan")
    rc, _, err = run_cli(["bench", "--suite", "smoke", "--skip-inductor", "--skip-tunableop"], capsys)
    assert rc == 2 and "GEMMTUNE_BENCH_DEADLINE='nan' is not a Unix time" in err and "Traceback" not in err, err


# The step gate: a round whose timing failed (NaN, inf, 0 s) is left out of the paired median.

def _gated_model():
    import gemmtune

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16)).half()
    gemmtune.patch(model, hints={"m": [8]}, tune_fn=_tune(TRITON), progress=False)
    return model


def _scripted_timer(model, tuned_times, aten_times):
    """Step times read in turn from ``tuned_times`` when the step runs on the tuned kernels, from
    ``aten_times`` when it runs on cuBLAS (after the gate's first, warm-up, reading of 1.0)."""
    seq = {True: iter([1.0, *tuned_times]), False: iter(aten_times)}

    def timer(fn, reps, sync=None):
        fn()
        from gemmtune import nn as gnn
        return next(seq[any(p is gnn._TUNED for p in model[0]._gemmtune_paths.values())])
    return timer


def test_an_infinite_cublas_time_does_not_make_the_tuned_step_free():
    """Two of three rounds where the cuBLAS step's reading failed (inf) made ratios of 0: the
    median said the tuned step took no time, and the gate kept a step 10% slower than cuBLAS's.
    A round is paired only where both times are measurements; with most rounds failed, the
    candidate is not gated on (NaN), and cuBLAS is kept."""
    model = _gated_model()
    x = torch.randn(8, 32, dtype=torch.float16)
    timer = _scripted_timer(model, [1.1, 1.1, 1.1], [math.inf, 1.0, math.inf])
    (r,) = gate_eager(model, {"s": lambda: model(x)}, force=True, timer=timer, rounds=3)
    assert r.kept == "aten" and math.isnan(r.ratio["tuned"]) and r.tuned_shapes == 2, r
    assert _paths(model, 8) == ["aten", "aten"]
    assert r.step_ms["tuned"] == pytest.approx(1100.0)


def test_a_nan_round_does_not_sort_as_the_tuned_steps_best():
    """statistics.median sorts, and a NaN compares false with everything: a failed first round
    (NaN) stayed first, as if the smallest ratio, and moved the median to a 3% win (0.97, kept)
    where the measured rounds' median is a 1.5% loss of margin (0.985: cuBLAS)."""
    model = _gated_model()
    x = torch.randn(8, 32, dtype=torch.float16)
    timer = _scripted_timer(model, [math.nan, 0.5, 0.97, 1.0, 1.1], [1.0] * 5)
    (r,) = gate_eager(model, {"s": lambda: model(x)}, force=True, timer=timer, rounds=5)
    assert r.ratio["tuned"] == pytest.approx(0.985) and r.kept == "aten", r
    assert _paths(model, 8) == ["aten", "aten"]


# lut merge: one GPU by the trust policy's rule.

def test_lut_merge_takes_one_gpu_whose_name_differs_in_case_or_capability(tmp_path, capsys):
    """Tables from one H100, its name in another case (or a by-hand table without a capability),
    were refused as tables from different GPUs; with --allow-mixed-devices the merged table was
    "mixed", untrusted on that very H100. check_provenance takes them as one GPU: merge does too,
    keeps the first table's spelling, and still refuses another GPU."""
    from gemmtune.problem import Problem
    from gemmtune.table import LookupTable, TableChoice, check_provenance, load, provenance

    h100 = "NVIDIA H100 80GB HBM3"
    key = Problem.from_sizes(64, 48, 96, "fp16").key

    def table(name, capability, ms, path, produced_by="tuned"):
        prov = provenance(name, capability, "2.11.0", "3.6.0", "0.1.0", produced_by)
        return LookupTable(prov, {key: [TableChoice("aten", ms)]}).save(tmp_path / path)

    a = table(h100, "9.0", 0.020, "a.json")
    b = table("nvidia h100 80gb hbm3 ", "9.0", 0.019, "b.json")
    c = table(h100, "", None, "c.json", produced_by="by-hand")
    out = tmp_path / "m.json"
    rc, stdout, err = run_cli(["lut", "merge", str(out), str(a), str(b), str(c)], capsys)
    assert rc == 0, err
    m = load(out)
    assert (m.provenance["device_name"], m.provenance["capability"]) == (h100, "9.0")
    assert m.entries[key] == [TableChoice("aten", 0.019)]
    assert check_provenance(m, h100, "3.6.0") == [] and m.trusted
    other = table("NVIDIA A100-SXM4-80GB", "8.0", 0.03, "other.json")
    rc, _, err = run_cli(["lut", "merge", str(tmp_path / "m2.json"), str(a), str(other)], capsys)
    assert rc == 2 and "refusing to merge tables from different GPUs" in err and "--allow-mixed-devices" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "m2.json").exists()
