"""pad+ choices pad a weight once per parameter version (kernels.padcache), and never serve a
stale copy: after an in-place update, inside autograd, or for a plain tensor."""
import gc
import threading

import pytest
import torch

import gemmtune
from gemmtune import kernels
from gemmtune.configs import Choice
from gemmtune.kernels import padcache

pytestmark = pytest.mark.usefixtures("fresh_cache")
# A GPU where there is one (real kernels), else the Triton interpreter on the CPU.
DEV = "cuda" if torch.cuda.is_available() and not kernels.tiled._INTERPRETED else "cpu"


@pytest.fixture
def fresh_cache():
    if DEV == "cpu" and not kernels.tiled._INTERPRETED:
        pytest.skip("the Triton kernels need a GPU or TRITON_INTERPRET=1")
    padcache.WEIGHTS.clear()
    yield
    padcache.WEIGHTS.clear()


PAD_MM = Choice.parse("pad+triton_mm:BM16-BN16-BK16-S1-W2-G1")


def _run(x, b):
    out = torch.empty(x.shape[0], b.shape[1], dtype=x.dtype, device=x.device)
    kernels.run_choice(PAD_MM, x, b, out)
    return out


def _check(out, x, b):
    ref = x.double() @ b.double()
    assert torch.allclose(out.double(), ref, rtol=1e-2, atol=1e-2 * ref.abs().max().item())


@pytest.mark.parametrize("n,k", [(13, 37), (17, 16), (16, 9)])  # odd N, odd K, both
def test_parameter_view_is_padded_once_and_follows_updates(n, k):
    torch.manual_seed(n * k)
    w = torch.nn.Parameter(torch.randn(n, k, dtype=torch.float16, device=DEV))  # Linear weight (out, in)
    x = torch.randn(7, k, dtype=torch.float16, device=DEV)
    with torch.no_grad():
        _check(_run(x, w.t()), x, w.t())
        assert len(padcache.WEIGHTS) == 1
        cached = padcache.WEIGHTS.get(w.t(), *kernels.padded_sizes(7, n, k, 2)[1:])
        _check(_run(x, w.t()), x, w.t())
        assert padcache.WEIGHTS.get(w.t(), *kernels.padded_sizes(7, n, k, 2)[1:]) is cached  # reused
        w.mul_(-0.5)  # an optimizer step: the version changes, the copy must too
        _check(_run(x, w.t()), x, w.t())
        assert padcache.WEIGHTS.get(w.t(), *kernels.padded_sizes(7, n, k, 2)[1:]) is not cached


def test_plain_tensor_is_not_cached():
    torch.manual_seed(1)
    b = torch.randn(37, 13, dtype=torch.float16, device=DEV)
    x = torch.randn(5, 37, dtype=torch.float16, device=DEV)
    _check(_run(x, b), x, b)
    assert len(padcache.WEIGHTS) == 0


def test_autograd_is_not_cached_and_freed_parameters_leave():
    w = torch.nn.Parameter(torch.randn(13, 37, dtype=torch.float16, device=DEV))
    assert padcache.WEIGHTS.get(w.t(), 16, 40) is None  # grad enabled, requires grad
    with torch.no_grad():
        assert padcache.WEIGHTS.get(w.t(), 16, 40) is not None
    assert len(padcache.WEIGHTS) == 1
    del w
    gc.collect()
    assert len(padcache.WEIGHTS) == 0


def test_padded_copy_is_zero_outside_the_weight():
    w = torch.nn.Parameter(torch.randn(13, 37, device=DEV))
    with torch.no_grad():
        p = padcache.WEIGHTS.get(w.t(), 16, 40)
    assert p.shape == (40, 16) and p.is_contiguous()
    assert torch.equal(p[:37, :13], w.t()) and not p[37:].any() and not p[:, 13:].any()


@pytest.mark.parametrize("split_bytes", [0, 1 << 40])  # margins-only path, and F.pad
@pytest.mark.parametrize("transposed", [False, True])
def test_zero_pad_matches_f_pad(monkeypatch, split_bytes, transposed):
    from gemmtune.kernels import pad

    monkeypatch.setattr(pad, "PAD_SPLIT_BYTES", split_bytes)
    t = torch.randn(13, 7) if not transposed else torch.randn(7, 13).t()
    got = pad.zero_pad(t, 16, 8)
    assert got.is_contiguous() and got.shape == (16, 8)
    assert torch.equal(got, torch.nn.functional.pad(t, (0, 1, 0, 3)))
    assert torch.equal(pad.zero_pad(t, 13, 7), t)  # nothing to pad: a plain copy
    # margins are zero even where new_empty handed back garbage
    assert not got[13:].any() and not got[:, 7:].any()


