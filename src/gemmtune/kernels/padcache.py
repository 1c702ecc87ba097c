"""Zero-padded copies of weight operands, made once per parameter version instead of per call.

A ``pad+`` choice multiplies 16-byte aligned copies of its operands (``kernels.run_choice``).
For an activation that copy is paid on every call, and the tuner measures it so. A weight is
different: ``x @ W.t()`` with an odd ``out_features`` (GPT-2's LM head: 50257 x 768, 77 MB in
bf16) would otherwise be transposed and padded again on every forward. So when B is an
``nn.Parameter`` or a view of one, its padded copy is kept and reused until the parameter
changes: the key holds the parameter's version counter (bumped by every in-place torch op;
fused optimizer steps are not, see below), its data pointer, and the view's shape and strides, and a weak
reference to the storage it was copied from. The last is for ``param.data = t``: rebinding keeps
the parameter's version counter as it was, and once the old storage is freed a new one can get its
address (the CUDA caching allocator hands a freed block of the same size straight back), so
pointer and version alone would match a copy of weights that no longer exist. (torch keeps one
Python object per storage while the storage lives, so the weak reference names that storage, and
its callback drops the copy when the storage is freed.)

The parameter itself is named by a token in its ``__dict__`` (an int; a new Parameter over the
same storage, ``Parameter(w.data)``, has none and a version counter of its own), not by a weak
reference: ``torch.utils.swap_tensors`` refuses to swap a tensor that has one, and ``model.to()``
and ``load_state_dict`` swap under ``torch.__future__.set_swap_module_params_on_conversion(True)``
(and ``nn.Module._apply`` does for tensor subclasses such as DTensor). The swap moves the token
with the old contents, so the swapped parameter is padded again at its next use. A bmm's B is
cached the same way: a batched weight (batch x K x N) as a whole, one weight broadcast over the
batch (``W.expand(batch, K, N)``, batch stride 0) as its one matrix, shared by every batch size.

A parameter that is part of a larger storage (``torch.nn.utils.vector_to_parameters`` makes each
parameter a view of one flat vector; flat-parameter wrappers do the same) is never cached: the
vector has a version counter of its own, so an in-place write through it (``theta.add_(step)``
in an evolution-strategies loop) changes the weights and bumps nothing the key holds.

Writes that bump no version counter of the parameter go unseen, and the old copy would keep being
read: ``param.data.add_(...)`` (PEFT's LoRA merge), ``dist.broadcast`` / ``all_reduce`` into a
parameter, a custom kernel or a replayed CUDA graph that writes the weight, and a write through a
tensor ``t`` of the parameter's own size that was bound as ``param.data = t`` (or ``param.set_(t)``)
and kept. After such a write call
``gemmtune.refresh_weights()`` (every copy is made again at its next use), or turn the cache off
for the process with ``GEMMTUNE_WEIGHT_CACHE=0`` (pad+ then copies the weight on every call,
as the tuner timed it). ``load_state_dict`` and in-place updates bump the version: no call needed.

An optimizer step need not: the fused ones (``torch.optim.AdamW(fused=True)``, ``SGD(fused=True)``:
``torch._fused_adamw_`` and its kin) write the parameters and leave their version counters as they
were, and so may optimizers whose kernels write through raw pointers. So every ``torch.optim``
optimizer's step (a global step post-hook, registered before the first copy is made) drops the copies of
the parameters it holds: an eval under ``no_grad`` after a training step reads the new weights.
Copies of parameters outside the optimizer (frozen weights) are kept.

Copies are kept per CUDA stream: a copy made on one stream is only read by launches on that
stream, so a call on another never reads it before its copy kernel has run, and a replaced copy
is freed in the order of the stream that read it.

Never reused where that would be unsafe:
* inside a CUDA-graph capture (a replay would keep reading the copy made at capture time after
  the parameter changed): the copy is made in the graph, as for any operand;
* when autograd records (grad enabled and B requires grad): the copy must stay in the graph;
* for an inference tensor (a model made or moved inside ``torch.inference_mode``): it has no
  version counter, and an in-place update inside inference mode would go unseen.

Tuning does not see this (it times pad+ with both copies), so a pad+ pick for a weight runs
at least as fast as measured.

    >>> import torch
    >>> cache = PaddedWeights()
    >>> w = torch.nn.Parameter(torch.randn(5, 3))
    >>> with torch.no_grad():
    ...     first = cache.get(w.t(), 8, 8)
    ...     again = cache.get(w.t(), 8, 8)
    >>> first is again, tuple(first.shape), len(cache)
    (True, (8, 8), 1)
"""

from __future__ import annotations

import os
import secrets
import threading
import weakref

import torch

from .launch_args import stream_key
from .pad import broadcast_matrix, zero_pad


# The attribute a cached parameter carries: a random int naming that Python object to the caches
# (the module doc says why not a weak reference). Random, not counted: a parameter pickled by
# another process brings its token along.
TOKEN = "_gemmtune_padcache"


def _token(param: torch.nn.Parameter) -> int:
    tok = param.__dict__.get(TOKEN)
    if type(tok) is not int:
        tok = param.__dict__[TOKEN] = secrets.randbits(63)
    return tok


# Every PaddedWeights that has kept a copy: the optimizer step hook drops copies from each.
_CACHES: "weakref.WeakSet[PaddedWeights]" = weakref.WeakSet()
_HOOK: dict = {}


