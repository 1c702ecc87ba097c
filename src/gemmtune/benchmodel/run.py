"""Running bench-model: every mode of every model (patched, compiled, ...) with its timings and checks."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Callable

import torch

from ..jsonio import write_atomic
from .graphs import base_mode, capture, is_graph
from .models import (BASE_MODES, DEFAULT_MODES, MODES, PHASES, ModelError, build_encoder, build_minilm, build_model,
                     embed_batch, max_positions, minilm_dir, parse_model, phase_fit, raised_at, routed_experts,
                     user_config)
from .phases import COSINE_MIN, Phase, _ids, causal_phase, greedy, greedy_cache_kind, rel_err, token_median_err
from .report import markdown, plot
from .profile import decode_floor, profile_graphs, weight_bytes
from .timing import interleave_eager, interleave_graphs, time_call, timer_name

COMPILED_MODES = ("compile", "max_autotune", "patch_compile", "lut_compile", "compile_cdt", "patch_compile_cdt",
                  "fuse_patch_compile", "fuse_patch_compile_cdt", "fuse_patch_max_autotune",
                  "fuse_patch_compile_pdl", "max_autotune_pdl")
# Compiled with Inductor's PDL on (torch._inductor.config.triton.enable_pdl, read when a graph's
# kernels are generated: set by _dynamo_for before each mode's first call, off for every other).
PDL_MODES = ("fuse_patch_compile_pdl", "max_autotune_pdl")
CDT = {"coordinate_descent_tuning": True}  # the option max-autotune adds besides its GEMM search


def needs_dynamo_room(mode: str) -> bool:
    """Whether ``mode`` runs a torch.compile'd model, its ``_graph`` twin included (a graph mode
    compiles in its warm-up, before capture).

    >>> [m for m in ("eager", "eager_graph", "compile", "max_autotune_graph", "patch_compile_graph")
    ...  if needs_dynamo_room(m)]
    ['compile', 'max_autotune_graph', 'patch_compile_graph']
    """
    return base_mode(mode) in COMPILED_MODES


class ModeUnavailable(RuntimeError):
    """A mode that cannot run with this torch: recorded as failed, with the reason (``_guarded``)."""


def _limit_hit() -> tuple[type, ...]:
    """The exception raised instead of a silent fall-back to eager once _roomy_dynamo set
    fail_on_recompile_limit_hit (torch versions without it have no such flag either); empty if
    none. A function, not a module constant: reading torch._dynamo imports it (2.4-2.8 s on the
    CPU), and this module is imported whenever the CLI builds its parser."""
    return tuple(x for x in [getattr(torch._dynamo.exc, "FailOnRecompileLimitHit", None)] if x)


def _guarded(run_mode: Callable[[str], None], mode: str, rec: dict, log: Callable[[str], None]) -> None:
    """``run_mode(mode)``; a mode that cannot run here (``ModeUnavailable``) or whose compiled
    model hit dynamo's recompile limit is recorded as failed, with the reason, instead of being
    timed as the eager model it would have run. How many fused groups the mode's compiled graphs
    run as one GEMM each (gemmtune.fuse_compile's pass, counted as it runs) goes into ``rec`` as
    ``fused_merged``."""
    from .. import fuse_compile

    merged = fuse_compile.STATS["merged"]
    try:
        run_mode(mode)
    except (ModeUnavailable, *_limit_hit()) as e:
        # A phase timed before the failure is dropped too: the mode did not run as named. So is
        # its first calls' time (null, not a number: the report showed a failed mode's 0.0 s).
        rec["phases"] = {}
        rec["first_calls_s"] = None
        rec["failed"] = (str(e) if isinstance(e, ModeUnavailable) else
                         f"torch._dynamo hit its recompile limit ({str(e).splitlines()[0]}); not timed")
        log(f"{mode}: FAILED: {rec['failed']}")
    finally:
        if fuse_compile.STATS["merged"] > merged:
            rec["fused_merged"] = fuse_compile.STATS["merged"] - merged


def _roomy_dynamo() -> None:
    """Room in dynamo's cache for the recompiles a KV cache causes (prompt pass, then decode
    steps: each phase is a new guard set), and hitting the limit anyway is an error
    (``_guarded``), never a silent fall-back to eager. Without the room, modes compiled one after
    another share the HF forward's code object and its default limit of 8 entries:
    - on an H200 the patched model hit the limit and ran its decode step uncompiled (7.6 ms
      against 2.8 for plain torch.compile on GPT-2);
    - until 2026-11-25 the graph modes ran with the default limit, and max_autotune_graph,
      compiled after compile_graph and patch_compile_graph, hit it and replayed the eager model
      (Llama-1B decode 2.365 ms against eager_graph's 2.327 on the H200; GPT-2 0.787 against
      0.791 on the H100)."""
    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, max(getattr(cfg, name), 64))
    for name in ("fail_on_recompile_limit_hit", "fail_on_cache_limit_hit"):
        if hasattr(cfg, name):
            setattr(cfg, name, True)


def _fresh_dynamo() -> None:
    """An empty dynamo cache, then ``_roomy_dynamo``: before each un-graphed mode, unless a graph
    was captured already. Graph modes only get the room: a reset would drop the compiled kernels
    that an earlier mode's captured graph still replays (triton unloads a kernel's module when
    its object is collected)."""
    torch._dynamo.reset()
    _roomy_dynamo()


def _dynamo_for(mode: str, replays: dict, variants: dict | None = None, rec: dict | None = None) -> None:
    """What dynamo needs before ``mode`` runs (see _fresh_dynamo and _roomy_dynamo), and
    Inductor's lookup table: gemmtune's (``variants['table']``) for lut_compile and its graph
    twin, none for every other mode. The number of entries installed goes into ``rec``. Inductor's
    PDL on for the PDL_MODES, off for the others."""
    if not replays and not is_graph(mode):
        _fresh_dynamo()
    elif needs_dynamo_room(mode):
        _roomy_dynamo()
    from .. import inductor_export as ie

    if base_mode(mode) == "lut_compile":
        why = ie.unavailable_reason()
        if why is not None:
            raise ModeUnavailable(f"Inductor's lookup table is not available here: {why}")
        if variants is None or variants.get("table") is None:
            raise ModeUnavailable("lut_compile needs the table of gemmtune's tuning call, and this one returned none")
        itable = ie.install(variants["table"])
        if rec is not None:
            rec["lut_entries"] = len(itable)
    else:
        _no_lut()
    _inductor_pdl(base_mode(mode) in PDL_MODES)


def _no_lut() -> None:
    """No gemmtune table in Inductor (after lut_compile, and before any other mode), and Inductor's
    PDL back off (after a _pdl mode)."""
    from .. import inductor_export as ie

    ie.uninstall()
    _inductor_pdl(False)


def _inductor_pdl(on: bool) -> None:
    """Inductor's programmatic dependent launch on or off for the graphs compiled from now on."""
    from torch._inductor import config as iconfig

    iconfig.triton.enable_pdl = on