def test_zero_pad_keeps_autograd(monkeypatch):
    from gemmtune.kernels import pad

    monkeypatch.setattr(pad, "PAD_SPLIT_BYTES", 0)
    t = torch.randn(5, 3, requires_grad=True)
    pad.zero_pad(t, 6, 4).sum().backward()
    assert torch.equal(t.grad, torch.ones(5, 3))


# ------------------------------------------------------------------ bmm: 3-D operands
@pytest.fixture
def garbage_new_empty(monkeypatch):
    """new_empty hands back NaN-filled tensors (as uninitialised memory may hold anything), so
    that any margin zero_pad forgets to write shows; the calls are counted."""
    calls = []
    real = torch.Tensor.new_empty

    def new_empty(self, *size, **kw):
        calls.append(size)
        return real(self, *size, **kw).fill_(float("nan"))
    monkeypatch.setattr(torch.Tensor, "new_empty", new_empty)
    return calls


def _operand(variant, bt, r, c, dtype):
    """A (bt, r, c) operand: contiguous, transposed matrices, an offset (sliced) view, or one
    matrix broadcast over the batch (batch stride 0)."""
    if variant == "plain":
        return torch.randn(bt, r, c, dtype=dtype, device=DEV)
    if variant == "transposed":
        return torch.randn(bt, c, r, dtype=dtype, device=DEV).transpose(1, 2)
    if variant == "offset":
        return torch.randn(bt + 1, r + 2, c + 5, dtype=dtype, device=DEV)[1:, 2:, 5:]
    assert variant == "broadcast"
    return torch.randn(1, r, c, dtype=dtype, device=DEV).expand(bt, r, c)


@pytest.mark.parametrize("split_bytes", [0, 1 << 40])  # margins-only path, and F.pad
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("bt", [1, 3])
@pytest.mark.parametrize("variant", ["plain", "transposed", "offset", "broadcast"])
def test_zero_pad_batched_matches_f_pad(monkeypatch, garbage_new_empty, split_bytes, dtype, bt, variant):
    from gemmtune.kernels import pad

    monkeypatch.setattr(pad, "PAD_SPLIT_BYTES", split_bytes)
    monkeypatch.setattr(pad, "TRITON_PAD", False)  # the torch paths (on a GPU, too: test_pad.py has the kernel's)
    torch.manual_seed(bt)
    t = _operand(variant, bt, 13, 7, dtype)
    for rows, cols in ((16, 8), (13, 11), (17, 7), (13, 7)):  # both, columns only, rows only, none
        calls = len(garbage_new_empty)
        got = pad.zero_pad(t, rows, cols)
        assert got.shape == (bt, rows, cols) and got.dtype == dtype
        assert torch.equal(got, torch.nn.functional.pad(t, (0, cols - 7, 0, rows - 13)))
        assert torch.equal(got[:, :13, :7].double(), t.double())  # the values, exactly
        assert not got[:, 13:].any() and not got[:, :, 7:].any()  # zero margins (NaN would be truthy)
        if variant == "broadcast" and bt > 1:  # padded once, broadcast again
            assert got.stride(0) == 0 and got[0].is_contiguous()
        else:
            assert got.is_contiguous()
        # which path ran: a row-major batch gaining rows stays F.pad (measured faster, pad.py)
        strided_cat = bt > 1 and rows > 13 and t.stride(-1) == 1 and variant != "broadcast"
        assert (len(garbage_new_empty) > calls) == (split_bytes == 0 and not strided_cat)


def test_zero_pad_refuses_other_ranks():
    from gemmtune.kernels import pad

    with pytest.raises(ValueError, match="2-D or 3-D"):
        pad.zero_pad(torch.ones(2, 2, 2, 2), 2, 2)


BMM_TILE = "triton_mm:BM16-BN32-BK16-S2-W4-G8"


