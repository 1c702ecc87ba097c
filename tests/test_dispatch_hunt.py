"""Dispatch hunt: the dispatcher, lookup tables and the Inductor export, on paths earlier hunts did
not walk. Each test failed before its fix (or is an xfail(strict) naming a defect left open).

CPU only: Triton kernels in the interpreter (conftest sets TRITON_INTERPRET=1), fp16/fp32."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import gemmtune.inductor_export as ie
from gemmtune.configs import Choice
from gemmtune.problem import Problem
from gemmtune.provenance import Provenance
from gemmtune.table import LookupTable, TableChoice

sys.path.insert(0, str(Path(__file__).parent))
from conftest import cpu_lookup_choices  # noqa: E402

NEEDS_INDUCTOR_LUT = pytest.mark.skipif(ie.unavailable_reason() is not None,
                                        reason=f"this torch cannot take a lookup table: {ie.unavailable_reason()}")


def _table(*problems: Problem) -> LookupTable:
    return LookupTable(Provenance.current("tuned").to_dict(),
                       {p.key: [TableChoice(Choice.parse("aten"))] for p in problems})


@NEEDS_INDUCTOR_LUT
def test_inductor_finds_the_export_of_a_product_with_a_size_1_dim(tmp_path):
    """A size-1 dim's stride is never read, so gemmtune gives (K, 1) and (1, K).t() one layout and
    one key, while Inductor's key holds the strides as they are. The export wrote only the
    contiguous tensor's: ``x @ W.T`` of an ``nn.Linear(K, 1)`` (a value head, B strides [1, K])
    and an M = 1 row taken from a column were never found."""
    from torch._inductor import config as icfg

    torch.manual_seed(0)
    calls = {
        "value head x @ W.T, N = 1": (torch.randn(8, 64), torch.randn(1, 64).t()),
        "M = 1 row of a column": (torch.randn(64, 1).t(), torch.randn(64, 24)),
    }
    problems = {name: Problem.from_tensors(a, b) for name, (a, b) in calls.items()}
    path = ie.export(_table(*problems.values()).save(tmp_path / "t.json"), tmp_path / "i.json")
    seen = {"keys": [], "lookups": []}
    old = icfg.force_disable_caches
    missed = {}
    try:
        ie.install(tmp_path / "i.json", choices=cpu_lookup_choices(seen, [ie.ATEN_MM]))
        icfg.force_disable_caches = True
        for name, (a, b) in calls.items():
            seen["keys"].clear()
            torch._dynamo.reset()
            got = torch.compile(lambda x, y: x @ y)(a, b)
            torch.testing.assert_close(got.double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)
            asked = [k for k in seen["keys"] if not k.startswith("cpu-test+")]
            assert asked, name
            if not set(asked) & set(path.table):
                missed[name] = (problems[name].key, asked)
    finally:
        ie.uninstall()
        icfg.force_disable_caches = old
        torch._dynamo.reset()
    assert not missed
    # The contiguous tensors' keys stay the first (inductor_key), as before.
    p = Problem.from_sizes(8, 1, 64, "fp32")
    assert ie.inductor_key(p) == "((torch.float32, [8, 64], [64, 1]), (torch.float32, [64, 1], [1, 1]))+mm"
    assert ie.inductor_keys(p)[1:] == ["((torch.float32, [8, 64], [64, 1]), (torch.float32, [64, 1], [1, 64]))+mm"]
    assert len(ie.inductor_keys(Problem.from_sizes(8, 24, 64, "fp32"))) == 1


# ----------------------------------------------------------------------------- saved dispatchers
TILE = "triton_mm:BM16-BN32-BK16-S1-W2-G8"


def _saved(tmp_path) -> tuple[Path, dict]:
    """A dispatcher (N=24, K=40, fp32, one Triton hint kernel) with one verified decision, saved."""
    import json

    import gemmtune

    mm = gemmtune.compile_mm(n=24, k=40, dtype="fp32", hints={"m": [16]},
                             tune_fn=lambda ps, **kw: {p.key: TILE for p in ps})
    a, b = torch.randn(20, 40), torch.randn(40, 24)
    torch.testing.assert_close(mm(a, b).double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)
    assert mm.decision(m=20).verified and mm.decision(m=20).choice.id == TILE
    path = mm.save(tmp_path / "mm.json")
    return path, json.loads(path.read_text())


@pytest.mark.parametrize("field, value, needle", [
    ("verified", "false", "verified"),   # bool("false") is True: the decision was taken as verified
    ("verified", 0.5, "verified"),
    ("source", "empty", "empty"),        # an 'empty' decision is never verified, whatever its choice
    ("source", "bogus", "source"),
])
def test_an_edited_decision_that_would_skip_verification_is_refused_by_name(tmp_path, field, value, needle):
    """``load`` read a decision's ``verified`` with ``bool()`` and its ``source`` unchecked: a hand edit
    to ``"verified": "false"`` (meaning: check it again) loaded as verified, and ``"source": "empty"``
    at a non-empty size made the first call skip verification for good (``_first_sight`` never
    re-verifies an empty product's decision), so its Triton kernel then ran unchecked."""
    import json

    from gemmtune.dispatch import load

    path, doc = _saved(tmp_path)
    (dec,) = [d for d in doc["decisions"] if d["sizes"]["m"] == 20]
    dec[field] = value
    if field == "source":
        dec["verified"] = False
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=needle) as info:
        load(path)
    assert str(path) in str(info.value)


def test_a_saved_decision_marked_unverified_is_verified_again_on_load(tmp_path):
    """The honest edit, JSON false, is still taken: the decision is checked at its first call."""
    import json

    from gemmtune.dispatch import load

    path, doc = _saved(tmp_path)
    for d in doc["decisions"]:
        d["verified"] = False
    path.write_text(json.dumps(doc))
    mm = load(path)
    assert not mm.decision(m=20).verified
    a, b = torch.randn(20, 40), torch.randn(40, 24)
    torch.testing.assert_close(mm(a, b).double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)
    assert mm.decision(m=20).verified and mm.decision(m=20).choice.id == TILE