def make_variants(model: torch.nn.Module, modes: list[str], example: Callable, out: dict,
                  tune_kwargs: dict, steps: Callable[[torch.nn.Module], dict] | None = None,
                  log: Callable[[str], None] = print) -> dict:
    """Each mode's callable model. The patched one is a deep copy of ``model``, tuned once from
    ``example(copy)`` (its GEMMs captured, one tune call) and shared by eager_patch and
    patch_compile; a ``_graph`` mode shares the object of its base mode (graphs.base_mode), built
    once, except eager_patch_graph: a copy patched with the same dispatchers and
    ``eager_policy="tuned"`` (host time, which the eager rule weighs, is not paid in a graph).
    Tuning time and winners go into ``out``, each mode's setup time into ``out['modes'][mode]``.
    ``steps(model)``: ``{phase: step}``, each phase's eager step on ``model``; with it, each
    un-graphed patched copy (eager_patch, eager_fuse_patch) goes through ``gemmtune.gate_eager``
    as ``patch(example_inputs=...)`` would (its verdicts in ``out['eager_gate']``, its time in
    ``out['eager_gate_s']``; the fused copy's under ``fuse_``)."""
    variants: dict[str, Callable] = {}
    compiled: dict[str, tuple] = {}  # a patched compiled mode: (the module it compiles, torch.compile's keywords)

    def gate(v: torch.nn.Module, prefix: str = "") -> None:
        if steps is None:
            return
        import gemmtune
        t0 = time.perf_counter()
        # retire=True, as patch(example_inputs=...) gates: the layers left on cuBLAS for every phase
        # go back to torch's class (gemmtune.nn.retire); compiled, their GEMM still runs on their
        # dispatcher (gemmtune.compile_route), so patch_compile, which compiles this copy, keeps it.
        res = gemmtune.gate_eager(v, steps(v), retire=True)
        out[prefix + "eager_gate_s"] = time.perf_counter() - t0
        out[prefix + "eager_gate"] = [r.as_dict() for r in res]
        from ..nn import retired
        out[prefix + "eager_retired"] = sorted(n for n, m in v.named_modules() if retired(m))
        for r in res:
            log(f"{prefix}eager gate {r.step}: kept {r.kept} ({r.kept_shapes} of {r.tuned_shapes} tuned layer shapes)"
                + "".join(f", {c} {x:.3f}" for c, x in r.ratio.items() if c != "aten"))
        log(f"{prefix}eager gate: {len(out[prefix + 'eager_retired'])} layer(s) given back to torch's class "
            "(every eager shape on cuBLAS)")

    def tuner() -> tuple[Callable, dict]:
        """The tune function (tune_kwargs' ``tune_fn``, else gemmtune.tune) and the other tune_kwargs."""
        import gemmtune
        return tune_kwargs.get("tune_fn") or gemmtune.tune, {k: x for k, x in tune_kwargs.items() if k != "tune_fn"}

    def build(mode: str):
        if mode in variants:
            return variants[mode]
        if mode == "eager":
            v = model
        elif mode == "eager_copy":
            v = copy.deepcopy(model)  # the control of the deep-copied modes (models.BASE_MODES says why)
        elif mode in ("eager_patch", "patch_compile"):
            if "patched" not in variants:
                import gemmtune
                patched = copy.deepcopy(model)
                t1 = time.perf_counter()
                tuned = {}
                inner, kwargs = tuner()

                def tune_fn(problems, **kw):  # the one tuning call; its table also steers lut_compile
                    tuned["result"] = inner(problems, **kw)
                    return tuned["result"]
                with torch.no_grad():
                    # prestart: tune_fn passes its keywords on; its worker then starts before the capture
                    ds = gemmtune.tune_model(patched, fn=lambda: example(patched), tune_fn=tune_fn,
                                             prestart=inner is gemmtune.tune, **kwargs)
                    # tune_missing=False: a layer the example never ran has no dispatcher, and is
                    # left as it is (a warning names it) rather than tuned outside the one call
                    gemmtune.patch(patched, dispatchers=ds, tune_missing=False)
                out["tune_s"] = time.perf_counter() - t1
                # Where tune_s went: the tune call itself (of it, its workers' start-up); the rest
                # is capture, building and verifying the dispatchers, and patching.
                res = tuned.get("result")
                for key, attr in (("tune_call_s", "wall_s"), ("tune_startup_s", "startup_s"),
                                  ("tune_compile_workers", "compile_workers")):
                    if hasattr(res, attr):
                        out[key] = getattr(res, attr)
                gate(patched)
                out["tuned_layer_shapes"] = len(ds)
                out["tuned_problems"] = sum(len(d.hint_choices) for d in ds.values())
                out["winners"] = sorted({h.choice.id for d in ds.values() for h in d.hint_choices})
                variants["patched"] = patched
                variants["dispatchers"] = ds
                variants["table"] = getattr(tuned["result"], "table", None)  # a TuneResult's
            if mode == "eager_patch":
                v = variants["patched"]
            else:
                compiled[mode] = (variants["patched"], {"dynamic": False})
                v = torch.compile(variants["patched"], dynamic=False)
        elif mode == "eager_patch_graph":
            # Its own copy, patched with the same dispatchers (no second tuning) and
            # eager_policy="tuned": the eager path rule weighs host time, which a replayed graph
            # does not pay, so a user capturing graphs runs the tuned kernels (gemmtune.nn).
            build("eager_patch")
            import gemmtune
            v = copy.deepcopy(model)
            gemmtune.patch(v, dispatchers=variants["dispatchers"], eager_policy="tuned", tune_missing=False)
        elif mode in ("eager_fuse", "eager_fuse_patch", "eager_fuse_patch_graph"):
            # A fused copy; the patched ones tuned in a call of their own (the fused shapes are not
            # the layers'), shared with the graph twin, whose own copy is patched with the same
            # dispatchers and eager_policy="tuned", as eager_patch_graph is.
            import gemmtune
            v = copy.deepcopy(model)
            out["fused_groups"] = [g.members for g in gemmtune.fuse_linears(v, fn=lambda: example(v))]
            if mode != "eager_fuse":
                if "fuse_dispatchers" not in variants:
                    t1 = time.perf_counter()
                    inner, kwargs = tuner()
                    if inner is gemmtune.tune and any(base_mode(m) == "fuse_patch_compile_pdl" for m in modes):
                        # The one fused tuning call also serves the -pdl mode: it credits the strips
                        # that mode serves as twins (pdl.PDL_CREDIT), as tune_model(pdl=True) would.
                        from ..pdl import credit_kwargs
                        kwargs = credit_kwargs(kwargs)
                        if "pdl_credit" in kwargs:
                            out["fuse_tune_pdl_credit"] = kwargs["pdl_credit"]

                    def keep(problems, **kw):  # the result, which fuse_patch_compile_pdl twins
                        variants["fuse_result"] = inner(problems, **kw)
                        return variants["fuse_result"]
                    with torch.no_grad():
                        variants["fuse_dispatchers"] = gemmtune.tune_model(v, fn=lambda: example(v), tune_fn=keep,
                                                                           prestart=inner is gemmtune.tune, **kwargs)
                    out["fuse_tune_s"] = time.perf_counter() - t1
                    res = variants.get("fuse_result")
                    for key, attr in (("fuse_tune_call_s", "wall_s"), ("fuse_tune_startup_s", "startup_s")):
                        if hasattr(res, attr):
                            out[key] = getattr(res, attr)
                with torch.no_grad():
                    gemmtune.patch(v, dispatchers=variants["fuse_dispatchers"], tune_missing=False,
                                   **({"eager_policy": "tuned"} if mode.endswith("_graph") else {}))
                if mode == "eager_fuse_patch":
                    gate(v, "fuse_")
        elif mode == "fuse_patch_compile_pdl":
            # A fused copy of its own, patched with eager_fuse_patch's tuning (no second call) and
            # pdl=True (gemmtune.pdl), compiled with Inductor's PDL on (_dynamo_for), so its graphs
            # serve the GEMV strips as -pdl twins: the two together are what gains (README).
            import gemmtune
            build("eager_fuse_patch")
            v = copy.deepcopy(model).requires_grad_(False)  # inference (pdl=True warns otherwise)
            gemmtune.fuse_linears(v, fn=lambda: example(v))
            with torch.no_grad():
                ds = gemmtune.tune_model(v, fn=lambda: example(v), tune_fn=lambda problems, **kw: variants["fuse_result"],
                                         pdl=True)
                gemmtune.patch(v, dispatchers=ds, tune_missing=False)
            out["pdl_winners"] = sorted({h.choice.id for d in ds.values() if d.pdl_twin is not None
                                         for h in d.pdl_twin.hint_choices})
            compiled[mode] = (v, {"dynamic": False})
            v = torch.compile(v, dynamic=False)
        elif mode == "compile":
            v = torch.compile(model, dynamic=False)
        elif mode in ("max_autotune", "max_autotune_pdl"):  # the latter with Inductor's PDL on (_dynamo_for)
            # dynamic=False (all three compiled modes): the decode phase runs the prompt through
            # the same compiled model first, and with automatic dynamic shapes the step would
            # then run the prompt's dynamic-shape recompile, whose mm kernels max-autotune tuned
            # at the prompt's M=128. Static, each phase gets its own graph, its kernels autotuned
            # for its own shapes, as a serving engine compiles a decode step. (It did not change
            # max-autotune's time on the H200: Llama-1B's decode step replayed in 2.36 ms with
            # automatic dynamic shapes and 2.33 ms static, against 1.44-1.47 ms for the default.)
            v = torch.compile(model, mode="max-autotune-no-cudagraphs", dynamic=False)
        elif mode == "compile_cdt":
            v = torch.compile(model, dynamic=False, options=CDT)
        elif mode == "patch_compile_cdt":
            build("eager_patch")
            compiled[mode] = (variants["patched"], {"dynamic": False, "options": CDT})
            v = torch.compile(variants["patched"], dynamic=False, options=CDT)
        elif mode in ("fuse_patch_compile", "fuse_patch_compile_cdt", "fuse_patch_max_autotune"):
            kw = ({"options": CDT} if mode.endswith("_cdt") else
                  {"mode": "max-autotune-no-cudagraphs"} if mode.endswith("max_autotune") else {})
            compiled[mode] = (build("eager_fuse_patch"), {"dynamic": False, **kw})
            v = torch.compile(compiled[mode][0], dynamic=False, **kw)
        elif mode == "lut_compile":
            # No second tuning: the table of eager_patch's tuning call, installed only while this
            # mode compiles (_dynamo_for), so that max_autotune stays Inductor's own search.
            build("eager_patch")
            v = torch.compile(model, mode="max-autotune-no-cudagraphs", dynamic=False)
        elif is_graph(mode) and base_mode(mode) in BASE_MODES:
            v = build(base_mode(mode))
            if base_mode(mode) in compiled:
                # A compile of its own (another backend: dynamo keeps compiled code per backend), so
                # that the graph twin of a patched compiled mode compiles under graphed() and routes
                # retired layers' GEMMs (compile_route), where its un-graphed base, compiled first
                # and shared, would replay a graph compiled without routes.
                module, kw = compiled[base_mode(mode)]
                v = torch.compile(module, **_own_backend(kw))
        else:
            raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
        variants[mode] = v
        return v

    for mode in modes:
        t0 = time.perf_counter()
        build(mode)
        out["modes"][mode] = {"setup_s": time.perf_counter() - t0}
    return variants


