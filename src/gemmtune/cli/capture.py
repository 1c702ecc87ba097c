"""``gemmtune capture``: record the GEMMs a model runs and write them as a suite CSV."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

from .common import column_text, model_dtype, nonneg_int, positive_int, refuse_empty, refuse_same_file, seed_int
from ..jsonio import check_file_target


def _load_factory(spec: str):
    """``package.module:function`` -> the function (a one-line ValueError when it is not there)."""
    import importlib

    mod_name, _, fn_name = spec.partition(":")
    if not mod_name or not fn_name:
        raise ValueError(f"--model {spec!r}: give a preset or module:function")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # a module of the working directory, as python -m finds it
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise ValueError(f"--model {spec!r}: cannot import {mod_name}: {e}") from None
    except Exception as e:  # noqa: BLE001 - the user's module failed as it ran: one line, as its function's failure
        raise _users_code_failed(spec, f"importing {mod_name} raised", e) from None
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise ValueError(f"--model {spec!r}: {mod_name} has no function {fn_name}")
    return fn


def _example_passes(spec: str, got) -> tuple:
    """(model, [inputs, ...]) from what a --model module:function returned. An example input is
    what ``gemmtune.capture`` takes: a tuple of positional arguments, a dict of keyword arguments
    (an HF model's ``input_ids=``) or one tensor; a list of them is one pass each. A dict, and a
    list of tensors or dicts, were refused here although the library takes them."""
    from collections.abc import Mapping

    import torch

    if not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], torch.nn.Module)):
        raise ValueError(f"--model {spec}: must return (model, example_inputs), got {type(got).__name__}")
    model, ex = got
    one = (torch.Tensor, tuple, Mapping)
    if isinstance(ex, one):
        return model, [ex]
    if isinstance(ex, list) and ex and all(isinstance(x, one) for x in ex):
        return model, ex  # several passes (e.g. prefill and decode sizes)
    raise ValueError(f"--model {spec}: example_inputs must be a tensor, a tuple of arguments, a dict of keyword "
                     f"arguments or a list of those (one per pass), got {type(ex).__name__}")


def _moved(x, device: str):
    """An example input (a tensor, a tuple of arguments, a dict of keyword arguments) with its
    tensors on ``device``; other values as they are."""
    from collections.abc import Mapping

    import torch

    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, Mapping):
        return {k: _moved(v, device) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_moved(v, device) for v in x)
    return x


def _users_code_failed(spec: str, what: str, e: Exception) -> ValueError:
    """One line for an exception raised by the user's own code (the module:function, or the
    model's forward under the capture), naming it and where it was raised, as for a config:
    model's failing forward: a RuntimeError was a traceback through gemmtune's capture, and a
    ValueError printed only its message, as if gemmtune had refused an option."""
    import traceback

    import torch

    from ..benchmodel.models import raised_at

    where = raised_at(e)
    # Raised inside torch (a shape error in a view): the last line of the user's own code too.
    libs = (str(Path(torch.__file__).parent) + os.sep, str(Path(__file__).parents[1]) + os.sep)
    frames = traceback.extract_tb(e.__traceback__)
    own = [f for f in frames if not f.filename.startswith(libs)]
    if own and own[-1] is not frames[-1]:
        where += f", called from {'/'.join(Path(own[-1].filename).parts[-2:])}:{own[-1].lineno}"
    return ValueError(f"--model {spec}: {what} ({type(e).__name__}: {e}, raised at {where})")


def _torch_device(text: str | None) -> str:
    """--device: where the model runs, a torch device ('cpu', 'cuda', 'cuda:1', 'meta'), checked
    before the model is built. The other commands' --device names a GPU model (h100) for the
    config spaces; given here, that gets a line saying so rather than torch's list of types."""
    import torch

    from ..device import _match

    if text is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if _match(text) is not None:
        raise ValueError(f"--device {text}: capture's --device is where the model runs (cpu, cuda, cuda:N); "
                         f"{text} names a GPU model, which tune and space take for their config spaces")
    try:
        dev = torch.device(text)
    except RuntimeError:
        raise ValueError(f"--device {text!r}: not a torch device (cpu, cuda, cuda:N, meta)") from None
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"--device {text}: no CUDA GPU is visible (use --device cpu)")
        if dev.index is not None and dev.index >= count:
            raise ValueError(f"--device {text}: {count} CUDA GPU(s) visible (cuda:0 to cuda:{count - 1})")
    elif dev.type not in ("cpu", "meta"):
        raise ValueError(f"--device {text}: capture runs models on cpu, cuda or meta, not {dev.type}")
    return text


