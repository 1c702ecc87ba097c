"""Two save_patched artifacts under one name stem (``m.json`` and ``m``) shared the layer folder
``m.d/``: the second save replaced the first's layer files, and ``load_patched(model, "m.json")``
then served the other artifact's kernels (session 45's CPU hunt; the test failed before). The
second save is refused now (an index renamed by hand still loads: its files are named inside it)."""

from __future__ import annotations

import torch

import gemmtune


# ------------------------------------------------------------------ save_patched
def _model():
    return torch.nn.Sequential(torch.nn.Linear(32, 48), torch.nn.ReLU(), torch.nn.Linear(48, 16))


def test_an_artifact_saved_under_the_same_stem_does_not_take_over_anothers_layers(tmp_path):
    """``save_patched("m.json", A)`` then ``save_patched("m", B)`` (or "m.txt"): both keep their
    layers in ``m.d/``, so the second replaced the first's layer files, and ``load_patched(model,
    "m.json")`` then served B's kernels without a word (same shapes, so every check passed)."""
    aten = gemmtune.tune_model(_model(), [(torch.randn(4, 32),)],
                               tune_fn=lambda ps, **kw: {p.key: "aten" for p in ps})
    tile = gemmtune.tune_model(_model(), [(torch.randn(4, 32),)],
                               tune_fn=lambda ps, **kw: {p.key: "triton_mm:BM16-BN16-BK16-S1-W2-G8" for p in ps})
    first = gemmtune.save_patched(tmp_path / "m.json", aten, binaries=False)
    try:
        gemmtune.save_patched(tmp_path / "m", tile, binaries=False)
    except ValueError:
        pass  # refusing to take over m.json's layer folder would do
    model = gemmtune.load_patched(_model(), first)
    served = {h.choice.id for d in gemmtune.nn.dispatchers(model).values() for h in d.hint_choices}
    assert served == {"aten"}, f"{first} now serves {served}, another artifact's kernels"

