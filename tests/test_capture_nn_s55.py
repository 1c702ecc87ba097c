"""Session 55's hunt of the model surface (capture, gemmtune capture, patch, nn): each test failed
before its fix."""
from __future__ import annotations

import copy
import warnings

import pytest
import torch

import gemmtune
from gemmtune.kernels import tiled
from gemmtune.modeltune import layer_keys

TRITON = "triton_mm:BM16-BN16-BK16-S1-W2-G8"
needs_kernels = pytest.mark.skipif(not torch.cuda.is_available() and not tiled._INTERPRETED,
                                   reason="the Triton kernels need a GPU or TRITON_INTERPRET=1")


def _aten(problems, **kw):
    return {p.key: "aten" for p in problems}


def _triton(problems, **kw):
    return {p.key: TRITON for p in problems}


def _transposed_weights():
    """A Conv1D and a Linear whose weights are transposed views (a converted or tied checkpoint):
    each runs its B in the layout its kind does not usually have."""
    Conv1D = pytest.importorskip("transformers.pytorch_utils").Conv1D
    torch.manual_seed(0)
    model = torch.nn.Sequential(Conv1D(24, 16), torch.nn.ReLU(), torch.nn.Linear(24, 8))
    model[0].weight = torch.nn.Parameter(torch.randn(24, 16).t())
    model[2].weight = torch.nn.Parameter(torch.randn(24, 8).t())
    return model


def test_tune_model_counts_layers_whose_weights_are_transposed_views():
    """Their captured B layout matched no layer key: tune_model raised "no patchable GEMM ran in the
    example passes" (and in a model with other layers, left them unpatched as never run)."""
    model = _transposed_weights()
    ds = gemmtune.tune_model(model, [(torch.randn(4, 16),), (torch.randn(2, 3, 16),)], tune_fn=_aten)
    assert set(ds) == layer_keys(model) == {(24, 16, "float32", "row"), (8, 24, "float32", "col")}
    assert all(sorted(h.sizes[0] for h in d.hint_choices) == [4, 6] for d in ds.values())


@needs_kernels
def test_patch_with_example_inputs_converts_layers_with_transposed_weights():
    model = _transposed_weights()
    ref = copy.deepcopy(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "did not run in the example passes"
        gemmtune.patch(model, example_inputs=[(torch.randn(4, 16),)], tune_fn=_triton, eager_policy="tuned",
                       progress=False)
    assert type(model[0]).__name__ == "GemmtuneConv1D" and type(model[2]) is gemmtune.nn.Linear
    x = torch.randn(2, 4, 16)
    torch.testing.assert_close(model(x), ref(x))


def test_a_linear_whose_weight_was_replaced_is_keyed_by_its_weight():
    """A pruned head (weight assigned, out_features left stale) was keyed by out_features: its
    captured GEMMs matched no key, and patch(example_inputs=...) left it as "did not run"."""
    model = torch.nn.Sequential(torch.nn.Linear(16, 24), torch.nn.Linear(24, 8))
    model[1].weight = torch.nn.Parameter(torch.randn(5, 24))
    model[1].bias = torch.nn.Parameter(torch.randn(5))
    assert layer_keys(model) == {(24, 16, "float32", "col"), (5, 24, "float32", "col")}
    ds = gemmtune.tune_model(model, [(torch.randn(4, 16),)], tune_fn=_aten)
    assert set(ds) == layer_keys(model)


@pytest.mark.parametrize("layout", ["sparse_coo", "sparse_csr"])
def test_capture_of_a_sparse_product_is_recorded_as_not_tuned(tmp_path, layout):
    """A graph network's ``adj @ x``: with a CSR adjacency the capture raised "Sparse CSR tensors
    do not have strides"; a COO one was recorded as a dense 'strided' mm, written to the suite."""
    class GCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 4)

        def forward(self, adj, x):
            return adj @ self.lin(x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch: CSR support is in beta)
        adj = torch.eye(5).to_sparse() if layout == "sparse_coo" else torch.eye(5).to_sparse_csr()
        cap = gemmtune.capture(GCN(), adj, torch.randn(5, 8))
    sparse = [r for r in cap.records if r.layout_a == layout]
    assert len(sparse) == 1 and not sparse[0].tunable and sparse[0].op == "mm"
    assert [p.op for p in cap.problems()] == ["addmm"]  # the layer's, dense
    assert f"not tuned yet: 1 (mm/float32/{layout})" in cap.summary()
    rows = cap.write_suite(tmp_path / "s.csv").read_text().splitlines()
    assert len(rows) == 2 and layout not in rows[1]


# ---------------------------------------------------------------------------- gemmtune capture
FACTORY = '''
import torch

class Kw(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, x=None):
        return self.lin(x)

def kwargs_one():
    return Kw(), dict(x=torch.randn(3, 8))

def kwargs_passes():
    return Kw(), [dict(x=torch.randn(3, 8)), dict(x=torch.randn(5, 8))]

def tensor_passes():
    return torch.nn.Linear(8, 4), [torch.randn(3, 8), torch.randn(5, 8)]

def raises():
    raise RuntimeError("no checkpoint here")

class Bad(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.lin(x.view(3, 5))

def bad_forward():
    return Bad(), torch.randn(2, 8)
'''


@pytest.fixture
def factory(tmp_path, monkeypatch):
    (tmp_path / "gt_s55_factory.py").write_text(FACTORY)
    (tmp_path / "gt_s55_broken.py").write_text("raise RuntimeError('broken at import')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("fn, ms", [("kwargs_one", [3]), ("kwargs_passes", [3, 5]), ("tensor_passes", [3, 5])])
def test_cli_capture_takes_the_input_forms_capture_takes(factory, capsys, fn, ms):
    """A dict of keyword arguments (an HF model's input_ids=), and a list of tensors or dicts, were
    refused ("example_inputs must be a tensor, a tuple of arguments or a list of such tuples")
    although gemmtune.capture takes them."""
    from gemmtune.cli import main
    from gemmtune.shapes import load_csv

    rc = main(["capture", "--model", f"gt_s55_factory:{fn}", "--device", "cpu", "--out", "s.csv", "-q"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert sorted(s.problem.m for s in load_csv(factory / "s.csv")) == ms


@pytest.mark.parametrize("spec, says", [
    ("gt_s55_factory:raises", "gt_s55_factory:raises: the function raised (RuntimeError: no checkpoint here, "
                              "raised at "),
    ("gt_s55_factory:bad_forward", "its forward failed during the capture (RuntimeError: shape '[3, 5]' is invalid"),
    ("gt_s55_broken:build", "importing gt_s55_broken raised (RuntimeError: broken at import, raised at "),
])
def test_cli_capture_a_failing_user_function_or_forward_is_one_line(factory, capsys, spec, says):
    """The user's function, module or forward raising was a traceback through gemmtune (a
    ValueError from the forward printed only its message, as if gemmtune had refused an option).
    Now one line naming the exception and the user's line, exit status 2, as for a config: model."""
    from gemmtune.cli import main

    rc = main(["capture", "--model", spec, "--device", "cpu", "--out", "s.csv", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("gemmtune capture: error: --model "), err
    assert says in err, err
    assert "gt_s55_" in err.rsplit("raised at ", 1)[1]  # the user's own file is named
    assert not (factory / "s.csv").exists()