def _available_bytes(device: str) -> int | None:
    """Memory free for a model on ``device``: the GPU's free memory, or the host's MemAvailable
    (Linux); None where it cannot be read."""
    import torch

    if device.startswith("cuda"):
        return int(torch.cuda.mem_get_info(torch.device(device))[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _shapes_only(spec):
    """``spec`` built for its shapes alone: a ``dir:`` model from its folder's config, with no
    weights read (a build on meta needs nothing more)."""
    return dataclasses.replace(spec, kind="config") if spec.kind == "dir" else spec


def _check_memory(entry: str, spec, device: str, build=None) -> None:
    """Refuse, before building it, a model whose weights do not fit on ``device``: the models are
    built in fp32 and then cast, so a model of P parameters needs 4P bytes at its peak. A larger
    one is killed by the kernel's OOM killer with no message of ours: ``hf:qwen3`` (transformers
    5.24's default config) needs 44.9 GiB, against 22.9 GiB free on the 24 GiB CPU machine. The
    size is read off a build on meta (no memory; part of that capture's 4 s)."""
    import torch

    from ..benchmodel.models import build_model

    # A dir: model is read into host memory first (from_pretrained), then moved to the device.
    where = [device] + (["cpu"] if spec.kind == "dir" and device != "cpu" else [])
    free = {d: _available_bytes(d) for d in where}
    if all(v is None for v in free.values()):
        return
    meta = (build or build_model)(_shapes_only(spec), torch.float32, "meta", positions=None)
    need = 4 * sum(p.numel() for p in meta.parameters())
    for d, avail in free.items():
        if avail is not None and need > avail:
            raise ValueError(f"{entry}: its weights take {need / 2**30:.1f} GiB in fp32 while it is built, and "
                             f"{d} has {avail / 2**30:.1f} GiB free; capture it with --device meta (shapes only: "
                             "the suite is the same)")


def cmd_capture(args) -> int:
    """Run a model under gemmtune.capture and write its GEMMs as a suite CSV (+ JSON)."""
    import time

    import torch

    from ..capture import capture, capture_causal_lm
    from ..problem import DTYPES, dtype_name

    def say(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    from ..benchmodel.models import SOURCES

    # A preset, or bench-model's config:PATH / dir:PATH / hf:MODEL_TYPE; anything else with a
    # colon is module:function.
    preset = ":" not in args.model or args.model.partition(":")[0] in SOURCES
    if not preset and any(v is not None for v in (args.batch, args.seq, args.decode_steps, args.dtype)):
        raise ValueError("--batch, --seq, --decode-steps and --dtype apply to the preset models; "
                         "a module:function builds its own model and inputs")
    device = _torch_device(args.device)
    # An empty --out passed check_file_target: the capture ran to its end, then ".: Device or
    # resource busy".
    refuse_empty(args, "out", "json")
    for opt, path in (("--out", args.out), ("--json", args.json)):
        if path:  # found before the capture, not after it
            check_file_target(path, opt)
    # the JSON is written second, over the suite CSV that the run says is there
    refuse_same_file("--out", args.out, [("--json", args.json)], "give them different paths")
    t0 = time.monotonic()
    if preset:
        from ..benchmodel.models import (CAUSAL, USER_FORMS, ModelError, _config, build_encoder, build_model,
                                         max_positions, parse_model, user_config)

        try:
            spec = parse_model(args.model)  # config:/dir:/hf: entries: its message names what is wrong
        except ModelError:
            if ":" in args.model:
                raise
            raise ValueError(f"unknown model {args.model!r}; presets: {', '.join(CAUSAL)}, or {USER_FORMS}, "
                             "or module:function") from None
        if spec.kind not in ("named", *SOURCES):
            raise ValueError(f"{args.model}: capture runs causal LMs ({', '.join(CAUSAL)}, or {USER_FORMS}); "
                             "for another model give a module:function that returns it and its inputs")
        try:
            import transformers  # noqa: F401
        except ImportError:
            raise ValueError("the preset models need HF transformers: pip install transformers") from None
        dtype = DTYPES[model_dtype(args.dtype or "bfloat16")]  # fp8 refused: no model runs in it
        batch, seq = args.batch or 1, args.seq or 32
        steps = 1 if args.decode_steps is None else args.decode_steps
        # A model_type or config that names no causal LM: said before "building". positions=None:
        # bench-model's greedy check needs 48 positions, which refused a config of 32 for --seq 8;
        # capture needs those of its own passes, checked here: a prefill past a learned position
        # table (GPT-2's n_positions) was an IndexError traceback, and on meta a suite of shapes
        # the model cannot run.
        # A user's text encoder (BERT's kind, as bench-model takes one) runs one forward of --batch
        # sequences of --seq tokens: it has no decode step.
        cfg, role = user_config(spec, positions=None) if spec.user else (_config(spec.entry), "causal")
        room = max_positions(cfg)
        if role == "encoder":
            if args.decode_steps:
                raise ValueError(f"{args.model}: model_type {cfg.model_type} is a text encoder, which runs no decode "
                                 "step: drop --decode-steps (its capture is one forward of --batch x --seq tokens)")
            steps = 0
        if room is not None and seq + steps > room:
            raise ValueError(f"{args.model}: --seq {seq}" + (f" and --decode-steps {steps} need" if steps else " needs")
                             + f" {seq + steps} positions, the config declares {room}")
        build = ((lambda sp, dt, dev, **kw: build_encoder(sp, dt, dev, seed=kw.get("seed", 0)))
                 if role == "encoder" else build_model)
        if device == "meta":
            spec = _shapes_only(spec)
        else:
            _check_memory(args.model, spec, device, build)
        weights = "its folder's weights" if spec.kind == "dir" else "random weights from its config"
        say(f"building {args.model} ({dtype_name(dtype)}, {device}, {weights})")
        try:
            model = build(spec, dtype, device, seed=args.seed, positions=None)
        except RuntimeError as e:  # a user's model that cannot be built: one line, no traceback
            raise ValueError(str(e)) from None
        if role == "encoder":
            g = torch.Generator().manual_seed(args.seed)
            ids = torch.randint(0, model.get_input_embeddings().weight.shape[0], (batch, seq), generator=g)
            # No padding, so no mask: on meta, transformers' mask code reads a value (.item()) that a
            # meta tensor does not have, and without one it attends to every token, as a full mask does.
            x = {"input_ids": ids.to(device)}
            if args.fuse:
                from ..fuse import fuse_linears

                _said_fused(say, fuse_linears(model, inputs=[x]))
            say(f"running {args.model}: one forward of {batch} x {seq} tokens on {device}")
            try:
                cap = capture(model, inputs=[x])
            except Exception as e:  # noqa: BLE001 - a user's model that fails in its own forward: one line
                raise _users_code_failed(args.model, "its forward failed during the capture", e) from None
        elif args.fuse:
            from ..fuse import fuse_linears

            ids = torch.zeros(batch, min(seq, 4), dtype=torch.long, device=device)
            _said_fused(say, fuse_linears(model, fn=lambda: model(input_ids=ids)))
        if role == "causal":
            try:
                cap = capture_causal_lm(model, batch=batch, seq=seq, decode_steps=steps, seed=args.seed,
                                        progress=say)
            except Exception as e:  # noqa: BLE001 - a user's model that fails in its own forward: one line
                if not spec.user:
                    raise  # a named preset is gemmtune's to run: its failure is a bug, with its traceback
                from ..benchmodel.models import raised_at
                # (a Mamba raised IndexError in transformers' cache code before capture.new_cache)
                raise ValueError(f"{args.model}: its forward failed during the capture ({type(e).__name__}: {e}, "
                                 f"raised at {raised_at(e)}); capture runs causal LMs that take transformers' "
                                 "KV cache (for another model give a module:function that returns it and its "
                                 "inputs)") from None
    else:
        factory = _load_factory(args.model)
        try:
            got = factory()
        except Exception as e:  # noqa: BLE001 - the user's function: one line, not a traceback
            raise _users_code_failed(args.model, "the function raised", e) from None
        model, passes = _example_passes(args.model, got)
        model = model.to(device)
        passes = [_moved(p, device) for p in passes]
        say(f"running {args.model}: {len(passes)} pass(es) on {device}")
        if args.fuse:
            from ..fuse import fuse_linears

            _said_fused(say, fuse_linears(model, inputs=passes))
        try:
            cap = capture(model, inputs=passes)
        except Exception as e:  # noqa: BLE001 - the user's model failed in its own forward: one line
            raise _users_code_failed(args.model, "its forward failed during the capture", e) from None
    say(f"captured in {time.monotonic() - t0:.1f} s: {cap.summary()}")
    if not any(r.tunable for r in cap.records):
        raise ValueError(f"{args.model} ran no GEMM gemmtune tunes ({cap.summary()}); nothing written")
    cap.write_suite(args.out, group=args.group or (args.model if preset else "captured"))
    print(f"{args.out}: {len(cap.problems())} problems (gemmtune tune --suite {args.out})")
    if args.json:
        cap.write_json(args.json)
        print(f"{args.json}: every record, untunable ones (baddbmm, other dtypes) included")
    return 0


def _said_fused(say, groups) -> None:
    from ..fuse import kinds

    found = kinds(g.members for g in groups)
    say(f"fused {len(groups)} group(s) of sibling layers" + (": " + ", ".join(f"{k} x{c}" for k, c in found.items())
                                                            if found else " (none found)"))


def add_parsers(sub) -> None:
    from ..benchmodel.models import CAUSAL, USER_FORMS

    p = sub.add_parser("capture", help="record the GEMMs a model runs and write them as a suite CSV for tune --suite")
    p.add_argument("--model", required=True, metavar="NAME|MODULE:FUNCTION",
                   help=f"a preset HF causal LM built from its config with random weights, no download "
                   f"({', '.join(CAUSAL)}); a causal LM or a text encoder (BERT's kind: one forward of --batch x --seq "
                   f"tokens) as bench-model takes one ({USER_FORMS}); or "
                   "module:function returning (model, example_inputs): a tuple of arguments, a dict of keyword "
                   "arguments or a tensor, or a list of them for several passes. With --device meta, a large model's shapes need no memory")
    p.add_argument("--batch", type=positive_int, metavar="B", help="sequences per pass (presets; default: 1)")
    p.add_argument("--seq", type=positive_int, metavar="S", help="prompt tokens of the prefill (presets; default: 32)")
    p.add_argument("--decode-steps", type=nonneg_int, metavar="N",
                   help="one-token steps after the prefill, so each layer's M range reaches B (presets; default: 1)")
    p.add_argument("--dtype", help="model dtype (presets; default: bfloat16)")
    p.add_argument("--device", help="where the model runs, a torch device: cpu, cuda, cuda:N or meta (shapes only, "
                   "no arithmetic or memory; the products of attention's math path there, which a GPU's fused "
                   "attention never runs, are left out and counted; default: cuda when a GPU is visible, else cpu)")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of the weights and tokens")
    p.add_argument("--out", default="gemmtune-shapes.csv", help="suite CSV to write (replaced if it exists)")
    p.add_argument("--json", metavar="PATH", help="also write every record (counts, modules, untunable GEMMs) as JSON")
    p.add_argument("--group", type=column_text, help="the suite's group column (default: the preset's name, else 'captured')")
    p.add_argument("--fuse", action="store_true",
                   help="fuse sibling Linears first (gemmtune.fuse_linears: q/k/v, gate/up as one GEMM each), so the "
                        "suite holds the fused shapes; serve with patch(..., fuse=True) (save_patched(path, model) records the "
                        "groups for load_patched)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(fn=cmd_capture)
