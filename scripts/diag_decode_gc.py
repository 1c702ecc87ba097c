"""Is the patched model's un-graphed decode gap Python's garbage collector?

    python scripts/diag_decode_gc.py --model qwen3-0.6b --out gc.json            # GPU
    python scripts/diag_decode_gc.py --model tiny-llama --device cpu --rounds 3 --out gc.json   # smoke

Sessions 31-51 measured a patched model, every layer on ``F.linear``, at 0.974-0.991x an unpatched
deep copy on a host-bound decode step (b1), with no extra Python call in its cProfile and its
layers no slower than ``nn.Linear``; two unpatched copies differed by up to 2-3%. Both fit a cost
outside any function a profile names: the cyclic garbage collector, whose collections traverse
tracked container objects and so cost more the more of them a process holds (patching adds
dispatchers, tables and per-layer dicts; a deep copy changes which generation a model's objects
sit in).

Four models are timed in interleaved rounds (benchmodel.timing): the model as built ("eager"),
an unpatched deep copy ("copy"), a deep copy patched with every shape on cuBLAS ("patch": a
tune_fn naming ``aten``, so no tuning runs and no Triton kernel launches; patch leaves such layers
torch's own), and a copy whose layers are converted all the same ("patch_conv":
``convert_aten_layers=True``, gemmtune's forwards with every eager path on ``F.linear``). Under three regimes:
the collector as the process has it ("default"), disabled ("disabled"), and enabled after
``gc.freeze()`` ("frozen": every object alive then moved out of the collector's reach). In every
regime, ``gc.callbacks`` measure the seconds spent collecting, per generation, charged to the
model whose step was running. If the gap is the collector, it shows as collection time in
"default" and vanishes in "disabled".
"""
from __future__ import annotations

import argparse
import copy
import gc
import json
import platform
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import gemmtune
import gemmtune.nn
from gemmtune.benchmodel.models import build_model, parse_model
from gemmtune.benchmodel.phases import causal_phase
from gemmtune.benchmodel.run import make_variants
from gemmtune.benchmodel.timing import paired_ratio, time_interleaved


class GcMeter:
    """Seconds and counts of collections, per generation, charged to ``self.current``."""

    def __init__(self):
        self.current = None
        self.t0 = 0.0
        self.seconds: dict[str, dict[int, float]] = {}
        self.counts: dict[str, dict[int, int]] = {}

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.t0 = time.perf_counter()
            return
        if self.current is None:
            return
        g = info.get("generation", -1)
        s = self.seconds.setdefault(self.current, {})
        s[g] = s.get(g, 0.0) + time.perf_counter() - self.t0
        c = self.counts.setdefault(self.current, {})
        c[g] = c.get(g, 0) + 1

    def reset(self) -> None:
        self.seconds, self.counts = {}, {}


def _fwd_torch_body(self, x):
    return F.linear(x, self.weight, self.bias)


def _fwd_compiling(self, x):
    if not torch.compiler.is_compiling():
        return F.linear(x, self.weight, self.bias)
    return F.linear(x, self.weight, self.bias)


def _fwd_paths(self, x):
    if self._gemmtune_paths.get(x.shape) is not None:
        return F.linear(x, self.weight, self.bias)
    return F.linear(x, self.weight, self.bias)


def _fwd_params(self, x):
    ps = self._parameters
    if "weight" in ps and "bias" in ps:
        return F.linear(x, ps["weight"], ps["bias"])
    return F.linear(x, self.weight, self.bias)


FORWARDS = {"fwd_torch_body": _fwd_torch_body, "fwd_compiling": _fwd_compiling, "fwd_paths": _fwd_paths,
            "fwd_params": _fwd_params}