def _own_backend(kw: dict) -> dict:
    """torch.compile keywords that compile as ``kw`` do under a backend of their own: Inductor's
    backend objects compare equal when their options do, so the options also state Inductor's
    CUDA graphs off (their default in every mode bench-model compiles with), and a mode becomes
    its options.

    >>> _own_backend({"dynamic": False})
    {'dynamic': False, 'options': {'triton.cudagraphs': False}}
    """
    kw = dict(kw)
    options = dict(kw.pop("options", {}) or {})
    if "mode" in kw:
        from torch._inductor import list_mode_options
        options = {**list_mode_options(kw.pop("mode")), **options}
    options["triton.cudagraphs"] = False
    return {**kw, "options": options}


def _skip_graph(rec: dict, name: str, mode: str, device: str, log: Callable[[str], None]) -> bool:
    """Whether graph mode ``mode`` cannot run here (no CUDA device): then recorded as skipped."""
    if device == "cuda":
        return False
    rec.update(phases={}, skipped="CUDA graphs need a CUDA device")
    log(f"{name} {mode}: skipped ({rec['skipped']})")
    return True


def _verdicts(out: dict) -> None:
    """Each timed phase's × eager (a graph mode's against eager_graph: both GPU time) and, where
    its logits were checked against fp32, whether it lost no more accuracy than eager did: within
    1.5x eager's error (at least 1e-3). The error is the logits' relative error as a whole, or for
    a mixture of experts (``out["routed_experts"]``) the median token's: there a token whose
    router's top-k is a near tie runs other experts in bf16 than in fp32, in any mode and in eager
    too, and moves the whole-logits error by as much as its logits are large (the GPU model zoo's
    Mixtral, unpatched, compiled against eager: 1.10; session 43)."""
    eager = out["modes"].get("eager")
    key = "logits_token_median_err" if out.get("routed_experts") else "logits_rel_err"
    for mode, rec in out["modes"].items():
        base = out["modes"].get("eager_graph") if is_graph(mode) else eager
        for pname, r in rec["phases"].items():
            if base and pname in base["phases"]:
                r["x_eager"] = base["phases"][pname]["ms"] / r["ms"]
            if eager and pname in eager["phases"] and key in r and key in eager["phases"][pname]:
                r["logits_ok"] = r[key] <= max(1.5 * eager["phases"][pname][key], 1e-3)


