"""The Python tuning API a user calls first (gemmtune.tune, gemmtune.tune_model, capture): arguments
that were accepted and then ignored or misread, refused by name before anything runs or is stored
(session h6's CPU hunt; each test failed before its fix)."""

from __future__ import annotations

import re

import pytest
import torch

import gemmtune
from gemmtune.problem import Problem

P = Problem.from_sizes(8, 8, 8, "fp16")


# ------------------------------------------------------------------ gemmtune.tune's options
@pytest.mark.parametrize("space", ["exhaustve", "Default", "fast"])
def test_an_unknown_space_is_refused_not_run_as_the_exhaustive_one(tmp_path, space):
    """Every family's space(kind) reads ``kind == 'default'`` and treats anything else as
    'exhaustive': a typo ran the whole exhaustive search (thousands of candidates a shape)."""
    store = tmp_path / "s.sqlite"
    with pytest.raises(ValueError, match=re.escape(repr(space))):
        gemmtune.tune([P], space=space, families=["aten"], store=store, progress=False, in_process=True)
    assert not store.exists()


@pytest.mark.parametrize("seed", ["x", 1.5, None, True])
def test_a_seed_that_is_no_int_is_refused_before_it_poisons_the_store(tmp_path, seed):
    """A seed the worker could not use made every candidate an 'error' row, final in the store:
    the rerun with a good seed reused those rows and found no winner."""
    store = tmp_path / "s.sqlite"
    with pytest.raises(ValueError, match=r"seed must be an int.*" + re.escape(repr(seed))):
        gemmtune.tune([P], seed=seed, families=["aten"], store=store, progress=False, in_process=True)
    assert not store.exists()


@pytest.mark.parametrize("timeout", [0, -5, "10", True, float("nan")])
def test_a_timeout_that_is_not_a_positive_number_is_refused(tmp_path, timeout):
    """timeout=0 (or -5) killed the worker on every candidate and stored each as a 'timeout', final
    unless retry_failed: a rerun with a real timeout measured nothing."""
    store = tmp_path / "s.sqlite"
    with pytest.raises(ValueError, match=r"timeout must be"):
        gemmtune.tune([P], timeout=timeout, families=["aten"], store=store, progress=False, in_process=True)
    assert not store.exists()


@pytest.mark.parametrize("kw", [{"compile_workers": -1}, {"compile_workers": 2.5}, {"compile_workers": True},
                                {"workers": 0}, {"workers": -2}, {"workers": 1.5}])
def test_worker_counts_are_checked_when_given(tmp_path, kw):
    """compile_workers=-1 was taken as given (as none, silently); workers=0 failed only once the
    store had been created, naming 'n', and workers=1.5 deep in the pool."""
    (name, value), = kw.items()
    store = tmp_path / "s.sqlite"
    with pytest.raises(ValueError, match=re.escape(name) + r" must be an int.*" + re.escape(repr(value))):
        gemmtune.tune([P], families=["aten"], store=store, progress=False, **kw)
    assert not store.exists()


@pytest.mark.parametrize("families", [[], (), "", " , "])
def test_families_naming_no_family_is_refused_not_read_as_every_family(tmp_path, families):
    """families=[] (a filter that left nothing) searched every family, the whole space; the CLI
    refuses ``--families ''`` (cli.common.family_list)."""
    store = tmp_path / "s.sqlite"
    with pytest.raises(ValueError, match="families names no family"):
        gemmtune.tune([P], families=families, store=store, progress=False, in_process=True)
    assert not store.exists()


# ------------------------------------------------------------------ gemmtune.tune_model
def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 16))


def _counting(calls):
    def tune(problems, **kw):
        calls.append([p.key for p in problems])
        return {p.key: "aten" for p in problems}
    return tune


