"""Issue 17's host cost of a converted layer on its F.linear path: a patched HF decode step at
batch 1 whose every converted layer's eager path is cuBLAS enters no more Python than the
unpatched model's (CPU, counted with sys.setprofile: deterministic, no timing).

What these pin: the eager-path memo is hit for the rank the model really calls with (3-D
[batch, 1, hidden] in a transformers model, after the prompt's and the first step's calls),
each converted layer's call enters exactly one gemmtune function (its forward) and the compile
check, reads no weight or bias through ``nn.Module.__getattr__``, and keeps ``Module.__call__``'s
no-hook fast path. On the 2-core CPU machine (2026-12-03, ``scripts/diag_linear_host.py``) such a
call cost 0.5-0.6 us less than nn.Linear's: a forward that grew a helper call, an attribute read
through ``__getattr__`` or a hook would show here first.
"""

from __future__ import annotations

import collections
import copy
import gc
import sys
import warnings

import pytest
import torch

import gemmtune
from gemmtune import nn as gnn

pytest.importorskip("transformers")

from gemmtune.benchmodel.models import build_model, parse_model  # noqa: E402
from gemmtune.eager_gate import decode_step  # noqa: E402

NN = gnn.__file__  # the step itself (eager_gate.decode_step) is gemmtune code too: the layers' module only


def _frames(fn) -> list[tuple[str, str, str, str]]:
    """(file, function, caller's file, caller's function) of every Python frame ``fn()`` enters."""
    seen = []

    def prof(frame, event, arg):
        if event == "call":
            back = frame.f_back
            seen.append((frame.f_code.co_filename, frame.f_code.co_name,
                         back.f_code.co_filename if back is not None else "",
                         back.f_code.co_name if back is not None else ""))
    # A garbage collection inside fn() runs finalizers and weakref callbacks left by earlier tests in
    # this worker (CI, session 61: the patched step counted 518 frames to the plain step's 516, two
    # more than a fresh process): collect first and keep the collector off while counting.
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
        if enabled:
            gc.enable()
    return seen


def _converted(model) -> list[torch.nn.Module]:
    return [m for m in model.modules() if "_gemmtune_eager" in m.__dict__]


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-gpt2"])
def test_a_decode_step_on_cublas_enters_no_more_python_than_torchs(name):
    warnings.simplefilter("ignore")
    model = build_model(parse_model(name), torch.float32, "cpu")
    vocab = model.get_input_embeddings().weight.shape[0]
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (1, 8), generator=g)
    step_ids = torch.randint(0, vocab, (1, 1), generator=g)
    plain, patched = copy.deepcopy(model), copy.deepcopy(model)
    gemmtune.patch(patched, hints={"m": [1]}, progress=False, convert_aten_layers=True,
                   tune_fn=lambda problems, **kw: {p.key: "aten" for p in problems})
    layers = _converted(patched)
    assert layers  # every Linear (Llama) / Conv1D (GPT-2), converted although all-cuBLAS
    steps = {"plain": decode_step(plain, ids, step_ids), "patched": decode_step(patched, ids, step_ids)}
    with torch.no_grad():
        for fn in steps.values():
            fn()  # the first step at this shape: its eager path chosen (cuBLAS: the decision is aten)
        for m in layers:
            d3 = [s for s in m._gemmtune_paths if len(s) == 3 and s[:2] == (1, 1)]
            assert d3 and all(m._gemmtune_paths[s] == "aten" for s in d3), m  # the 3-D decode shape, memoized
            assert not (m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or m._backward_pre_hooks)
        frames = {k: _frames(fn) for k, fn in steps.items()}
        torch.testing.assert_close(steps["patched"](), steps["plain"](), rtol=1e-5, atol=1e-5)
    ours = [f for f in frames["patched"] if f[0] == NN]
    # One gemmtune frame a converted layer a step: its forward, nothing past the memoized path.
    assert len(ours) == len(layers), sorted({f[:2] for f in ours})
    assert {f[1] for f in ours} == {type(m).forward.__name__ for m in layers}  # Linear.forward, _conv1d_forward
    # Below it only the compile check (torch.compiler.is_compiling, and torch.jit.is_scripting in it);
    # no weight or bias read through nn.Module.__getattr__, as torch's own forward reads them.
    below = sorted({f[1] for f in frames["patched"] if f[2] == NN})
    assert below == ["is_compiling"], below
    assert not any(f[1] == "__getattr__" and f[2] == NN for f in frames["patched"])
    # And the step as a whole: no more Python frames than the unpatched model's.
    extra = collections.Counter(f[:2] for f in frames["patched"]) - collections.Counter(f[:2] for f in frames["plain"])
    assert len(frames["patched"]) <= len(frames["plain"]), (len(frames["patched"]), len(frames["plain"]), extra)
    # No layer reads its path table at the decode shape: the shape is the layer's hot one (nn._hot: on
    # the H200 host each table read, cold in the CPU's caches by the layer's next call, cost ~1.5 us).
    reads = _Counting()
    for m in layers:
        assert len(m._gemmtune_hot) == 3 and m._gemmtune_hot[:2] == (1, 1), m._gemmtune_hot
        m._gemmtune_paths = _Counting(m._gemmtune_paths, reads=reads.reads)
    with torch.no_grad():
        torch.testing.assert_close(steps["patched"](), steps["plain"](), rtol=1e-5, atol=1e-5)
    assert reads.reads == [], reads.reads[:5]


class _Counting(dict):
    """A path table that records each ``get`` (the forwards' one read of it)."""

    def __init__(self, *a, reads=None):
        super().__init__(*a)
        self.reads = [] if reads is None else reads

    def get(self, key, default=None):
        self.reads.append(key)
        return super().get(key, default)