def _of_mode(replays: dict, mode: str) -> dict:
    return {key: fn for key, fn in replays.items() if key[0] == mode}


def graph_phase(fn_model, p, name: str, mode: str, log: Callable[[str], None], replays: dict) -> dict:
    """One phase of a CUDA-graph mode: captured (graphs.capture), then its replays timed. The
    replay is kept in ``replays[(mode, phase)]`` for the interleaved graph timing. A compiled
    mode compiles in the capture's warm-up, under ``compile_route.graphed()``: its steps replay
    from this graph, so retired layers' GEMMs go to their dispatchers."""
    from ..compile_route import graphed

    with torch.no_grad(), graphed():
        replay, info = capture(lambda: p.run(fn_model),
                               keep=(lambda: p.state(fn_model)) if p.state else None)
        t = time_call(replay)
    replays[(mode, p.name)] = replay
    log(f"{name} {mode:19s} {p.name:16s} {t['ms']:9.3f} ms  (CUDA graph; replay vs un-graphed call "
        f"{info['replay_rel_err']:.1e}{'' if info['replay_ok'] else ' MISMATCH'})")
    return {**t, **info}


def eager_path_summary(model: torch.nn.Module) -> dict:
    """Which eager path each patched layer took per input shape (gemmtune.nn: the tuned kernel or
    cuBLAS), with the back-to-back timings that chose it: what explains eager + patch's time.
    ``left_as_torch``: the layers patch left unconverted (every hint chose cuBLAS); ``retired``: those
    the step gate gave back to torch (``gemmtune.nn.retire``: every eager shape on cuBLAS)."""
    from ..nn import recorded_dispatcher, retired

    counts: dict[str, int] = {}
    timed = []
    left = gone = 0
    for name, mod in model.named_modules():
        paths = getattr(mod, "eager_paths", None)
        if not isinstance(paths, dict):
            if retired(mod):
                gone += 1
            else:
                left += recorded_dispatcher(mod) is not None
            continue
        log = getattr(mod, "eager_choices", {})
        for key, path in paths.items():
            counts[path] = counts.get(path, 0) + 1
            if key in log:
                choice, t_tuned, t_aten = log[key]
                timed.append({"layer": name, "shape": list(key[0]), "path": path, "choice": choice,
                              "tuned_us": t_tuned * 1e6, "aten_us": t_aten * 1e6})
    return {"counts": counts, "timed": timed, "left_as_torch": left, "retired": gone}


