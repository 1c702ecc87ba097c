"""Found by session 45's CPU hunt over HF architectures the zoo tests do not cover (tiny random
weights, fp32, the Triton interpreter); the test failed before Capture.hints counted only the
GEMMs that a layer ran."""

from __future__ import annotations

import warnings

import pytest
import torch

tf = pytest.importorskip("transformers")

import gemmtune  # noqa: E402

TRITON = "triton_mm:BM16-BN64-BK64-S1-W4-G8"


def tiny_wavlm():
    kw = dict(hidden_size=64, num_hidden_layers=1, num_attention_heads=4, intermediate_size=128, conv_dim=[16, 16],
              conv_stride=[5, 4], conv_kernel=[10, 8], num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
              num_buckets=16, max_bucket_distance=32)
    try:
        cfg = tf.AutoConfig.for_model("wavlm", **kw)
    except ValueError as e:
        pytest.skip(f"transformers {tf.__version__} has no 'wavlm': {e}")
    torch.manual_seed(0)
    return tf.AutoModel.from_config(cfg, dtype=torch.float32).eval()


def test_wavlm_attention_projections_that_never_run_are_left_and_named():
    """WavLM's attention multiplies q_proj / k_proj / v_proj / out_proj's weights directly
    (F.multi_head_attention_forward with their .weight): those layers' forwards never run. patch's
    docstring: a layer whose forward none of the passes ran is left as it is, named in a warning.
    Got: all four converted (their (64, 64) shape got hints from the attention module's own GEMMs,
    which capture.hints() counts as any layer's), and no warning names them; the converted layers
    never run a kernel."""
    model = tiny_wavlm()
    x = dict(input_values=torch.randn(2, 800))
    projections = [n for n, m in model.named_modules() if n.split(".")[-1] in ("q_proj", "k_proj", "v_proj", "out_proj")]
    assert len(projections) == 4
    ran = set()
    hooks = [m.register_forward_pre_hook(lambda mod, a, n=n: ran.add(n)) for n, m in model.named_modules()
             if n in projections]
    with torch.no_grad():
        model(**x)
    for h in hooks:
        h.remove()
    assert not ran  # the premise: their forwards never run
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gemmtune.patch(model, example_inputs=[x], tune_fn=lambda ps, **kw: {p.key: TRITON for p in ps})
    said = " ".join(str(w.message) for w in caught)
    converted = [n for n in projections if hasattr(model.get_submodule(n), "_gemmtune_handle")]
    assert not converted, f"converted although their forward never ran: {converted}"
    assert all(n in said for n in projections), said