def _reclassed(model, pick, cls_of):
    """A deep copy of ``model`` whose modules ``pick`` selects have their class assigned
    ``cls_of(module)``."""
    m = copy.deepcopy(model)
    for mod in m.modules():
        if pick(mod):
            mod.__class__ = cls_of(mod)
    return m


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen3-0.6b")
    ap.add_argument("--phase", default="decode_b1")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--regimes", default="default,disabled,frozen")
    ap.add_argument("--variants", default="eager,copy,patch,patch_conv",
                    help="of eager, copy, patch, patch_conv, copy_reclassed, conv_torchclass and the FORWARDS "
                    "(fwd_torch_body, fwd_compiling, fwd_paths, fwd_params), gt_class_torch_fwd, "
                    "torch_class_new_fwd; copy is always timed")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    cuda = a.device == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    res: dict = {"python": sys.version, "platform": platform.platform(), "torch": torch.__version__,
                 "model": a.model, "phase": a.phase, "gc_threshold": gc.get_threshold()}
    model = build_model(parse_model(a.model), dtype, a.device)
    ph = causal_phase(a.phase, model.config.vocab_size, a.device)
    res["objects_after_build"] = len(gc.get_objects())
    plain = copy.deepcopy(model)
    res["objects_after_copy"] = len(gc.get_objects())
    rec: dict = {"modes": {}}
    variants = make_variants(model, ["eager", "eager_patch"], lambda m: [ph.example(m)], rec,
                             {"tune_fn": lambda ps, **kw: {p.key: "aten" for p in ps}, "extra_m": (1,)})
    res["objects_after_patch"] = len(gc.get_objects())
    # patch leaves a layer whose every shape runs cuBLAS as torch's nn.Linear (runs_as_torch), so
    # "patch" differs from "copy" only by what patching attached; "patch_conv" converts those
    # layers too (convert_aten_layers=True): gemmtune's forwards, every eager path on F.linear,
    # which is what session 51's Qwen3 decode (591 of 591 eager paths on cuBLAS) ran.
    conv = copy.deepcopy(plain)
    gemmtune.patch(conv, dispatchers=dict(gemmtune.nn.dispatchers(variants["eager_patch"])), tune_missing=False,
                   convert_aten_layers=True)
    res["converted_layers"] = sum(1 for m in conv.modules() if hasattr(type(m), "_gemmtune_torch_class"))
    res["objects_after_conv"] = len(gc.get_objects())
    # "copy_reclassed": a copy whose nn.Linear layers had their class assigned to a subclass that
    # overrides nothing (what patch's in-place conversion does to a layer, without gemmtune's
    # forward); "conv_torchclass": patch_conv's layers with their class assigned back to torch's
    # (gemmtune's state stays, torch's forward runs). Together they split a converted model's
    # cost into the class assignment and the forward.
    # The FORWARDS: patch_conv's layers under a subclass of gemmtune's Linear whose forward is one
    # piece of gemmtune's fast path (nn.Linear.forward for an aten path), to find which piece costs.
    # And which half of fwd_torch_body costs: torch's own forward function under gemmtune's class
    # ("gt_class_torch_fwd"), or that body as a new function under torch's class ("torch_class_new_fwd").
    # One class per variant, shared by its layers: calls 4 and 5 of session 52 made one per layer
    # (113 classes for Llama-1B), itself a cost of ~2% that confounded what they compared.
    # Built only when asked for: each is a deep copy of the model on the GPU.
    linear, converted = (lambda m: type(m) is torch.nn.Linear), (lambda m: type(m) is gemmtune.nn.Linear)
    sub = type("ReclassedLinear", (torch.nn.Linear,), {})
    builders = {"eager": lambda: model, "copy": lambda: plain, "patch": lambda: variants["eager_patch"],
                "patch_conv": lambda: conv,
                "copy_reclassed": lambda: _reclassed(plain, linear, lambda m: sub),
                "conv_torchclass": lambda: _reclassed(conv, lambda m: hasattr(type(m), "_gemmtune_torch_class"),
                                                      lambda m: type(m)._gemmtune_torch_class())}
    classes = [(name, gemmtune.nn.Linear, fwd) for name, fwd in FORWARDS.items()]
    classes += [("gt_class_torch_fwd", gemmtune.nn.Linear, torch.nn.Linear.forward),
                ("torch_class_new_fwd", torch.nn.Linear, _fwd_torch_body)]
    for name, base, fwd in classes:
        cls = type(name, (base,), {"forward": fwd})
        builders[name] = lambda cls=cls: _reclassed(conv, converted, lambda m: cls)
    names = ["copy", *[v for v in a.variants.split(",") if v != "copy"]]
    unknown = [v for v in names if v not in builders]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; known: {', '.join(builders)}")
    fns = {k: builders[k]() for k in names}
    meter = GcMeter()
    gc.callbacks.append(meter)

    def charged(name, m):
        def step():
            meter.current = name
            try:
                ph.run(m)
            finally:
                meter.current = None
        return step

    with torch.no_grad():
        for m in fns.values():
            for _ in range(5):
                ph.run(m)
        paths: dict = {}
        for mod in conv.modules():
            for v in (mod.__dict__.get("_gemmtune_paths") or {}).values():
                paths[v] = paths.get(v, 0) + 1
        res["conv_eager_paths"] = paths  # after the warm-up: every layer's path for the step's shape
        print("patch_conv eager paths:", paths, "| converted layers:", res["converted_layers"], flush=True)
        for regime in a.regimes.split(","):
            gc.collect()
            if regime == "disabled":
                gc.disable()
            elif regime == "frozen":
                gc.freeze()
            meter.reset()
            t = time_interleaved({k: charged(k, m) for k, m in fns.items()}, rounds=a.rounds, min_round_ms=100.0)
            calls = {k: v["calls"] * (a.rounds + 1) for k, v in t.items()}  # + the sizing call, roughly
            r = {k: {"ms": v["ms"], "spread": v["spread"], "calls_per_round": v["calls"]} for k, v in t.items()}
            for k in fns:
                if k != "copy":
                    r[f"copy_over_{k}"] = paired_ratio(t["copy"]["rounds"], t[k]["rounds"])
            if "eager" in fns:
                r["eager_over_copy"] = paired_ratio(t["eager"]["rounds"], t["copy"]["rounds"])
            r["gc_us_per_step"] = {k: {str(g): round(s * 1e6 / calls[k], 2) for g, s in meter.seconds.get(k, {}).items()}
                                   for k in fns}
            r["gc_collections"] = {k: {str(g): n for g, n in meter.counts.get(k, {}).items()} for k in fns}
            r["frozen_objects"] = gc.get_freeze_count()
            res[regime] = r
            print(regime, json.dumps({k: v for k, v in r.items() if "_over_" in k or k == "gc_us_per_step"}),
                  {k: round(r[k]["ms"], 4) for k in fns}, flush=True)
            if regime == "disabled":
                gc.enable()
            elif regime == "frozen":
                gc.unfreeze()
    gc.callbacks.remove(meter)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