def _after_optimizer_step(optimizer, args, kwargs) -> None:
    """A global optimizer step post-hook: the stepped parameters' copies are gone (the module doc
    says why)."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    for cache in list(_CACHES):
        cache.forget(params)


def _watch_optimizers(cache: "PaddedWeights") -> None:
    _CACHES.add(cache)
    if "handle" not in _HOOK:
        from torch.optim.optimizer import register_optimizer_step_post_hook
        _HOOK["handle"] = register_optimizer_step_post_hook(_after_optimizer_step)


class PaddedWeights:
    """Per-parameter cache of ``pad(B)`` (row-major, K' x N'; batch x K' x N' for a bmm). ``get``
    returns None for an operand it must not cache; the caller then pads as usual."""

    def __init__(self, enabled: bool | None = None) -> None:
        # (id(parameter), stream) -> (parameter's token, key, padded copy, weak ref to B's storage)
        self._entries: dict[tuple[int, int], tuple] = {}
        self.enabled = os.environ.get("GEMMTUNE_WEIGHT_CACHE", "1") != "0" if enabled is None else enabled
        # Bumped by every clear() and forget(), under the lock, and a copy is stored (under the lock)
        # only if no bump came since before it was read. A copy read by one thread while another
        # wrote the weight unseen (``param.data.add_``, a fused optimizer step) and then called
        # refresh_weights() was stored after that refresh and served, stale, to every later call:
        # the refresh is there to make such writes seen. (The hit path takes no lock.)
        self._generation = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._entries.clear()

    def forget(self, params) -> int:
        """Drop the copies of ``params`` (on every stream); returns how many were dropped."""
        with self._lock:
            self._generation += 1  # (even with nothing kept: a copy being made now may be of the old weights)
            if not self._entries:
                return 0
            by_id = {id(p): p for p in params}
            drop = [slot for slot, hit in list(self._entries.items())
                    if slot[0] in by_id and by_id[slot[0]].__dict__.get(TOKEN) == hit[0]]
            for slot in drop:
                self._entries.pop(slot, None)
        return len(drop)

    @staticmethod
    def _parameter(b: torch.Tensor) -> torch.nn.Parameter | None:
        if isinstance(b, torch.nn.Parameter):
            return b
        base = b._base
        return base if isinstance(base, torch.nn.Parameter) else None

    def get(self, b: torch.Tensor, n_pad: int, k_pad: int, kmajor: bool = False) -> torch.Tensor | None:
        """B (K x N) zero-padded to (k_pad x n_pad), row-major (``kmajor``: column-major, the copy
        3xTF32 reads, precision.pads_b_kmajor): cached when B is a parameter (or a view of one)
        and caching is safe, else None. A bmm's B (batch x K x N) is padded
        matrix by matrix (``zero_pad``); one matrix (broadcast over the batch, batch stride 0, or
        a batch of one) is cached as that matrix, whatever the batch size, and returned expanded."""
        if b.dim() == 3 and (b.shape[0] == 1 or broadcast_matrix(b)):
            one = self.get(b[0], n_pad, k_pad, kmajor)
            return None if one is None else one.expand(b.shape[0], k_pad, n_pad)
        if not self.enabled:
            return None
        param = self._parameter(b)
        if param is None:
            return None
        if b.requires_grad and torch.is_grad_enabled():
            return None
        if b.is_inference():  # no version counter to tell an in-place update by
            return None
        if b.is_cuda and torch.cuda.is_current_stream_capturing():
            return None
        storage = b.untyped_storage()
        if param.storage_offset() or storage.nbytes() != param.numel() * param.element_size():
            # A parameter that is part of a larger storage: ``vector_to_parameters`` (each
            # parameter's .data a view of one flat vector), a flat-parameter wrapper. The vector is
            # another tensor with a version counter of its own, so an in-place write through it
            # (an evolution-strategies step, an all-gather into the flat buffer) changed the
            # weights and nothing in the key: a copy was served stale (the CPU hunt of session 45).
            return None
        key = (b.data_ptr(), tuple(b.shape), b.stride(), b._version, b.dtype, b.device, n_pad, k_pad, kmajor)
        slot = (id(param), stream_key(b.device))
        hit = self._entries.get(slot)
        if (hit is not None and hit[3]() is storage and hit[1] == key
                and param.__dict__.get(TOKEN) == hit[0]):
            return hit[2]
        # The optimizer hook is in place before the weight is read: registered only after the first
        # copy was kept, a fused optimizer step that ran while that first copy was made bumped no
        # generation, and the stale copy was kept and served (tests/test_padcache.py, run alone).
        _watch_optimizers(self)
        generation = self._generation  # read before the weight is (see __init__)
        with torch.no_grad():
            padded = zero_pad(b.t(), n_pad, k_pad).t() if kmajor else zero_pad(b, k_pad, n_pad)
        entries = self._entries

        def forget(ref, slot=slot):  # the storage is freed: drop its copy with it (if still this entry's)
            if entries.get(slot, (None,) * 4)[3] is ref:
                entries.pop(slot, None)
        with self._lock:
            if self._generation == generation:  # else refreshed meanwhile: this copy may be stale, not kept
                self._entries[slot] = (_token(param), key, padded, weakref.ref(storage, forget))
        return padded


# The process's cache, used by kernels.run_choice.
WEIGHTS = PaddedWeights()


def refresh_weights() -> int:
    """Forget every padded weight copy (the module doc says when to call this); each is made
    again at its next use. Returns how many copies were dropped.

    >>> refresh_weights() >= 0
    True
    """
    n = len(WEIGHTS)
    WEIGHTS.clear()
    return n
