"""The step gate: whether a patched model's un-graphed eager step is faster with the tuned
kernels its layers chose, timed as the whole step, against cuBLAS everywhere.

Each patched layer chooses its eager path per input shape on its own (``nn.choose_eager``: that
layer's GEMM timed alone, 10 calls back to back). A model's eager step is another thing: between
the GEMMs run norms, attention and elementwise kernels, each a launch of its own, and a step of a
small model is often bound by the host's issue rate, where every extra microsecond of Python a
tuned launch costs is paid and the device time it saves is not. On an H200 (session 50) the
per-layer rule kept a tuned kernel on 74 calls of Qwen2-0.5B's fp32 prefill, each faster alone
(82 against 131 us), and the step ran 0.839x eager's speed: 29 ms of wall time for 17-18 ms of
device time.

So after the layers choose, the gate times the step itself, interleaved, three ways:

* ``tuned``: the layers' own choices;
* ``strong``: only the choices whose layer timing saved at least ``STRONG`` of cuBLAS's time
  (the clearest device-time wins, which most often survive a host-bound step);
* ``aten``: cuBLAS (``F.linear``) on every shape the step ran.

and keeps the fastest, where it beats ``aten`` by ``MARGIN`` (median ratio of paired rounds);
otherwise every shape of the step runs cuBLAS. Only the shapes the step itself met for the first
time are gated, so steps of other shapes (a prefill and a decode step) are decided apart.
Under torch.compile or CUDA graphs none of this applies: the tuned kernels run.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Callable, Mapping

import torch

from .capture import int_at_least

# A candidate is kept only where its step's median paired ratio to the all-cuBLAS step is below
# this (a 2% win), so a tie keeps cuBLAS, the path with no Python of ours. Un-graphed steps are
# noisy: bench-model's eager-against-itself medians on the H200 ranged 0.976-1.036 over 21 paired
# rounds (session 51), so a kept candidate may be a tie; the losses the gate exists for were
# 19-39% (session 51's forced worst case) and 16% (session 50's fp32 prefill).
MARGIN = 0.98
# ``strong``: the layer timing's tuned time at most this fraction of cuBLAS's (a 15% saving).
STRONG = 0.85
# A candidate's measured step gain (aten's step time less its own) must be one its layers could make:
# at most SLACK times the sum of what each of its (layer, shape) pairs saved per call in its own
# timing (nn.choose_eager: 10 back-to-back calls, host and device). A larger gain is noise, and the
# candidate is not kept. Why: on the H200 (session 61, call 3b) GPT-2's decode b16 gate kept one layer's
# tuned path (c_proj, whose own timing said 88 us saved a call) for a 1.24 ms step gain (0.911x), and
# bench-model's interleaved rounds then put the patched step at 0.975x its copy: eager steps of this host
# move by +-5% between rounds. SLACK = 2 leaves room for a layer that runs twice a step with one shape,
# and for the timing's own spread.
SLACK = 2.0
ROUNDS = 7            # paired rounds per step
MIN_ROUNDS = 3        # ... at least, when a step is too long for BUDGET_S
BUDGET_S = 15.0       # timed seconds per step the rounds aim to fit (a long prefill of a large model)
MIN_ROUND_S = 0.02    # each candidate's round repeats the step until it lasts about this long
MAX_REPS = 7          # ... at most this many times: 152 calls of a step in all, at most
CANDIDATES = ("tuned", "strong", "aten")


@dataclass
class GateResult:
    """What the gate decided for one step: ``kept`` is the candidate kept (``"tuned"``,
    ``"strong"`` or ``"aten"``), ``"none tuned"`` where no layer chose a tuned kernel for the
    step's shapes (nothing to time), or ``"failed"`` where the step raised when run again
    (``error``; its layers keep their own choices). ``tuned_shapes``: the (layer, shape) pairs
    that had chosen a tuned kernel, ``kept_shapes``: those still on it after the gate. ``ratio``: each candidate's
    median step time over the all-cuBLAS step's, paired round by round, over the rounds where both
    were measured (NaN where more than half were not: a timer's NaN, infinite or 0 s reading; such
    a candidate is never kept); ``step_ms``: each candidate's median measured step time; ``saved_ms``:
    what each tuned candidate's layers saved per call in their own timings, summed (inf where one was
    not timed); ``implausible``: the candidates whose step gain was more than SLACK times that, which
    are never kept (SLACK says why)."""
    step: str
    kept: str
    tuned_shapes: int
    kept_shapes: int
    ratio: dict[str, float] = field(default_factory=dict)
    step_ms: dict[str, float] = field(default_factory=dict)
    rounds: int = 0
    reps: int = 0
    error: str = ""
    saved_ms: dict[str, float] = field(default_factory=dict)
    implausible: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def choose(ratios: Mapping[str, float], margin: float = MARGIN, plausible: Mapping[str, bool] | None = None) -> str:
    """The candidate to keep from each one's median step-time ratio to ``aten``: the smallest
    ratio, if it is below ``margin``; else ``aten``. Ties between two tuned candidates go to the
    one with fewer tuned shapes (``strong``, listed after ``tuned`` in CANDIDATES). A candidate
    whose ``plausible`` is False (its gain more than its layers could make: ``plausible_gain``) is
    never kept."""
    best = "aten"
    for name in CANDIDATES:
        r = ratios.get(name)
        if name == "aten" or r is None or not math.isfinite(r) or (plausible and not plausible.get(name, True)):
            continue
        if r < margin and (best == "aten" or r <= ratios[best]):
            best = name
    return best


def _layers(model: torch.nn.Module) -> list:
    """The eager-path tables of ``model``'s patched layers whose policy is ``"measure"``."""
    return [m._gemmtune_eager for m in model.modules()
            if "_gemmtune_eager" in m.__dict__ and m._gemmtune_eager.policy == "measure"]


