"""triton_static: triton_mm's kernel with its sizes and strides compiled in (kernels.triton_static).

Against fp64 on fresh random operands in the interpreter (fp16/fp32) or on a GPU: odd and
prime sizes, M = 1, ragged K, transposed and offset operands; the space serves only unaligned
problems and says why otherwise; ids and export as triton_mm's; features triton_mm's but for
its family column; the tuner's model selection with and without a model that knows it."""

from __future__ import annotations

import pytest
import torch

import gemmtune
from gemmtune import kernels
from gemmtune.configs import Choice, TileConfig
from gemmtune.device import DeviceInfo
from gemmtune.kernels import triton_static
from gemmtune.problem import Problem
from gemmtune.verify import compare

H100 = DeviceInfo.lookup("h100")
CFGS = [TileConfig(16, 16, 16, 1, 2, 1), TileConfig(32, 64, 32, 2, 4, 8)]
TOL = {torch.float16: 1e-3, torch.float32: 1e-5}


def _check(a, b, cfg):
    out = torch.full((a.shape[0], b.shape[1]), float("nan"), dtype=a.dtype, device=a.device)
    kernels.get("triton_static").run(a, b, out, cfg)
    res = compare(out, torch.mm(a.double(), b.double()), TOL[a.dtype])
    assert res.ok, res.reason


