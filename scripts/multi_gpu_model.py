"""A causal LM split over two GPUs (layers on cuda:0 and cuda:1, cuda:0 current), patched with
gemmtune and checked against its own unpatched output. GPU only, needs 2 GPUs and transformers.

    python scripts/multi_gpu_model.py [OUT.json]

The model: a Llama-style config with random seeded weights (hidden 1024, 4 layers, an untied
head of 32001 words, so the head takes an unaligned-N path), bf16. Its embedding and first two
layers stay on cuda:0; the last two layers, the final norm and the head go to cuda:1, each
layer's input moved there by a forward pre-hook (what accelerate's ``device_map`` hooks do).
``gemmtune.patch(..., example_inputs, fast=True, eager_policy="tuned")`` tunes every layer shape
in one call and converts every Linear, so each kernel gemmtune picked runs on the layer's own
GPU. Prefill (2 x 64) and decode (4 x 1) logits are compared with the unpatched model's
(relative Frobenius error), and the choices serving each GPU's layers are listed.
"""

from __future__ import annotations

import json
import sys
import warnings

import torch


def split(model, layers_on_1: range, dev: torch.device) -> None:
    """Move the decoder layers ``layers_on_1``, the final norm and the head to ``dev``, with a
    pre-hook that moves each one's tensor arguments (hidden states, rotary cos/sin, mask) there."""
    def mv(t):
        if isinstance(t, torch.Tensor):
            return t.to(dev)
        return tuple(mv(x) for x in t) if isinstance(t, tuple) else t

    def to_dev(module, args, kwargs):
        return tuple(mv(a) for a in args), {k: mv(v) for k, v in kwargs.items()}
    for i in layers_on_1:
        model.model.layers[i].to(dev).register_forward_pre_hook(to_dev, with_kwargs=True)
    model.model.norm.to(dev).register_forward_pre_hook(to_dev, with_kwargs=True)
    model.lm_head.to(dev).register_forward_pre_hook(to_dev, with_kwargs=True)


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().cpu(), b.double().cpu()
    return float((a - b).norm() / b.norm())


def main() -> int:
    import transformers as tf

    import gemmtune
    from gemmtune.nn import dispatchers

    if torch.cuda.device_count() < 2:
        print("needs 2 GPUs")
        return 2
    cfg = tf.LlamaConfig(vocab_size=32001, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                         num_attention_heads=16, num_key_value_heads=4, head_dim=64, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="sdpa")
    model = model.to(torch.bfloat16).to("cuda:0").eval()
    split(model, range(2, 4), torch.device("cuda", 1))
    torch.cuda.set_device(0)
    g = torch.Generator(device="cuda:0").manual_seed(1)
    prefill = torch.randint(0, cfg.vocab_size, (2, 64), device="cuda:0", generator=g)
    decode = torch.randint(0, cfg.vocab_size, (4, 1), device="cuda:0", generator=g)
    with torch.no_grad():
        ref = {"prefill": model(prefill).logits, "decode": model(decode).logits}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gemmtune.patch(model, example_inputs=[(prefill,), (decode,)], fast=True, eager_policy="tuned",
                           convert_aten_layers=True)
            got = {name: model(x).logits for name, x in (("prefill", prefill), ("decode", decode))}
            again = {name: model(x).logits for name, x in (("prefill", prefill), ("decode", decode))}
    assert torch.cuda.current_device() == 0
    report = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "transformers": tf.__version__,
              "errors": {}, "choices": {}, "warnings": sorted({str(w.message)[:200] for w in caught})}
    for name in ref:
        report["errors"][name] = [rel(got[name], ref[name]), rel(again[name], ref[name])]
    for mod_name, mod in model.named_modules():
        d = getattr(mod, "dispatcher", None)
        if d is None or not isinstance(mod, torch.nn.Linear):
            continue
        dev = str(mod.weight.device)
        for shape, dec in d.decisions.items():
            report["choices"].setdefault(dev, {})[f"{mod_name.split('.')[-1]} {shape}"] = dec.choice.id
    report["dispatchers"] = len(dispatchers(model))
    ok = all(e < 2e-2 for errs in report["errors"].values() for e in errs)
    report["ok"] = ok
    print(json.dumps(report, indent=1))
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(report, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