def _on_gpu(model: torch.nn.Module) -> bool:
    return any(p.is_cuda for p in model.parameters()) or any(b.is_cuda for b in model.buffers())


def step_seconds(fn: Callable[[], object], reps: int, sync: Callable[[], None] | None = None) -> float:
    """Wall seconds per call of ``fn`` repeated ``reps`` times back to back (launches queued, the
    GPUs waited for once at the end): what an un-graphed eager step costs, host and device.
    ``sync``: waits for every GPU the step runs on (default: the current one)."""
    if not int_at_least(reps, 1):  # (reps=0 divided by zero)
        raise ValueError(f"step_seconds: reps must be an int >= 1, got {reps!r}")
    if sync is None:
        sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync()
    return (time.perf_counter() - t0) / reps


def _sync_all(model: torch.nn.Module) -> Callable[[], None]:
    """Waits for every CUDA device ``model``'s parameters and buffers are on: a model split over
    GPUs (``device_map="auto"``) queues work on each, and waiting for the current one only timed
    part of the step."""
    devices = sorted({t.device.index or 0 for t in (*model.parameters(), *model.buffers()) if t.is_cuda})

    def sync() -> None:
        for d in devices:
            torch.cuda.synchronize(d)
    return sync


def _steps(model: torch.nn.Module, passes) -> dict[str, Callable[[], object]]:
    """``{name: step}`` from a mapping of callables, or from patch's example inputs (one step per
    pass, named ``pass0``, ``pass1``...)."""
    if isinstance(passes, Mapping):
        for name, fn in passes.items():
            if not callable(fn):
                raise TypeError(f"steps[{name!r}] must be a callable of no arguments (one eager step), "
                                f"not {type(fn).__name__}")
        return dict(passes)
    from .capture import _call, example_passes
    return {f"pass{i}": (lambda x=x: _call(model, x)) for i, x in enumerate(example_passes(passes))}