def _read_bandwidth(log: Callable[[str], None]) -> float | None:
    """The GPU's read bandwidth in GB/s, measured once per run for the decode profiles' GEMM floor
    (the bench's read ceiling: the best of a 1 GiB fp32 sum and a bf16 GEMV over a 1 GiB matrix);
    None, said in the log, where it cannot be measured (the profiles then have no floor)."""
    from ..bench.ceilings import read_ceiling
    from ..bench.timing import CudaGraphTimer
    try:
        r = read_ceiling(CudaGraphTimer())
    except Exception as e:  # noqa: BLE001 - a floor is a report's extra, never worth the run
        log(f"read bandwidth not measured ({type(e).__name__}: {e}): the profiles give no GEMM floor")
        return None
    finally:
        torch.cuda.empty_cache()
    log(f"read bandwidth {r['gbps']:.0f} GB/s ({r['kernel']}, measured): the decode profiles' GEMM floor")
    return float(r["gbps"])


def bench_causal(name: str, phases: list[str], modes: list[str], *, device: str, dtype: torch.dtype,
                 tune_kwargs: dict, log: Callable[[str], None] = print,
                 checkpoint: Callable[[dict], None] | None = None, profile: bool = False,
                 eager_rounds: int | None = None, read_gbps: float | None = None) -> dict:
    """Every mode of every phase of one causal model: times, tuning/compile times, checks.
    ``name``: a --models entry (a named causal model, ``config:PATH``, ``dir:PATH`` or
    ``hf:MODEL_TYPE``: models.parse_model), the name its results carry.
    ``checkpoint(partial)`` is called after each mode with what is measured so far (so a run
    stopped by a time limit keeps its finished modes). ``profile``: also each graph mode's kernels
    (profile.py). ``eager_rounds``: interleaved rounds of the un-graphed eager modes
    (timing.interleave_eager). ``read_gbps``: the GPU's measured read bandwidth, against which a
    decode phase's profiled GEMM time is reported (profile.decode_floor)."""
    torch._dynamo.reset()
    spec = parse_model(name)
    model = build_model(spec, dtype, device)
    # The embedding's rows, not config.vocab_size: a multimodal config keeps its text model's
    # vocabulary in a sub-config, and the ids must index the table the model reads.
    vocab = model.get_input_embeddings().weight.shape[0]
    room = max_positions(model.config)
    unfit = {p: why for p in phases if (why := phase_fit(p, room))}
    for p, why in unfit.items():
        log(f"{name} {p}: not run ({why})")
    ps = [causal_phase(p, vocab, device) for p in phases if PHASES[p][0] != "embed" and p not in unfit]
    if spec.user:
        # A decode phase that a user's model's own forward refuses is left out with the reason,
        # and its prefill phases still run: a Mamba's state cannot live in the decode phase's
        # plain DynamicCache (IndexError in transformers), which ended the whole model. (A
        # named model's failure there is gemmtune's bug: it raises.) This eager call is the
        # phase's first, which it would make anyway: it builds the phase's KV cache.
        for p in [p for p in ps if PHASES[p.name][0] == "decode"]:
            try:
                with torch.no_grad():
                    p.run(model)
            except Exception as e:  # noqa: BLE001 - the model's own code; named in the reason
                unfit[p.name] = (f"the model's forward fails on the decode phase's KV cache ({type(e).__name__}: "
                                 f"{e}, raised at {raised_at(e)})")
                log(f"{name} {p.name}: not run ({unfit[p.name]})")
        ps = [p for p in ps if p.name not in unfit]
    if not ps:
        raise RuntimeError(f"{name}: none of the phases {', '.join(phases)} runs on it"
                           + (f" ({'; '.join(f'{p} {w}' for p, w in unfit.items())})" if unfit else ""))
    out = {"model": name, "model_type": model.config.model_type, "params": sum(p.numel() for p in model.parameters()),
           "phases": {}, "modes": {}}
    experts = routed_experts(model.config)
    if experts:
        out["routed_experts"] = experts
    if spec.user:
        out["source"] = str(spec.path) if spec.path else f"AutoConfig.for_model({spec.model_type!r})"
        out["attn_implementation"] = getattr(model.config, "_attn_implementation", None)
    if unfit:
        out["phases_not_run"] = unfit
    prompt = _ids(1, 16, vocab, device, 7)
    with torch.no_grad():
        # The fp32 reference, built only where a prefill phase's logits are checked against it,
        # and after the model, each built and dropped in turn: an 8B config (hf:qwen3) holds 33 GB
        # in fp32, and with the reference built first the model's own fp32 build beside it ran an
        # 80 GB H100 out of memory before any phase (2026-11-28, decode only).
        refs = {}
        if any(p.name.startswith("prefill") for p in ps):
            ref_model = build_model(spec, torch.float32, device)
            refs = {p.name: p.run(ref_model).float() for p in ps if p.name.startswith("prefill")}
            del ref_model
        # Every mode decodes on the cache the reference decoded on: a StaticCache where the model
        # takes one (a compiled mode then runs every step compiled, phases.greedy), else a
        # DynamicCache, which a model whose forward refuses a StaticCache falls back to.
        greedy_cache = greedy_cache_kind(model, prompt)
        try:
            eager_tokens, eager_gaps = greedy(model, prompt, cache=greedy_cache)
        except Exception as e:  # noqa: BLE001 - any refusal of the static cache; the dynamic one is the fallback
            if greedy_cache == "dynamic":
                raise
            log(f"{name}: greedy decoding on a StaticCache failed ({type(e).__name__}: {e}); "
                "every mode decodes on a DynamicCache (a compiled mode recompiles per step)")
            greedy_cache = "dynamic"
            eager_tokens, eager_gaps = greedy(model, prompt, cache=greedy_cache)
        out["greedy_cache"] = greedy_cache
    if device == "cuda":
        torch.cuda.empty_cache()

    # A decode step's GEMMs read every weight once: that read at the measured bandwidth is their
    # floor (the base model's weights: the variants are copies of it, fused or not).
    floors = {p.name: decode_floor(weight_bytes(model), read_gbps) for p in ps
              if PHASES[p.name][0] == "decode"} if read_gbps else {}
    variants = make_variants(model, modes, lambda m: [p.example(m) for p in ps], out,
                             dict(tune_kwargs, extra_m=(1,)),
                             steps=lambda m: {p.name: (lambda p=p: p.run(m)) for p in ps}, log=log)

    replays: dict = {}

    def one_mode(mode: str) -> None:
        fn_model = variants[mode]
        rec = out["modes"][mode]
        rec["phases"] = {}
        first_calls = 0.0
        if is_graph(mode):
            if _skip_graph(rec, name, mode, device, log):
                return
            _dynamo_for(mode, replays, variants, rec)
            for p in ps:
                r = rec["phases"][p.name] = graph_phase(fn_model, p, name, mode, log, replays)
                first_calls += r["warmup_s"] + r["capture_s"]
                if p.name in refs:
                    y = replays[(mode, p.name)]().float()
                    r["logits_rel_err"] = rel_err(y, refs[p.name])
                    r["logits_token_median_err"] = token_median_err(y, refs[p.name])
            rec["first_calls_s"] = first_calls
            if profile:  # right away: a run cut by its time limit keeps the modes profiled so far
                profile_graphs(out, _of_mode(replays, mode), [p.name for p in ps], name, log, floors=floors)
            # Interleaved with the graph modes captured so far, right away too (~0.2 s a mode):
            # session 38's call 4 was cut in max-autotune's compile, and the verdict on the two
            # graph modes before it, due at the end of the run, was lost with it. Only a graph
            # mode adds to ``replays``, so the last of these calls is the whole run's verdict.
            interleave_graphs(out, replays, [p.name for p in ps], name, log)
            if checkpoint is not None:
                checkpoint(out)
            return  # the model is its base mode's: greedy decoding is that mode's check
        _dynamo_for(mode, replays, variants, rec)
        for p in ps:
            t0 = time.perf_counter()
            with torch.no_grad():
                y = p.run(fn_model)  # first call: compiles under torch.compile
                if device == "cuda":
                    torch.cuda.synchronize()
            first_calls += time.perf_counter() - t0
            with torch.no_grad():
                t = time_call(lambda: p.run(fn_model))
            r = {**t}
            if p.name in refs:
                r["logits_rel_err"] = rel_err(y.float(), refs[p.name])
                r["logits_token_median_err"] = token_median_err(y.float(), refs[p.name])
            rec["phases"][p.name] = r
            log(f"{name} {mode:13s} {p.name:16s} {t['ms']:9.3f} ms" +
                (f"  logits err {r['logits_rel_err']:.2e}" if "logits_rel_err" in r else ""))
        rec["first_calls_s"] = first_calls
        log(f"{name} {mode:13s} first calls (compile, autotune) {first_calls:.1f} s")
        if profile and device == "cuda":
            # An un-graphed mode's kernels too, per call: which kernels a mode launches beside the
            # GEMMs (a fused group's strided slices may cost copies further on) is what its
            # host-bound step pays for, one launch each.
            calls = {(mode, p.name): torch.no_grad()(lambda p=p: p.run(fn_model)) for p in ps}
            profile_graphs(out, calls, [p.name for p in ps], name, log, floors=floors)
        if checkpoint is not None:  # before the greedy check, whose recompiles can be long
            checkpoint(out)
        if mode == "eager_patch":
            rec["eager_paths"] = eager_path_summary(fn_model)
            log(f"{name} eager paths: {rec['eager_paths']['counts']}, "
                f"{rec['eager_paths']['left_as_torch']} layer(s) left as torch's, "
                f"{rec['eager_paths']['retired']} given back after the gate")
        if mode != "eager":
            with torch.no_grad():
                toks, _ = greedy(fn_model, prompt, cache=greedy_cache)
            div = next((i for i, (a, b) in enumerate(zip(eager_tokens, toks)) if a != b), None)
            rec["greedy_match"] = div is None
            if div is not None:
                rec["greedy_divergence"] = {"step": div, "eager_gap": eager_gaps[div]}
        if checkpoint is not None:
            checkpoint(out)

    for mode in modes:
        _guarded(one_mode, mode, out["modes"][mode], log)
    _no_lut()
    from ..compile_route import STATS as routes
    out["compile_routes"] = dict(routes)  # retired layers' GEMMs put on their dispatchers in compiled graphs
    interleave_eager(out, variants, {p.name: p.run for p in ps}, name, log, eager_rounds)
    # (the graph modes' verdict is in already: interleave_graphs ran after the last one captured)
    _verdicts(out)
    return out