@pytest.mark.parametrize("extra_m", [1, (0,), (-1,), (2.0,), (True,), ("4",)])
def test_bad_extra_m_is_refused_by_name_before_the_capture(extra_m):
    """extra_m=1 (the docstring's "e.g. 1 for decode") raised "'int' object is not iterable"; a 0
    failed after the tuning call ("hints['m'] must be ..."), -1 / 2.0 / True as "Problem.m must be
    ...", naming neither extra_m nor the value given."""
    calls, ran = [], []
    model = _mlp()
    model.register_forward_pre_hook(lambda *a: ran.append(1))
    with pytest.raises((ValueError, TypeError), match=r"extra_m"):
        gemmtune.tune_model(model, [(torch.randn(4, 16),)], extra_m=extra_m, tune_fn=_counting(calls))
    assert calls == [] and ran == []


def test_a_bad_mode_is_refused_before_the_tuning_call():
    """mode='simlarity' was refused by compile_mm only after the one tuning call had run (minutes
    to hours on a GPU)."""
    calls = []
    with pytest.raises(ValueError, match="mode must be one of .*'simlarity'"):
        gemmtune.tune_model(_mlp(), [(torch.randn(4, 16),)], mode="simlarity", tune_fn=_counting(calls))
    assert calls == []


@pytest.mark.parametrize("model", [lambda x: x, None, "gpt2"])
def test_a_model_that_is_no_module_is_refused_by_type(model):
    """A function (or a model name) failed in capture with "'function' object has no attribute
    'named_modules'"."""
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        gemmtune.tune_model(model, [(torch.randn(4, 16),)], tune_fn=_counting([]))