def gate_eager(model: torch.nn.Module, steps, *, rounds: int = ROUNDS, min_round_s: float = MIN_ROUND_S,
               budget_s: float = BUDGET_S,
               timer: Callable[[Callable[[], object], int], float] | None = None, force: bool = False,
               progress: bool = False, retire: bool = False) -> list[GateResult]:
    """Gate each step's tuned eager paths by the step's own time (module docstring). ``steps``: a
    dict ``{name: fn}`` of callables of no arguments that each run one eager inference step of
    ``model`` (a prefill, a decode step that resets its KV cache), or a list of example inputs as
    ``patch`` takes them (tuples of positional arguments, dicts of keyword ones, tensors).

    Each step runs 2 + c + c x ``rounds`` x reps times (c: the candidates timed, 3 where ``strong``
    is some but not all of ``tuned``, else 2; reps: enough for ``min_round_s`` a round, at most
    MAX_REPS: 18 to 152 calls with the defaults; a step too long to time ``rounds`` rounds in
    ``budget_s`` seconds gets fewer, down to MIN_ROUNDS, 10 calls at least), under ``torch.no_grad()``: an
    input a step mutates, such as a KV cache that grows by a token a call, must take that. Runs
    only where the model is on a GPU (an eager step's host time is what it weighs; ``force=True``
    runs it anyway, for tests) and only over patched layers with ``eager_policy="measure"``.
    Returns one ``GateResult`` per step, also kept on the model as plain dicts
    (``model._gemmtune_gate``, which pickles without gemmtune), after those of earlier calls.
    ``retire=True`` (``patch(example_inputs=...)``'s): after the verdicts, every layer whose eager
    shapes all run cuBLAS goes back to torch's own class (``gemmtune.nn.retire``: no eager cost at
    all; under torch.compile its GEMM still runs on its dispatcher). Gate every step first: a
    retired layer is no longer gated, and runs cuBLAS for the shapes a later step brings.

    Example (GPU)::

        >>> gemmtune.load_patched(model, "model.gemmtune.json")                      # doctest: +SKIP
        >>> gemmtune.nn.gate_eager(model, {"prefill": lambda: model(ids)})           # doctest: +SKIP
        [GateResult(step='prefill', kept='aten', tuned_shapes=74, kept_shapes=0, ...)]
    """
    from .nn import _TUNED, retired as _retired  # (nn imports this module)

    # An int, checked here: a float (rounds=2.5) raised TypeError inside the timing loop, which the
    # gate then blamed on each step ("step 'pass0' raised TypeError ... when run again", kept "failed").
    if not int_at_least(rounds, 1):
        raise ValueError(f"rounds must be >= 1 (an int), got {rounds!r}")
    steps = _steps(model, steps)
    tables = _layers(model)
    results: list[GateResult] = []
    gpu = _on_gpu(model)
    if not tables or not (force or gpu):
        if not tables and any(_retired(m) for m in model.modules()):
            # patch(example_inputs=...) gave its cuBLAS-only layers back to torch (retire): nothing
            # is left to gate, which a later decode step's gate used to do without a word
            warnings.warn("gemmtune.gate_eager: no patched layer is left to gate: patch(example_inputs=...) gave the "
                          "layers on cuBLAS back to torch's own class (gemmtune.nn.retire); to gate later steps, "
                          "patch with retire=False and pass retire=True to the last gate_eager",
                          RuntimeWarning, stacklevel=2)
        return results
    owners = _owners(model)  # for the verdicts' hot shapes: the layers do not change while gated
    if timer is None:
        sync = _sync_all(model)
        timer = (lambda fn, reps: step_seconds(fn, reps, sync)) if gpu else step_seconds
    try:
        for name, fn in steps.items():
            before = [set(t.by_shape) for t in tables]
            tuned: list = []
            ran = False  # whether the step's first call returned (the warning below says which call raised)
            try:
                with torch.no_grad():
                    fn()  # the first calls: each layer chooses its path for the step's new shapes
                ran = True
                new = [(t, s) for t, seen in zip(tables, before) for s in t.by_shape if s not in seen]
                tuned = [(t, s) for t, s in new if t.by_shape[s] is _TUNED]
                if not tuned:
                    results.append(GateResult(name, "none tuned", 0, 0))
                    continue
                strong = [(t, s) for t, s in tuned if _saving(t, s) <= STRONG]
                sets = {"tuned": tuned, "strong": strong, "aten": []}
                if len(strong) in (0, len(tuned)):
                    del sets["strong"]  # the same as ``aten`` or ``tuned``: not timed twice
                times, reps = _time_sets(fn, tuned, sets, rounds, min_round_s, timer, budget_s)
            except Exception as e:  # noqa: BLE001 - the caller's step; the gate must not lose a patch
                # A step that cannot run again (a StaticCache full after the repeats, a pass that
                # consumes its input) fails here, after the tuning it follows: its layers keep their
                # own choices, with a warning, rather than patch raising and the tuning being lost.
                _apply(tuned, tuned)
                err = f"{type(e).__name__}: {e}"
                results.append(GateResult(name, "failed", len(tuned), len(tuned), error=err[:300]))
                # (a step that raised on its first call was said to have raised "when run again")
                when = "when run again" if ran else "on its first call"
                warnings.warn(f"gemmtune.gate_eager: step {name!r} raised {err[:300]} {when}; its layers keep "
                              "the paths each chose alone (patch(eager_gate=False) skips the gate; "
                              "gemmtune.nn.gate_eager(model, {name: step}) takes steps that reset their state)",
                              RuntimeWarning, stacklevel=2)
                continue
            except BaseException:
                # Interrupted (Ctrl-C, SystemExit) while candidates were being timed: the step's
                # shapes go back to their layers' own choices, as for a failed step. They were left
                # on whichever candidate was being timed (cuBLAS everywhere, say) with no verdict.
                _apply(tuned, tuned)
                raise
            # A round whose cuBLAS step timed 0 s (a coarse timer= of the caller's) raised
            # ZeroDivisionError here, past the step's try, with the layers left on the last
            # candidate timed and no verdict recorded: it is a failed round (_paired_ratio).
            ratio = {c: _paired_ratio(times[c], times["aten"]) for c in sets}
            aten_s = _measured_median(times["aten"])
            saved = {c: _saved(sets[c]) for c in sets if c != "aten"}
            plausible = {c: not math.isfinite(aten_s) or not math.isfinite(ratio[c])
                         or plausible_gain(aten_s * (1.0 - ratio[c]), saved[c]) for c in saved}
            kept = choose(ratio, plausible=plausible)
            _apply(tuned, sets[kept], owners)
            res = GateResult(name, kept, len(tuned), len(sets[kept]), ratio,
                             {c: _measured_median(v) * 1e3 for c, v in times.items()}, len(times["aten"]), reps,
                             saved_ms={c: x * 1e3 for c, x in saved.items()},
                             implausible=sorted(c for c, ok in plausible.items() if not ok))
            results.append(res)
            if progress:
                print(f"gemmtune: eager step {name!r}: kept {kept} ({len(sets[kept])} of {len(tuned)} tuned layer "
                      "shapes); step time / cuBLAS's: " + ", ".join(f"{c} {r:.3f}" for c, r in ratio.items()),
                      file=sys.stderr, flush=True)
    finally:
        # (in a finally: the verdicts of the steps gated before an interruption are kept)
        # Beside the verdicts of earlier calls (patch's passes, then a decode step gated by hand), a
        # step of the same name replaced by its new verdict.
        names = {r.step for r in results}
        earlier = [r for r in model.__dict__.get("_gemmtune_gate", []) if r.get("step") not in names]
        model.__dict__["_gemmtune_gate"] = earlier + [r.as_dict() for r in results]
    if retire:
        from .nn import retire as give_back
        gone = give_back(model)
        if progress and gone:
            print(f"gemmtune: {len(gone)} layer(s) run cuBLAS on every eager shape: given back to torch's own "
                  "class (their GEMM still runs on their dispatcher under torch.compile)", file=sys.stderr, flush=True)
    return results