def bench_minilm(modes: list[str], *, device: str, dtype: torch.dtype, tune_kwargs: dict, folder: str | None,
                 log: Callable[[str], None] = print, profile: bool = False,
                 eager_rounds: int | None = None) -> dict:
    """all-MiniLM-L6-v2 through sentence-transformers, real weights: 64 sentences embedded."""
    torch._dynamo.reset()
    try:
        st32 = build_minilm(torch.float32, device, folder)
        st = build_minilm(dtype, device, folder)
    except (OSError, ValueError) as e:  # a folder without the model: say which
        raise RuntimeError(f"cannot load MiniLM from {minilm_dir(folder)}: {e}") from None
    sentences = [f"Sentence number {i} talks about {w} and matrix multiplication on GPUs."
                 for i, w in enumerate(["cats", "dogs", "rain", "code", "music", "tea", "trains", "stars"] * 8)]
    feats = st.tokenize(sentences)
    feats = {k: v.to(device) for k, v in feats.items() if torch.is_tensor(v)}

    def emb(m):
        return m(dict(feats))["sentence_embedding"]
    return bench_embed("minilm", st32, st, emb, modes, device=device, tune_kwargs=tune_kwargs, log=log,
                       profile=profile, eager_rounds=eager_rounds)


def bench_encoder(name: str, modes: list[str], *, device: str, dtype: torch.dtype, tune_kwargs: dict,
                  log: Callable[[str], None] = print, profile: bool = False,
                  eager_rounds: int | None = None) -> dict:
    """A user's text encoder (``config:`` / ``dir:`` / ``hf:``, models.is_encoder): 64 sequences
    (models.embed_batch) embedded as sentence-transformers' MiniLM pipeline does: the last hidden
    state averaged over each sequence's tokens, L2-normalized."""
    torch._dynamo.reset()
    spec = parse_model(name)
    cfg = user_config(spec)[0]
    m32 = build_encoder(spec, torch.float32, device, cfg=cfg)
    m = build_encoder(spec, dtype, device, cfg=cfg)
    pad = getattr(cfg, "pad_token_id", None)
    ids, mask = embed_batch(m.get_input_embeddings().weight.shape[0], pad if isinstance(pad, int) else 0, device)

    def emb(model):
        h = model(input_ids=ids, attention_mask=mask).last_hidden_state
        w = mask.unsqueeze(-1).to(h.dtype)
        return torch.nn.functional.normalize((h * w).sum(1) / w.sum(1), dim=-1)
    out = bench_embed(name, m32, m, emb, modes, device=device, tune_kwargs=tune_kwargs, log=log,
                      profile=profile, eager_rounds=eager_rounds)
    out.update(model_type=cfg.model_type, encoder=True,
               embed_tokens={"sequences": ids.shape[0], "padded_to": ids.shape[1], "real": int(mask.sum())},
               source=str(spec.path) if spec.path else f"AutoConfig.for_model({spec.model_type!r})",
               attn_implementation=getattr(m.config, "_attn_implementation", None))
    return out