@pytest.mark.parametrize("choice", ["pad+" + BMM_TILE, "pad+aten"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("variant", ["plain", "transposed_b", "broadcast_b", "broadcast_a_col", "offset_a", "batch1"])
def test_bmm_pad_plus_on_the_margins_only_path_against_fp64(monkeypatch, garbage_new_empty, choice, dtype, variant):
    """pad+ bmm with zero_pad's margins-only copies (PAD_SPLIT_BYTES 0: the path of large
    operands) into garbage-filled buffers: ragged M, N, K (primes), against fp64."""
    from gemmtune.kernels import pad
    from gemmtune.verify import check
    from gemmtune.problem import Problem

    monkeypatch.setattr(pad, "PAD_SPLIT_BYTES", 0)
    torch.manual_seed(7)
    bt, m, n, k = 3, 19, 23, 37
    a = _operand("plain", bt, m, k, dtype)
    b = _operand("plain", bt, k, n, dtype)
    if variant == "transposed_b":
        b = _operand("transposed", bt, k, n, dtype)
    elif variant == "broadcast_b":
        b = _operand("broadcast", bt, k, n, dtype)
    elif variant == "broadcast_a_col":
        a = torch.randn(1, k, m, dtype=dtype, device=DEV).transpose(1, 2).expand(bt, m, k)
    elif variant == "offset_a":
        a = _operand("offset", bt, m, k, dtype)
    elif variant == "batch1":
        a, b = a[:1], b[:1]
    out = torch.full((a.shape[0], m, n), float("nan"), dtype=dtype, device=DEV)
    kernels.run_choice(Choice.parse(choice), a, b, out)
    assert garbage_new_empty  # the copies took the margins-only path
    p = Problem.from_tensors(a, b)
    res = check(out, a, b, p)
    assert res.ok, (p.key, res.reason)
    ref = torch.bmm(a.double(), b.double())
    assert torch.allclose(out.double(), ref, rtol=1e-2, atol=1e-2 * ref.abs().max().item())


def _run_bmm(x, b, choice=PAD_MM):
    out = torch.empty(x.shape[0], x.shape[1], b.shape[2], dtype=x.dtype, device=x.device)
    kernels.run_choice(choice, x, b, out)
    return out


def _check_bmm(out, x, b):
    ref = torch.bmm(x.double(), b.double())
    assert torch.allclose(out.double(), ref, rtol=1e-2, atol=1e-2 * ref.abs().max().item())


def test_batched_parameter_is_padded_once_and_follows_updates():
    torch.manual_seed(3)
    w = torch.nn.Parameter(torch.randn(3, 37, 13, dtype=torch.float16, device=DEV))  # (batch, K, N): both odd
    x = torch.randn(3, 7, 37, dtype=torch.float16, device=DEV)
    n_pad, k_pad = kernels.padded_sizes(7, 13, 37, 2)[1:]
    with torch.no_grad():
        _check_bmm(_run_bmm(x, w), x, w)
        assert len(padcache.WEIGHTS) == 1
        cached = padcache.WEIGHTS.get(w, n_pad, k_pad)
        assert cached.shape == (3, k_pad, n_pad) and cached.is_contiguous()
        assert torch.equal(cached[:, :37, :13], w) and not cached[:, 37:].any() and not cached[:, :, 13:].any()
        _check_bmm(_run_bmm(x, w), x, w)
        assert padcache.WEIGHTS.get(w, n_pad, k_pad) is cached  # reused
        w.mul_(-0.5)
        _check_bmm(_run_bmm(x, w), x, w)
        assert padcache.WEIGHTS.get(w, n_pad, k_pad) is not cached
    assert padcache.WEIGHTS.get(w, n_pad, k_pad) is None  # autograd records: never cached


def test_broadcast_weight_is_cached_as_one_matrix_for_every_batch_size():
    torch.manual_seed(4)
    w = torch.nn.Parameter(torch.randn(13, 37, dtype=torch.float16, device=DEV))  # Linear weight (out, in)
    n_pad, k_pad = kernels.padded_sizes(7, 13, 37, 2)[1:]
    with torch.no_grad():
        copies = set()
        for bt in (3, 5, 1):
            x = torch.randn(bt, 7, 37, dtype=torch.float16, device=DEV)
            b = w.t().expand(bt, 37, 13)
            _check_bmm(_run_bmm(x, b), x, b)
            got = padcache.WEIGHTS.get(b, n_pad, k_pad)
            assert got.shape == (bt, k_pad, n_pad) and (bt == 1 or got.stride(0) == 0)
            copies.add(got.data_ptr())
        _check_bmm(_run_bmm(x, w.t()[None]), x, w.t()[None])  # a batch of one, as a plain view
        copies.add(padcache.WEIGHTS.get(w.t()[None], n_pad, k_pad).data_ptr())
        assert len(padcache.WEIGHTS) == 1 and len(copies) == 1  # one copy for every batch size
        one = padcache.WEIGHTS.get(w.t(), n_pad, k_pad)  # the mm path's copy of W.t(), shared
        assert one.shape == (k_pad, n_pad) and one.data_ptr() in copies
        assert torch.equal(one[:37, :13], w.t()) and not one[37:].any() and not one[:, 13:].any()
        plain = torch.randn(37, 13, dtype=torch.float16, device=DEV).expand(3, 37, 13)
        assert padcache.WEIGHTS.get(plain, n_pad, k_pad) is None  # not a parameter


def test_inference_tensor_weight_is_padded_per_call_not_cached():
    """A weight made (or moved) inside ``torch.inference_mode`` is an inference tensor, with no
    version counter: reading one raised from inside run_choice (a pad+ Conv1D of such a model
    crashed). It is padded per call instead, and stays right after an in-place update."""
    torch.manual_seed(3)
    with torch.inference_mode():
        w = torch.nn.Parameter(torch.randn(37, 13, dtype=torch.float16, device=DEV), requires_grad=False)
        x = torch.randn(5, 37, dtype=torch.float16, device=DEV)
        assert w.is_inference()
        _check(_run(x, w), x, w)
        assert padcache.WEIGHTS.get(w, 16, 40) is None and len(padcache.WEIGHTS) == 0
        w.mul_(-0.5)
        _check(_run(x, w), x, w)


def test_writes_that_bump_no_version_are_seen_after_refresh_weights():
    """``param.data`` writes (a LoRA merge, a collective into the parameter) bump no version
    counter: the cached copy stays until ``gemmtune.refresh_weights()``, which the module doc
    tells users to call after such a write."""
    import gemmtune
    torch.manual_seed(3)
    w = torch.nn.Parameter(torch.randn(13, 37, dtype=torch.float16, device=DEV))
    x = torch.randn(5, 37, dtype=torch.float16, device=DEV)
    with torch.no_grad():
        _check(_run(x, w.t()), x, w.t())
        w.data.mul_(-2.0)  # unseen by the version counter
        stale = _run(x, w.t())
        assert not torch.allclose(stale.double(), x.double() @ w.t().double(), atol=1e-1)
        assert gemmtune.refresh_weights() == 1 and len(padcache.WEIGHTS) == 0
        _check(_run(x, w.t()), x, w.t())


def test_rebinding_data_onto_a_new_storage_at_the_old_address_is_not_served_the_old_copy():
    """``param.data = t`` keeps the parameter's version counter, and a freed storage's address is
    handed to the next allocation of its size (the CUDA caching allocator does it every time).
    Pointer and version then match a copy of weights that are gone. Two storages over one numpy
    buffer make the same address deterministic here; the cache's weak reference to the storage
    it copied from tells them apart."""
    import numpy as np
    buf = np.random.default_rng(4).standard_normal((13, 37)).astype(np.float32)
    w = torch.nn.Parameter(torch.from_numpy(buf))
    with torch.no_grad():
        first = padcache.WEIGHTS.get(w.t(), 16, 40)
        assert padcache.WEIGHTS.get(w.t(), 16, 40) is first
        addr, version = w.data_ptr(), w._version
        w.data = torch.empty(0)  # the first storage is freed here
        gc.collect()
        buf *= -3.0  # new weights, written where the old ones were
        w.data = torch.from_numpy(buf)  # a new storage over the same memory
        assert (w.data_ptr(), w._version) == (addr, version)  # what the key sees did not change
        again = padcache.WEIGHTS.get(w.t(), 16, 40)
    assert again is not first and torch.equal(again[:37, :13], w.t())


def test_the_cache_can_be_turned_off(monkeypatch):
    w = torch.nn.Parameter(torch.randn(13, 37, dtype=torch.float16, device=DEV))
    assert padcache.PaddedWeights(enabled=False).get(w.t(), 16, 40) is None
    monkeypatch.setenv("GEMMTUNE_WEIGHT_CACHE", "0")
    off = padcache.PaddedWeights()
    assert not off.enabled and off.get(w.t(), 16, 40) is None
    monkeypatch.setenv("GEMMTUNE_WEIGHT_CACHE", "1")
    with torch.no_grad():
        assert padcache.PaddedWeights().get(w.t(), 16, 40) is not None


def test_copies_are_kept_per_stream(monkeypatch):
    """A copy made on one stream is not handed to a launch on another (it could read the copy
    before its copy kernel ran); streams stubbed, as the CPU has none."""
    stream = {"now": 1}
    monkeypatch.setattr(padcache, "stream_key", lambda device: stream["now"])
    cache = padcache.PaddedWeights(enabled=True)
    w = torch.nn.Parameter(torch.randn(13, 37, dtype=torch.float16, device=DEV))
    with torch.no_grad():
        first = cache.get(w.t(), 16, 40)
        assert cache.get(w.t(), 16, 40) is first
        stream["now"] = 2
        other = cache.get(w.t(), 16, 40)
        assert other is not first and torch.equal(other, first) and len(cache) == 2
    del w, first, other
    gc.collect()
    assert len(cache) == 0  # both copies leave with the parameter


@pytest.mark.gpu
@pytest.mark.skipif(DEV != "cuda", reason="needs a CUDA GPU (its caching allocator)")
def test_rebinding_data_on_a_gpu_is_not_served_the_old_copy():
    """The case the storage weak reference is for, as it happens on a GPU: ``param.data`` moved
    off and new weights loaded (an offload, a checkpoint swap). The caching allocator hands the
    freed block to the next tensor of its size, so the new weights sit at the old address under
    the old version counter, and a pad+ call must still multiply them."""
    torch.manual_seed(6)
    w = torch.nn.Parameter(torch.randn(13, 37, dtype=torch.float16, device=DEV))
    x = torch.randn(5, 37, dtype=torch.float16, device=DEV)
    with torch.no_grad():
        _check(_run(x, w.t()), x, w.t())
        addr = w.data_ptr()
        w.data = w.data.cpu()  # offloaded: the GPU block is freed
        # New weights, loaded into a fresh allocation. The allocator hands out another free block
        # of the size first where it has one (session 31's H200 run skipped here): allocations are
        # kept alive until one lands on the freed block.
        held = []
        for _ in range(256):
            new = (-3 * w.data).to(DEV)
            if new.data_ptr() == addr:
                break
            held.append(new)
        else:
            pytest.skip("no allocation landed on the freed block; the CPU test covers the rule")
        w.data = new
        del held
        _check(_run(x, w.t()), x, w.t())


# An optimizer step: the fused ones write the parameters without bumping their version counters,
# so the cache, keyed on the version, served the weights of before the step (kernels.padcache).
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

    with torch.no_grad():
        _run(x, w.t())  # caches pad(W.t())
    assert len(padcache.WEIGHTS) == 1
    opt = _fused(opt_cls, [w], lr=0.5)
    w.grad = torch.randn_like(w)
    version = w._version
    opt.step()
    with torch.no_grad():
        got = _run(x, w.t())
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



@pytest.mark.parametrize("writer", ["refresh_weights", "fused_step"])
def test_a_copy_made_while_an_unseen_write_and_its_refresh_land_is_not_kept(monkeypatch, writer):
    """A server thread pads W (its first pad+ call) while another writes W unseen by its version
    counter and then drops the copies: ``w.data`` written and ``refresh_weights()``, or a fused
    optimizer step (its hook forgets W). Forced interleaving: the write and the drop land after the
    reader has copied W and before it stores the copy. That racing call may use either W; but
    the old copy was stored after the drop and served, stale, to every later call."""
    torch.manual_seed(7)
    w = torch.nn.Parameter(torch.randn(17, 31, device=DEV))  # odd N and K: pad+ pads both
    x = torch.randn(4, 31, device=DEV)
    opt = _fused(torch.optim.SGD, [w], lr=0.5) if writer == "fused_step" else None
    # As in a process whose first padded copy this is: no optimizer hook yet (it was registered
    # only once a copy had been kept, too late for a step landing while the first one is made)
    handle = padcache._HOOK.pop("handle", None)
    if handle is not None:
        handle.remove()
    padcache._CACHES.clear()
    copied, written, errors = threading.Event(), threading.Event(), []
    zero_pad = padcache.zero_pad

    def pad_then_wait(*args, **kwargs):
        out = zero_pad(*args, **kwargs)  # the reader has read W...
        if threading.current_thread().name == "reader":
            copied.set()
            written.wait(30)  # ...when the writer's update and drop land
        return out
    monkeypatch.setattr(padcache, "zero_pad", pad_then_wait)

    def reader():
        try:
            with torch.no_grad():
                _run(x, w.t())
        except Exception as e:  # (an assert in a thread would be lost)
            errors.append(repr(e))

    t = threading.Thread(target=reader, name="reader", daemon=True)
    t.start()
    assert copied.wait(30)
    if writer == "fused_step":
        w.grad = torch.randn_like(w)
        opt.step()  # writes W, leaves W._version as it was; its hook forgets W's copies
    else:
        w.data.mul_(-2.0)  # unseen by the version counter
        gemmtune.refresh_weights()
    written.set()
    t.join(30)
    assert not t.is_alive() and not errors
    with torch.no_grad():
        _check(_run(x, w.t()), x, w.t())


@pytest.fixture
def swap_on_conversion():
    before = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    yield
    torch.__future__.set_swap_module_params_on_conversion(before)


def test_a_cached_parameter_can_still_be_swapped(swap_on_conversion):
    """``model.to()`` and ``load_state_dict`` swap parameters (``torch.utils.swap_tensors``) under
    the future flag, as ``nn.Module._apply`` does for tensor subclasses. A swap refuses a tensor
    with a weak reference, which the cache once held on every parameter it had padded: both raised
    'Cannot swap' after one pad+ call. The swapped parameter keeps its identity (the cache's slot)
    and gets new contents, which are padded again, not served the old copy."""
    torch.manual_seed(5)
    lin = torch.nn.Linear(37, 13, dtype=torch.float16, device=DEV)
    x = torch.randn(7, 37, dtype=torch.float16, device=DEV)
    w = lin.weight
    with torch.no_grad():
        _check(_run(x, lin.weight.t()), x, lin.weight.t())
        first = padcache.WEIGHTS.get(lin.weight.t(), 16, 40)
    assert first is not None and len(padcache.WEIGHTS) == 1
    new = {"weight": torch.randn(13, 37, dtype=torch.float16) * 3, "bias": torch.randn(13, dtype=torch.float16)}
    lin.load_state_dict(new)  # swaps: raised before
    assert lin.weight is w and torch.equal(lin.weight.detach().cpu(), new["weight"])
    with torch.no_grad():
        _check(_run(x, lin.weight.t()), x, lin.weight.t())
        again = padcache.WEIGHTS.get(lin.weight.t(), 16, 40)
    assert again is not first and torch.equal(again[:37, :13], lin.weight.t())
    lin.to(torch.float32)  # swaps too
    assert lin.weight is w and lin.weight.dtype == torch.float32
    gc.collect()
    assert len(padcache.WEIGHTS) <= 1  # the fp16 storages' copies went with them


def test_a_new_parameter_over_the_same_storage_is_not_served_the_old_copy():
    """``Parameter(w.data)`` shares w's storage, and ``.data`` has a version counter of its own:
    after a write through another ``.data`` alias, pointer, shape, storage and version can all
    match the old key. The token on the Python object tells the new parameter apart, and the
    swap (same identity, same storage) is the way to put it in the old parameter's place."""
    torch.manual_seed(6)
    w = torch.nn.Parameter(torch.randn(13, 37, device=DEV))
    with torch.no_grad():
        first = padcache.WEIGHTS.get(w.t(), 16, 40)
        other = torch.nn.Parameter(w.data)
        other.data.mul_(-2.0)  # through an alias whose counter neither parameter shares
        torch.utils.swap_tensors(w, other)  # w keeps its id; other holds w's old dict (the token)
        assert w._version == 0 and w.untyped_storage().data_ptr() == other.untyped_storage().data_ptr()
        again = padcache.WEIGHTS.get(w.t(), 16, 40)
    assert again is not first and torch.equal(again[:37, :13], w.t())


def test_the_token_is_a_plain_int_that_survives_a_weights_only_load(tmp_path):
    """The token is pickled with a parameter's state (``state_dict(keep_vars=True)``, a whole
    model); an int loads under ``weights_only=True`` and names nothing in another process."""
    lin = torch.nn.Linear(37, 13)
    with torch.no_grad():
        padcache.WEIGHTS.get(lin.weight.t(), 16, 40)
    assert type(lin.weight.__dict__[padcache.TOKEN]) is int
    torch.save(lin.state_dict(keep_vars=True), tmp_path / "sd.pt")
    sd = torch.load(tmp_path / "sd.pt", weights_only=True)
    assert torch.equal(sd["weight"], lin.weight)
