"""The pad+ weight cache after an optimizer step: a fused optimizer step writes the
parameters without bumping their version counters, so the pad+ weight cache (kernels.padcache),
keyed on the version, served the weights of before the step."""
import gc

import pytest
import torch

import gemmtune
from gemmtune import kernels
from gemmtune.configs import Choice
from gemmtune.kernels import padcache

DEV = "cuda" if torch.cuda.is_available() and not kernels.tiled._INTERPRETED else "cpu"
PAD_MM = Choice.parse("pad+triton_mm:BM16-BN16-BK16-S1-W2-G1")


@pytest.fixture(autouse=True)
def fresh_cache():
    if DEV == "cpu" and not kernels.tiled._INTERPRETED:
        pytest.skip("the Triton kernels need a GPU or TRITON_INTERPRET=1")
    padcache.WEIGHTS.clear()
    yield
    padcache.WEIGHTS.clear()


def _fused(opt_cls, params, **kw):
    try:
        return opt_cls(params, fused=True, **kw)
    except (RuntimeError, ValueError) as e:  # a torch without the fused kernel on this device
        pytest.skip(f"{opt_cls.__name__}(fused=True) not available here: {e}")


@pytest.mark.parametrize("opt_cls", [torch.optim.AdamW, torch.optim.SGD])
def test_fused_optimizer_step_is_seen_by_the_padded_weight_cache(opt_cls):
    """Eval (no_grad) caches W's padded copy; a fused optimizer step (torch._fused_adamw_ /
    _fused_sgd_) writes W but leaves W._version as it was; the next eval must use the new W."""
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(17, 31, device=DEV))  # odd N and K: pad+ pads both
    x = torch.randn(4, 31, device=DEV)

    def run():
        out = torch.empty(4, 17, device=DEV)
        kernels.run_choice(PAD_MM, x, w.t(), out)
        return out

    with torch.no_grad():
        run()  # caches pad(W.t())
    assert len(padcache.WEIGHTS) == 1
    opt = _fused(opt_cls, [w], lr=0.5)
    w.grad = torch.randn_like(w)
    version = w._version
    opt.step()
    with torch.no_grad():
        got = run()
    want = x.double() @ w.t().double()
    assert torch.allclose(got.double(), want, atol=1e-3), (
        f"stale padded weight after a fused {opt_cls.__name__} step (W._version {version} -> {w._version}): "
        f"max err {(got.double() - want).abs().max().item():.3g}")


def test_patched_linear_eval_after_fused_adamw_training_step():
    """The same through a patched Linear on a dispatcher whose choice is pad+: train one step
    with AdamW(fused=True), evaluate under no_grad; the output must be F.linear's."""
    torch.manual_seed(1)
    lin = torch.nn.Linear(31, 17, device=DEV)
    d = gemmtune.compile_mm(n=17, k=31, dtype="float32", layout_b="col", hints={"m": [4]},
                            tune_fn=lambda ps, **kw: {p.key: PAD_MM.id for p in ps}, progress=False)
    gemmtune.nn.Linear.from_linear(lin, d)
    x = torch.randn(4, 31, device=DEV)
    with torch.no_grad():
        lin(x)  # eval: the padded copy of W is cached
    opt = _fused(torch.optim.AdamW, lin.parameters(), lr=0.5)
    lin(x).square().sum().backward()  # training: grad mode, W requires grad, nothing cached
    opt.step()
    with torch.no_grad():
        got = lin(x)
        want = torch.nn.functional.linear(x, lin.weight, lin.bias)
    assert torch.allclose(got, want, atol=1e-3), f"max err {(got - want).abs().max().item():.3g}"


def test_the_step_hook_drops_only_the_stepped_optimizers_parameters():
    """Frozen weights (not in the optimizer: a LoRA base, an embedding) keep their cached copy
    across training steps."""
    frozen = torch.nn.Parameter(torch.randn(17, 31, device=DEV), requires_grad=False)
    trained = torch.nn.Parameter(torch.randn(17, 31, device=DEV))
    with torch.no_grad():
        keep = padcache.WEIGHTS.get(frozen.t(), 32, 32)
        padcache.WEIGHTS.get(trained.t(), 32, 32)
    assert len(padcache.WEIGHTS) == 2
    opt = _fused(torch.optim.SGD, [trained], lr=0.1)
    trained.grad = torch.ones_like(trained)
    opt.step()
    assert len(padcache.WEIGHTS) == 1
    with torch.no_grad():
        assert padcache.WEIGHTS.get(frozen.t(), 32, 32) is keep
    del opt, trained
    gc.collect()