def bench_embed(name: str, ref_model: torch.nn.Module, model: torch.nn.Module, emb: Callable, modes: list[str], *,
                device: str, tune_kwargs: dict, log: Callable[[str], None] = print, profile: bool = False,
                eager_rounds: int | None = None) -> dict:
    """Every mode of an embedding model's one phase, ``embed_64``: ``emb(model)`` its embeddings,
    checked by cosine against ``emb(ref_model)`` (the fp32 copy, freed once used)."""
    with torch.no_grad():
        ref = emb(ref_model).float()
    del ref_model
    st = model
    out = {"model": name, "params": sum(p.numel() for p in st.parameters()), "modes": {}}
    variants = make_variants(st, modes, emb, out, tune_kwargs, steps=lambda m: {"embed_64": lambda: emb(m)}, log=log)
    replays: dict = {}
    emb_phase = Phase("embed_64", emb, emb)

    def one_mode(mode: str) -> None:
        m = variants[mode]
        if is_graph(mode):
            rec = out["modes"][mode]
            if _skip_graph(rec, name, mode, device, log):
                return
            _dynamo_for(mode, replays, variants, rec)
            r = graph_phase(m, emb_phase, name, mode, log, replays)
            e = replays[(mode, "embed_64")]().float()
            cos = float(torch.nn.functional.cosine_similarity(e, ref, dim=-1).min())
            rec.update(first_calls_s=r["warmup_s"] + r["capture_s"], phases={"embed_64": {**r, "min_cosine": cos,
                                                                          "cosine_ok": cos >= COSINE_MIN}})
            if profile:
                profile_graphs(out, _of_mode(replays, mode), ["embed_64"], name, log)
            interleave_graphs(out, replays, ["embed_64"], name, log)  # so far (see bench_causal)
            return
        _dynamo_for(mode, replays, variants, out["modes"][mode])
        t0 = time.perf_counter()
        with torch.no_grad():
            e = emb(m).float()
        first = time.perf_counter() - t0
        with torch.no_grad():
            t = time_call(lambda: emb(m))
        cos = float(torch.nn.functional.cosine_similarity(e, ref, dim=-1).min())
        out["modes"][mode].update({"first_calls_s": first, "phases": {"embed_64": {
            **t, "min_cosine": cos, "cosine_ok": cos >= COSINE_MIN}}})
        log(f"{name} {mode:13s} embed_64         {t['ms']:9.3f} ms  min cosine {cos:.5f}")

    for mode in modes:
        _guarded(one_mode, mode, out["modes"][mode], log)
    _no_lut()
    from ..compile_route import STATS as routes
    out["compile_routes"] = dict(routes)  # retired layers' GEMMs put on their dispatchers in compiled graphs
    interleave_eager(out, variants, {"embed_64": emb}, name, log, eager_rounds)
    _verdicts(out)  # (the graph modes' verdict: after each one, in one_mode)
    return out


def _save_json(path: Path, doc: dict) -> None:
    """``doc`` written atomically (a checkpoint exists for runs killed by a time limit, and one
    killed mid-write left half a file), NaN / inf as null: NaN logits (a bf16 overflow) made
    ``NaN`` in the file, which strict JSON readers refuse."""
    from ..report.files import finite

    write_atomic(path, json.dumps(finite(doc), indent=1, default=lambda o: finite(float(o)), allow_nan=False) + "\n")