@pytest.mark.parametrize("cfg", CFGS, ids=lambda c: c.id)
@pytest.mark.parametrize("shape", [(1, 1, 1), (17, 31, 257), (1, 127, 509), (45, 19, 40)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("layouts", [("row", "row"), ("col", "col"), ("offset", "offset"), ("row", "col")],
                         ids=lambda ls: "-".join(ls))
def test_matches_fp64(cfg, shape, layouts, operand):
    m, n, k = shape
    dtype = torch.float16 if (m + n + k) % 2 else torch.float32
    _check(operand(m, k, layouts[0], dtype), operand(k, n, layouts[1], dtype), cfg)


def test_same_bits_as_triton_mm(operand):
    """One kernel body: with its sizes compiled in it sums in the same order as triton_mm."""
    a, b = operand(33, 70, "row", torch.float32), operand(70, 29, "col", torch.float32)
    cfg = CFGS[1]
    outs = []
    for fam in ("triton_mm", "triton_static"):
        out = torch.empty(33, 29, device=a.device)
        kernels.get(fam).run(a, b, out, cfg)
        outs.append(out)
    assert torch.equal(*outs)


def test_space_only_for_unaligned_problems():
    aligned = Problem.from_sizes(64, 64, 64, "fp16")
    kept, rejected = triton_static.space(aligned, H100)
    assert kept == [] and rejected and all(r == triton_static.ALIGNED_REASON for _, r in rejected[-3:])
    odd = Problem.from_sizes(333, 4097, 1025, "bf16")
    kept, _ = triton_static.space(odd, H100)
    mm_kept, _ = kernels.get("triton_mm").space(odd, H100)
    assert [c.tile for c in kept] == mm_kept and kept and {c.form for c in kept} == {"carried"}
    assert [c.id for c in gemmtune.space(odd, "triton_static", device="h100")][:1] == \
        [f"triton_static:{mm_kept[0].id}"]
    # a padded problem is aligned: no pad+triton_static choices
    assert not any(c.pad for c in gemmtune.space(odd, "triton_static", device="h100"))


@pytest.mark.parametrize("op,kw", [("bmm", {"batch": 4}), ("scaled_mm", {"scale": "tensor"})])
def test_refuses_other_ops_with_the_reason(op, kw):
    if op == "scaled_mm":
        p = Problem.from_sizes(17, 4096, 4096, "e4m3", "bf16", layout_b="col", op=op, **kw)
    else:
        p = Problem.from_sizes(17, 33, 65, "fp16", op=op, **kw)
    kept, rejected = triton_static.space(p, H100)
    assert kept == [] and op in rejected[-1][1]
    with pytest.raises(ValueError, match=op):
        triton_static.validate(p, CFGS[0])


def test_choice_id_round_trip_and_export():
    c = Choice.parse("triton_static:BM64-BN128-BK64-S4-W4-G8")
    assert c.family == "triton_static" and c.config.tile == TileConfig(64, 128, 64, 4, 4, 8)
    assert c.config.form == "carried" and c == Choice("triton_static", TileConfig(64, 128, 64, 4, 4, 8))
    assert Choice.parse(c.id) == c
    p = Problem.from_sizes(300, 20001, 512, "fp16")
    mm = Choice("triton_mm", c.config.tile)
    assert triton_static.inductor_export(c, p) == kernels.get("triton_mm").inductor_export(mm, p)
    with pytest.raises(ValueError, match="triton_static:BM"):
        Choice.parse("triton_static:BM64")


def test_features_are_triton_mms_but_for_the_family():
    from gemmtune.model.choices import FAMILY_CODES, batch
    from gemmtune.model.features import FEATURE_NAMES, featurize

    p = Problem.from_sizes(300, 20001, 512, "fp16")
    cfg = TileConfig(64, 128, 64, 4, 4, 8)
    cb = batch(p, [Choice("triton_static", cfg), Choice("triton_mm", cfg)])
    cols = {f: getattr(cb, f) for f in cb.__dataclass_fields__ if f != "fam"}
    assert len(cb) == 2 and all((v[0] == v[1]).all() for v in cols.values())
    assert cb.fam.tolist() == [FAMILY_CODES["triton_static"], FAMILY_CODES["triton_mm"]]
    X = featurize(p, [Choice("triton_static", cfg), Choice("triton_mm", cfg)], H100)
    differ = [FEATURE_NAMES[i] for i in range(X.shape[1]) if X[0, i] != X[1, i]]
    assert differ == ["fam_triton_mm", "fam_triton_static"]  # same tile, same analytic estimate


def test_matmul_with_a_static_choice(operand):
    a, b = operand(19, 41, "offset", torch.float16), operand(41, 23, "row", torch.float16)
    out = gemmtune.matmul(a, b, choice="triton_static:BM16-BN16-BK16-S1-W2-G1")
    assert compare(out, a.double() @ b.double(), TOL[torch.float16]).ok


def test_dispatcher_serves_a_static_hint_only_at_its_own_shape():
    """On another M a triton_static hint would compile a new kernel at the first call: the
    dispatcher passes over it there (the triton_mm hint still serves)."""
    from gemmtune.dispatch import Dispatcher, HintChoice

    st = Choice.parse("triton_static:BM16-BN16-BK16-S1-W2-G1")
    mm = Choice.parse("triton_mm:BM32-BN64-BK32-S2-W4-G8")
    d = Dispatcher(dims={"m": None, "n": 21, "k": 37}, dtype="fp16", hints={"m": [8, 64]},
                   hint_choices=[HintChoice((8, 21, 37), st), HintChoice((64, 21, 37), mm)])
    assert [h.choice for h in d._ranked(8, 21, 37)] == [st, mm]
    assert [h.choice for h in d._ranked(9, 21, 37)] == [mm]


def test_model_selection_times_a_picked_tile_with_its_static_twin():
    """The models see triton_static as triton_mm (one estimate for both): the k picks are made
    among the others, and each picked triton_mm config brings its triton_static twin."""
    from gemmtune.tuning.plan import candidates, select_by_model

    class ByIndex:
        def predict(self, problem, choices):
            assert not any(c.family == "triton_static" for c in choices)  # twins are not ranked
            return list(range(len(choices)))

    p = Problem.from_sizes(33, 97, 41, "fp16")  # unaligned: triton_static serves it
    cands = [c for c in candidates(p, ["triton_mm", "triton_static"], "default", H100) if not c.pad]
    assert any(c.family == "triton_static" for c in cands)
    picked = select_by_model(p, cands, 1, ByIndex())
    first = next(c for c in cands if c.family == "triton_mm")
    # ... and the first tile pick's other triton_static forms (plan.static_forms): N = 97 is odd
    # along a row-major B, so indexed_wrap differs from indexed where N >= BLOCK_N
    forms = ["-IX"] + (["-IXW"] if first.config.block_n <= 97 else [])
    assert [c.id for c in picked] == ["aten", first.id, f"triton_static:{first.config.id}",
                                      *(f"triton_static:{first.config.id}{f}" for f in forms)]
    aligned = Problem.from_sizes(64, 64, 64, "fp16")
    picked = select_by_model(aligned, candidates(aligned, ["triton_mm", "triton_static"], "default", H100),
                             1, ByIndex())
    assert [c.family for c in picked] == ["aten", "triton_mm"]


class _Prefers:
    """A regressor stand-in: ln-ms correction -1 for one family column, 0 elsewhere."""
    outputs = "ms"

    def __init__(self, column):
        from gemmtune.model.features import FEATURE_NAMES

        self.col = FEATURE_NAMES.index(column)

    def predict(self, X):
        return -1.0 * X[:, self.col]


def _learned(family_rows, prefer="fam_triton_static"):
    """A LearnedModel trusted on 33x97x41 fp16 (its whole training domain) with these family rows."""
    from gemmtune.model import LearnedModel
    from gemmtune.model.data import ShapeData, Dataset, domain_of

    dom = domain_of(Dataset([ShapeData(Problem.from_sizes(33, 97, 41, "fp16"), [], None)]))
    dom["family_rows"] = family_rows
    return LearnedModel(H100, "gbt", _Prefers(prefer), {"domain": dom})


def test_a_model_without_static_rows_scores_static_as_triton_mm_and_keeps_the_twins():
    from gemmtune.tuning.plan import candidates, select_adaptive, select_by_model

    model = _learned({"aten": 10, "triton_mm": 100, "splitk": 10})  # e.g. trained before triton_static
    assert not model.knows("triton_static") and model.knows("triton_mm")
    p = Problem.from_sizes(33, 97, 41, "fp16")
    cfg = TileConfig(32, 32, 32, 2, 4, 8)
    ms = model.predict(p, [Choice("triton_static", cfg), Choice("triton_mm", cfg)])
    assert ms[0] == ms[1]  # its fam_triton_static column is never read as such: scored as triton_mm
    cands = candidates(p, ["triton_mm", "triton_static"], "default", H100)
    picked = select_by_model(p, cands, 2, model)
    mm = [c for c in picked if c.family == "triton_mm"]
    carried = [c for c in picked if c.family == "triton_static" and c.config.form == "carried"]
    assert len(mm) == 2 and [c.id for c in carried] == [f"triton_static:{c.config.id}" for c in mm]
    # the other forms of the first tile pick only
    assert {c.config.tile for c in picked if c.family == "triton_static" and c.config.form != "carried"} == \
        {mm[0].config}
    picked, k, _ = select_adaptive(p, cands, model)
    assert sum(c.family == "triton_static" and c.config.form == "carried" for c in picked) == \
        sum(c.family == "triton_mm" and not c.pad for c in picked)


def test_a_model_trained_on_static_rows_ranks_them_and_each_pick_brings_its_twin():
    """Once the model has triton_static timings, static candidates compete for the k slots like
    any other; a pick of either family still brings its twin of the other (the collected pairs
    have no reliably faster twin: plan._split_twins)."""
    from gemmtune.tuning.plan import candidates, select_by_model

    model = _learned({"aten": 10, "triton_mm": 100, "triton_static": 20})
    assert model.knows("triton_static")
    p = Problem.from_sizes(33, 97, 41, "fp16")
    cfg = TileConfig(32, 32, 32, 2, 4, 8)
    ms = model.predict(p, [Choice("triton_static", cfg), Choice("triton_mm", cfg)])
    assert ms[0] < ms[1]
    cands = [c for c in candidates(p, ["triton_mm", "triton_static"], "default", H100) if not c.pad]
    picked = [c for c in select_by_model(p, cands, 1, model) if getattr(c.config, "form", "") != "indexed"
              and getattr(c.config, "form", "") != "indexed_wrap"]
    assert [c.family for c in picked] == ["aten", "triton_static", "triton_mm"]  # k = 1, and its twin
    assert picked[1].config.tile == picked[2].config
    # a model that prefers triton_mm picks it first, its static twin beside it
    picked = select_by_model(p, cands, 1, _learned({"triton_mm": 100, "triton_static": 20}, "fam_triton_mm"))
    assert [c.family for c in picked][:3] == ["aten", "triton_mm", "triton_static"]
    assert picked[1].config == picked[2].config.tile
    # k = 2 where both twins rank in the top 2: each appears once
    both = [c for c in cands if c.config in (picked[1].config, picked[2].config)
            and c.family in ("triton_mm", "triton_static") and not c.pad]

    class TwinsFirst:
        def knows(self, family):
            return True

        def predict(self, problem, choices):
            return [0.0 if c in both else 1.0 for c in choices]
    picked = [c for c in select_by_model(p, cands, 2, TwinsFirst())
              if getattr(c.config, "form", "carried") == "carried"]
    assert sorted(c.id for c in picked[1:]) == sorted(c.id for c in both) and len(picked) == 3


def test_picks_on_an_unaligned_problem_span_both_paths():
    """tuning.plan._both_paths: when the model's k picks on an unaligned problem are all copy-free
    (or all pad+), the other path's best-ranked choice is timed too; an aligned problem, or picks
    that already span both, get nothing more."""
    from gemmtune.tuning.plan import candidates, select_by_model

    class Prefer:
        def __init__(self, pad):
            self.pad = pad

        def predict(self, problem, choices):
            return [0.0 if c.pad == self.pad else 1.0 for c in choices]

    p = Problem.from_sizes(33, 97, 41, "fp16")
    cands = candidates(p, ["triton_mm"], "default", H100)
    copy_free = select_by_model(p, cands, 1, Prefer(False))
    assert [c.pad for c in copy_free] == [False, False, True]  # aten, the pick, the pad+ path's first
    first_pad = next(c for c in cands[1:] if c.pad)
    assert copy_free[2] == first_pad
    padded = select_by_model(p, cands, 1, Prefer(True))
    assert [c.pad for c in padded] == [False, True, False] and padded[2] == next(c for c in cands[1:] if not c.pad)
    aligned = Problem.from_sizes(64, 64, 64, "fp16")
    assert len(select_by_model(aligned, candidates(aligned, ["triton_mm"], "default", H100), 1, Prefer(False))) == 2