def _measured(t: float) -> bool:
    """Whether a step time is a measurement: NaN, an infinite time or one not above 0 (a
    caller's timer= that failed, or too coarse to see the step) is a failed round."""
    return math.isfinite(t) and t > 0


def _paired_ratio(times: list[float], aten: list[float]) -> float:
    """A candidate's median step time over the all-cuBLAS step's, paired round by round, over the
    rounds where both times are measurements (``_measured``); NaN, which ``choose`` passes over
    (cuBLAS kept), where more than half of the rounds failed: the gate does not decide on a
    minority of rounds, nor on a failed one.

    Failed rounds went into statistics.median as they came: it sorts, and a NaN compares false
    with everything, so it sorted as the smallest ratio (pulling the median towards a tuned win)
    or anywhere at all; an infinite cuBLAS time made a ratio of 0, a free step.

    >>> _paired_ratio([0.9, 0.8, 1.0], [1.0, 1.0, 1.0])
    0.9
    >>> _paired_ratio([0.9, float("nan"), 0.5], [1.0, 1.0, float("inf")])
    nan
    """
    ratios = [a / b for a, b in zip(times, aten) if _measured(a) and _measured(b)]
    if not ratios or 2 * len(ratios) < len(aten):
        return math.nan
    return statistics.median(ratios)


def _measured_median(times: list[float]) -> float:
    """The median of a candidate's measured step times (``_measured``); NaN when none is."""
    kept = [t for t in times if _measured(t)]
    return statistics.median(kept) if kept else math.nan