def run(models: list[str], *, phases: list[str] | None = None, modes: list[str] | None = None,
        out_dir: str | Path = "benchmarks/results", dtype: str = "bfloat16", tune_kwargs: dict | None = None,
        minilm_folder: str | None = None, device: str | None = None, log: Callable[[str], None] = print,
        profile: bool = False, eager_rounds: int | None = None) -> dict:
    """Bench every model; write ``bench-model.json``, ``bench-model.md`` and ``bench-model.png``
    (with matplotlib) under ``out_dir``. ``profile``: each CUDA-graph mode's kernels too
    (profile.py: device time per replay, GEMM against the rest, the heaviest kernels).
    ``eager_rounds``: interleaved rounds of eager against eager + patch (default 21 on a GPU)."""
    import datetime

    import triton

    import gemmtune
    from ..problem import DTYPES, dtype_name
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    dt = DTYPES[dtype_name(dtype)]
    modes = list(modes or DEFAULT_MODES)
    phases = list(phases or PHASES)
    for m in modes:
        if m not in MODES:
            raise ValueError(f"unknown mode {m!r}; known: {', '.join(MODES)}")
    for p in phases:
        if p not in PHASES:
            raise ValueError(f"unknown phase {p!r}; known: {', '.join(PHASES)}")
    if eager_rounds is not None and (not isinstance(eager_rounds, int) or eager_rounds < 1):
        raise ValueError(f"eager_rounds must be a positive int, got {eager_rounds!r}")
    tune_kwargs = dict(tune_kwargs or {"fast": True})
    try:
        import transformers
        tf_version = transformers.__version__
    except ImportError:
        raise ModelError("bench-model needs transformers: pip install 'gemmtune[models]'") from None
    # Every entry checked before anything runs (a typo in the last one fails now, not after the
    # others' hours): its files, and a user's config read and checked to be a causal LM.
    specs = [parse_model(name) for name in models]
    roles = {spec.entry: user_config(spec)[1] for spec in specs if spec.user}  # causal, or encoder
    if minilm_folder is not None and any(s.kind == "minilm" for s in specs) and not Path(minilm_folder).is_dir():
        # A mistyped --minilm-dir was found only when minilm's turn came, after the models before it
        # had run (hours on a CPU), and then recorded as 'not run'.
        raise ValueError(f"--minilm-dir {minilm_folder}: no such folder (give a sentence-transformers folder of "
                         "all-MiniLM-L6-v2)")
    doc = {"header": {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                      "torch": torch.__version__, "triton": triton.__version__, "transformers": tf_version,
                      "gemmtune": gemmtune.__version__, "date": datetime.date.today().isoformat(),
                      "dtype": dtype_name(dtype), "timer": timer_name(),
                      "tune": ", ".join(f"{k}={v}" for k, v in tune_kwargs.items() if not callable(v)) or "custom"},
           "models": []}
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    read_gbps = _read_bandwidth(log) if profile and device == "cuda" else None
    if read_gbps:
        doc["header"]["read_gbps"] = read_gbps
    for spec in specs:
        name = spec.entry
        # The model's last checkpoint (what its finished modes measured), kept for its record if
        # it fails later: the failure's record replaced it, in the JSON too.
        last: dict = {}
        try:
            if spec.kind == "minilm":
                res = bench_minilm(modes, device=device, dtype=dt, tune_kwargs=tune_kwargs, folder=minilm_folder,
                                   log=log, profile=profile, eager_rounds=eager_rounds)
            elif roles.get(name) == "encoder":
                res = bench_encoder(name, modes, device=device, dtype=dt, tune_kwargs=tune_kwargs, log=log,
                                    profile=profile, eager_rounds=eager_rounds)
            else:
                def checkpoint(partial, name=name, last=last):
                    # a copy: the live record goes on changing (the mode after, the one that fails)
                    last.clear()
                    last.update(copy.deepcopy(partial), partial=True)
                    _save_json(out_dir / "bench-model.json", dict(doc, models=doc["models"] + [last]))
                res = bench_causal(name, phases, modes, device=device, dtype=dt, tune_kwargs=tune_kwargs, log=log,
                                   checkpoint=checkpoint, profile=profile, eager_rounds=eager_rounds,
                                   read_gbps=read_gbps)
        except (RuntimeError, ImportError) as e:  # a missing optional piece, a model that cannot be built: say so, go on
            res = _failed(name, last, f"{type(e).__name__}: {e}")
            log(f"{name}: not run: {res['error']}")
        except (Exception, KeyboardInterrupt) as e:  # noqa: BLE001 - a user's model that fails in its own forward
            if isinstance(e, KeyboardInterrupt) or not spec.user:
                # A named model is gemmtune's to run: its failure is a bug, raised with its
                # traceback (an interrupt, as raised). The models finished before it are written
                # first, the Markdown included (it was written only at the end, and lost).
                why = "interrupted" if isinstance(e, KeyboardInterrupt) else f"{type(e).__name__}: {e}"
                doc["models"].append(_failed(name, last, why))
                _write_reports(doc, out_dir)
                raise
            # A config:/dir:/hf: model whose forward fails (a Mamba's decode phase raised
            # IndexError in transformers' cache code and ended the whole run with a traceback):
            # one line naming where, the next model, exit status 1.
            res = _failed(name, last, f"{type(e).__name__}: {e} (raised at {raised_at(e)})")
            log(f"{name}: not run: {res['error']}")
        doc["models"].append(res)
        _save_json(out_dir / "bench-model.json", doc)
        if device == "cuda":
            torch.cuda.empty_cache()
    _write_reports(doc, out_dir)
    return doc


def _failed(name: str, last: dict, error: str) -> dict:
    """The record of a model that raised: ``error``, with the modes its last checkpoint held
    (``partial``), if any: they were measured, and the report shows them beside the error."""
    return {**last, "model": name, "error": error} if last.get("modes") else {"model": name, "error": error}


def _write_reports(doc: dict, out_dir: Path) -> None:
    """``bench-model.json``, ``.md`` and ``.png`` of the models in ``doc``."""
    _save_json(out_dir / "bench-model.json", doc)
    write_atomic(out_dir / "bench-model.md", markdown(doc))
    if plot(doc, out_dir / "bench-model.png") is None:
        # Nothing to plot (no model ran, or no matplotlib): an earlier run's plot there was left
        # beside this run's report, as if it were this run's.
        (out_dir / "bench-model.png").unlink(missing_ok=True)