def test_capturing_a_model_in_training_mode_leaves_its_buffers_as_they_were():
    """Capture.run says nothing is changed, but a model in training mode updated its BatchNorm
    running statistics (and num_batches_tracked) on every example pass: tune_model (and
    patch(example_inputs=)) left a pretrained model's statistics fitted to the example inputs."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 4))
    before = {n: b.clone() for n, b in model.named_buffers()}
    calls = []
    ds = gemmtune.tune_model(model, [(torch.randn(4, 16) + 3,), (torch.randn(6, 16),)], tune_fn=_counting(calls))
    assert len(calls) == 1 and ds[(8, 16, "float32", "col")].hints == {"m": (4, 6)}
    assert model.training
    for n, b in model.named_buffers():
        assert torch.equal(b, before[n]), n
    cap = gemmtune.capture(model, torch.randn(5, 16))
    assert [r.m for r in cap.records] == [5, 5]
    for n, b in model.named_buffers():
        assert torch.equal(b, before[n]), n


# ------------------------------------------------------------------ parsing and an empty run
@pytest.mark.parametrize("kw", [{"out_dtype": "fp32"}, {"scale": "row"}, {"bias": True}])
@pytest.mark.parametrize("op", ["mm", "addmm", "bmm"])
def test_parse_shape_refuses_scaled_mm_settings_on_other_ops(kw, op):
    """parse_shape('8x8x8:bf16', out_dtype='fp32') gave bf16 -> bf16: scale, out_dtype and bias
    were read for scaled_mm only and otherwise dropped without a word."""
    from gemmtune.shapes import parse_shape

    text = "2x8x8x8:bf16" if op == "bmm" else "8x8x8:bf16"
    with pytest.raises(ValueError, match=r"scaled_mm's; op " + repr(op)):
        parse_shape(text, op=op, **kw)
    assert parse_shape("8x8x8", op="scaled_mm", **kw).problem.op == "scaled_mm"


def test_an_empty_problem_list_is_refused_and_leaves_the_table(tmp_path):
    """tune(iter_already_consumed, out=t, overwrite=True) tuned nothing and replaced the table at
    ``out`` with an empty one."""
    import json

    store, out = tmp_path / "s.sqlite", tmp_path / "t.json"
    kw = dict(families=["aten"], progress=False, in_process=True, store=store)
    gemmtune.tune([P], out=out, **kw)
    assert len(json.loads(out.read_text())["entries"]) == 1
    problems = iter([P])
    list(problems)
    with pytest.raises(ValueError, match="problems is empty"):
        gemmtune.tune(problems, out=out, overwrite=True, **kw)
    assert len(json.loads(out.read_text())["entries"]) == 1


@pytest.mark.parametrize("kw", [{"workers": 2}, {"compile_workers": 4}])
def test_in_process_with_a_worker_count_is_refused_as_the_cli_refuses_it(tmp_path, kw):
    """tune(in_process=True, workers=2) measured in this process and dropped the count without a
    word; ``gemmtune tune --in-process --workers 2`` is refused."""
    store = tmp_path / "s.sqlite"
    with pytest.raises(ValueError, match=r"in_process measures in this process"):
        gemmtune.tune([P], families=["aten"], store=store, progress=False, in_process=True, **kw)
    assert not store.exists()


# ------------------------------------------------------------------ gemmtune.default_choice / space
def test_default_choice_takes_a_gpu_name_as_space_does():
    """space(p, fam, device='h100') takes a built-in GPU's name; default_choice(p, 'h100') raised
    AttributeError: 'str' object has no attribute 'sm_count'."""
    from gemmtune.device import DeviceInfo

    p = Problem.from_sizes(32, 32, 28672, "bf16")
    for name in ("h100", "a100"):
        assert gemmtune.default_choice(p, name) == gemmtune.default_choice(p, DeviceInfo.lookup(name))
    assert gemmtune.default_choice(p, "h100").family == "splitk"


@pytest.mark.parametrize("call", [lambda: gemmtune.default_choice("32x32x28672"),
                                  lambda: gemmtune.default_choice(P, 100),
                                  lambda: gemmtune.space(P, "splitk", device=3)])
def test_default_choice_and_space_refuse_wrong_types_by_name(call):
    """A string problem failed with "'str' object has no attribute 'm'", an int device with
    "expected string or bytes-like object" from inside the GPU-name lookup."""
    with pytest.raises(TypeError, match=r"(problem|device) must be"):
        call()


@pytest.mark.parametrize("name", ["overwrite", "retry_failed", "fast", "deterministic", "in_process"])
@pytest.mark.parametrize("value", ["False", "no", 0, None])
def test_switches_must_be_bools(tmp_path, name, value):
    """bool('False') is True: overwrite='False' replaced the table at ``out``, retry_failed='no'
    measured the stored failures again."""
    store = tmp_path / "s.sqlite"
    with pytest.raises(TypeError, match=f"{name} must be True or False, got {value!r}"):
        gemmtune.tune([P], families=["aten"], store=store, progress=False, **{name: value})
    assert not store.exists()


@pytest.mark.parametrize("env", [["FOO=1"], {"FOO": 1}, "FOO=1"])
def test_env_must_be_a_dict_of_strings(tmp_path, env):
    """A list failed as "dictionary update sequence element #0 has length 5", an int value as
    "worker 1 of 1 could not be started" once the store had been created."""
    store = tmp_path / "s.sqlite"
    with pytest.raises(TypeError, match="env must be a dict of str to str"):
        gemmtune.tune([P], families=["aten"], store=store, progress=False, env=env)
    assert not store.exists()


def test_overwrite_false_as_a_string_keeps_the_table(tmp_path):
    """The case that lost data: an earlier table at ``out``, then a run of another shape with
    overwrite='False' (read from a config file, say) replaced it with this run's table."""
    import json

    store, out = tmp_path / "s.sqlite", tmp_path / "t.json"
    kw = dict(families=["aten"], store=store, out=out, progress=False, in_process=True)
    gemmtune.tune([P], **kw)
    with pytest.raises(TypeError):
        gemmtune.tune([Problem.from_sizes(16, 8, 8, "fp16")], overwrite="False", **kw)
    assert [e["key"] for e in json.loads(out.read_text())["entries"]] == [P.key]


def test_tune_model_refuses_a_misspelt_tune_keyword_before_the_example_passes():
    """famlies=... went on to gemmtune.tune, which refused it only after every example pass had run
    (on a GPU, after the early benchmark worker had started too)."""
    ran = []
    model = _mlp()
    model.register_forward_pre_hook(lambda *a: ran.append(1))
    with pytest.raises(TypeError, match="'famlies'"):
        gemmtune.tune_model(model, [(torch.randn(4, 16),)], famlies=["aten"])
    assert ran == []