def _time_sets(fn, tuned: list, sets: dict, rounds: int, min_round_s: float, timer,
               budget_s: float = BUDGET_S) -> tuple[dict, int]:
    """Each candidate's step time, per round: ({candidate: [seconds per step]}, reps per round).
    A step too long for ``budget_s`` over ``rounds`` rounds gets fewer, down to MIN_ROUNDS: by
    arithmetic, a 2-second step (a long prefill of a large model) would take 3 x 7 x 2 = 42 s at 7
    rounds, 18 s at 3."""
    with torch.no_grad():
        _apply(tuned, tuned)
        one = timer(fn, 1)  # also a warm-up of the tuned step
        reps = max(1, min(MAX_REPS, math.ceil(min_round_s / max(one, 1e-9))))
        fit = int(budget_s // max(one * reps * len(sets), 1e-9))
        rounds = min(rounds, max(MIN_ROUNDS, fit))
        for cand in sets.values():  # and of each candidate
            _apply(tuned, cand)
            fn()
        times: dict[str, list[float]] = {c: [] for c in sets}
        order = list(sets)
        for r in range(rounds):
            for c in order[r % len(order):] + order[:r % len(order)]:  # rotated: no candidate always first
                _apply(tuned, sets[c])
                times[c].append(timer(fn, reps))
    return times, reps


def decode_step(model: torch.nn.Module, input_ids: torch.Tensor,
                step_ids: torch.Tensor | None = None) -> Callable[[], torch.Tensor]:
    """A step for ``gate_eager``: one decode step of a HF causal LM, every call the same one. A
    KV cache (a transformers ``DynamicCache``, the step's ``cache`` attribute) is filled here from
    ``input_ids`` (batch x prompt length); each call then runs ``step_ids`` (batch x tokens, usually 1; default
    the prompt's last tokens) on it, crops the cache back to the prompt, and returns the step's logits. Gate the
    prompt's own pass first (``patch(example_inputs=...)`` does): the prompt run here decides its
    shapes' paths layer by layer, outside any gate. bench-model's decode phases are these steps.

    A cache that cannot be cropped (a state-space layer's; a sliding-window layer past its
    window) raises on the first call, which ``gate_eager`` reports as a failed step.

    Example (GPU; ``retire=False`` keeps the layers gateable until the decode step is gated too)::

        >>> gemmtune.patch(model, example_inputs=[dict(input_ids=ids)], fast=True, retire=False)  # doctest: +SKIP
        >>> gemmtune.gate_eager(model, {"decode": gemmtune.eager_gate.decode_step(model, ids)},   # doctest: +SKIP
        ...                     retire=True)
    """
    from transformers import DynamicCache

    from .capture import cache_kwarg, unwrapped

    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        raise ValueError("decode_step takes input_ids as a 2-D tensor of token ids (batch x prompt length), got "
                         + (f"shape {tuple(input_ids.shape)}" if isinstance(input_ids, torch.Tensor)
                            else type(input_ids).__name__))
    # A DynamicCache without the config (not capture.new_cache): its layers are all full-attention
    # ones, which crop always puts back. Built from the config, a sliding-window layer past its
    # window, or a state-space layer, refuses the crop unless it records its past, which changes
    # what a step does (and a state-space layer's conv state then loses the static address a CUDA
    # graph needs). The keyword is read once: a signature lookup is host time in a timed step.
    if input_ids.shape[0] < 1 or input_ids.shape[1] < 1:
        raise ValueError(f"decode_step needs a prompt of at least one token per row, got input_ids of shape "
                         f"{tuple(input_ids.shape)}")
    step_ids = input_ids[:, -1:] if step_ids is None else step_ids
    # Checked here, by name: a step of another batch (or 1-D) raised deep inside attention on its
    # first call ("Sizes of tensors must match..."), which gate_eager then only reported as a
    # failed step.
    if (not isinstance(step_ids, torch.Tensor) or step_ids.dim() != 2 or step_ids.shape[0] != input_ids.shape[0]
            or step_ids.shape[1] < 1):
        raise ValueError(f"decode_step takes step_ids as a 2-D tensor of token ids of the prompt's batch "
                         f"({input_ids.shape[0]} x tokens, at least one), got "
                         + (f"shape {tuple(step_ids.shape)}" if isinstance(step_ids, torch.Tensor)
                            else type(step_ids).__name__))
    # And the device, by name: ids on another device than the model's embeddings raised torch's
    # device error from inside the model's prompt pass.
    emb = getattr(unwrapped(model), "get_input_embeddings", lambda: None)()
    where = getattr(getattr(emb, "weight", None), "device", None)
    for what, t in (("input_ids", input_ids), ("step_ids", step_ids)):
        if where is not None and t.device != where:
            raise ValueError(f"decode_step: {what} are on {t.device}, the model's input embeddings on {where}; "
                             f"move them there first ({what}.to({str(where)!r}))")
    cache, key = DynamicCache(), cache_kwarg(model)
    with torch.no_grad():
        # Through the model a torch.compile wrapper holds, not the wrapper: the prompt only fills
        # the KV cache, and only the step is timed. Compiled, the prompt was a graph of its own,
        # whose prefill-sized GEMMs (M = 128, 2048 at batch 16) max-autotune tuned too: on the
        # H200 (session 38) Llama-1B's max-autotune had not finished compiling its decode phase
        # 400 s in, autotuning M = 128 GEMMs at ~25 s a shape.
        unwrapped(model)(input_ids=input_ids, use_cache=True, **{key: cache})
    # Cropped by the step's tokens, not by one: a step of several tokens (step_ids batch x 2) was
    # cropped by one, so the cache grew a token a call and no two calls were the same step (other
    # logits, a longer attention each time, the timed rounds of unlike steps). A negative count:
    # transformers 5.x refuses a positive crop length.
    drop = -int(step_ids.shape[1])

    def step() -> torch.Tensor:
        logits = model(input_ids=step_ids, use_cache=True, **{key: cache}).logits
        cache.crop(drop)  # drop the step's tokens: the next call is the same step (transformers 4.x and 5.x)
        return logits
    step.cache = cache  # type: ignore[attr-defined]  # what a CUDA graph of the step must keep alive
    return step


def _apply(tuned: list, keep: list, owners: dict | None = None) -> None:
    """Put the (layer table, shape) pairs of ``keep`` on the tuned path, the rest of ``tuned`` on
    cuBLAS's (``F.linear``). The forwards compare a path by identity with nn's constants.
    ``owners`` (id(table) -> its layers) only with a verdict: the shapes it puts on cuBLAS for good
    become their layers' hot shape (``nn._hot``). The candidates timed before a verdict set none, so a
    hot shape is never one the gate may still move."""
    from .nn import _ATEN, _TUNED, _hot  # (nn imports this module)

    for t, s in tuned:
        t.by_shape[s] = _ATEN
    for t, s in keep:
        t.by_shape[s] = _TUNED
    if owners:
        for t, s in tuned:
            if t.by_shape[s] is _ATEN:
                for m in owners.get(id(t), ()):
                    _hot(m, s)


def _owners(model: torch.nn.Module) -> dict:
    """id(eager-path table) -> the patched layers of ``model`` that read it (a shallow copy of a layer
    shares its table)."""
    out: dict = {}
    for m in model.modules():
        if "_gemmtune_eager" in m.__dict__:
            out.setdefault(id(m._gemmtune_eager), []).append(m)
    return out


def plausible_gain(gain_s: float, saved_per_call_s: float, slack: float = SLACK) -> bool:
    """Whether a step gain of ``gain_s`` seconds (aten's median step less the candidate's) is one
    the candidate's layers could make, saving ``saved_per_call_s`` seconds over one call of each
    of their tuned shapes (``_saved``; inf where a shape was not timed): at most ``slack`` times that.

    >>> plausible_gain(1.24e-3, 88e-6)   # GPT-2 decode b16, session 61: one layer's 88 us for 1.24 ms
    False
    >>> plausible_gain(0.2e-3, 150e-6), plausible_gain(5e-3, float("inf"))
    (True, True)
    """
    return not (gain_s > slack * saved_per_call_s)


def _saved(pairs: list) -> float:
    """Seconds a step could save with ``pairs`` (layer table, shape) on the tuned path: each pair's
    own timing, cuBLAS's time per call less the tuned kernel's (none where the tuned one was
    slower), summed; inf where a pair was not timed (policy, a CPU tensor: nothing to bound by)."""
    total = 0.0
    for t, s in pairs:
        entry = t.log.get((s, t.dtype))
        if entry is None or not (math.isfinite(entry[1]) and math.isfinite(entry[2])):
            return math.inf
        total += max(0.0, entry[2] - entry[1])
    return total


def _saving(table, shape) -> float:
    """The layer timing's tuned time over cuBLAS's for ``shape`` (inf where it was not timed)."""
    entry = table.log.get((shape, table.dtype))
    if entry is None or not entry[2]:
        return math.inf
    return entry[1] / entry[2]


__all__ = ["GateResult", "gate_eager", "decode_step", "choose", "plausible_gain", "step_seconds", "MARGIN", "STRONG",
           "SLACK"]
