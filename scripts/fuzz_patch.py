"""Random small models through ``gemmtune.patch`` as a user serves one: is every output still
right, after a save / load in the same process and from a CUDA graph? Meant for a GPU.

    python scripts/fuzz_patch.py [--n 8] [--seed 45] [--out DIR]

Each model (seeded) is a block a transformer layer could be: an input Linear, then two sibling
Linears that read one tensor (q/k-like; ``fuse=True`` makes them one GEMM on half the models),
an activation (GELU, SiLU or ReLU), an output Linear and a residual add. Every size is drawn
log-uniform in 1..4096, a third of them left odd (primes, ragged K); each Linear has a bias or
not; dtype bf16 (half the models), fp16 or fp32. Two example passes with token counts drawn from
1..2048 (one of them 3-D, batch x tokens) are tuned in one ``patch(..., fast=True)`` call.

Checks, each on fresh inputs at the seen token counts, at 1, and at a count neither pass ran:
- the patched model's error against the same model run in fp64 is at most ``SLACK`` times that
  of torch's own forward in the same dtype, plus a per-dtype floor (an error torch does not make
  fails, a rounding difference does not);
- ``save_patched`` then ``load_patched`` on a fresh copy chooses the same kernels, and its output
  passes the same check (bitwise equality is recorded, not required: atomic split-K adds in a
  varying order, and a layer's first-call measurement may keep F.linear in one copy only);
- the patched model captured in a CUDA graph (after its first-call measurements) replays new
  data to an output that passes the check;
- with ``--compile``, ``torch.compile`` of the patched model (static at a seen count, then
  ``dynamic=True`` over the others) passes it too.
On a CPU (``TRITON_INTERPRET=1``, a small ``--max-size``) the graph check is skipped.
Writes fuzz_patch.json under ``--out``; exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import random
import sys
import tempfile
import time
import warnings

import torch

SLACK = 4.0  # patched error <= SLACK x torch's own error + FLOOR (each against fp64)
# fp32's floor is far below TF32's error (~1e-3): a kernel that used TF32 without
# torch.backends.cuda.matmul.allow_tf32 fails
FLOOR = {torch.bfloat16: 2e-2, torch.float16: 2e-3, torch.float32: 1e-5}
ACTS = {"gelu": torch.nn.GELU(), "silu": torch.nn.SiLU(), "relu": torch.nn.ReLU()}


class _Skip(Exception):
    pass


def size(rng: random.Random, top: int = 4096) -> int:
    x = int(round(math.exp(rng.uniform(0, math.log(top)))))
    return max(8, x - x % 64) if rng.random() < 2 / 3 else max(1, x)


class Block(torch.nn.Module):
    def __init__(self, rng: random.Random, d: int, h: int, act: str):
        super().__init__()
        b = lambda: rng.random() < 0.5  # noqa: E731
        self.inp = torch.nn.Linear(d, d, bias=b())
        self.q = torch.nn.Linear(d, h, bias=b())
        self.k = torch.nn.Linear(d, h, bias=b())
        self.act = ACTS[act]
        self.out = torch.nn.Linear(h, d, bias=b())

    def forward(self, x):
        y = self.inp(x)
        return x + self.out(self.act(self.q(y)) * self.k(y))


def err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--seed", type=int, default=45)
    ap.add_argument("--max-size", type=int, default=4096, help="largest layer size drawn")
    ap.add_argument("--compile", action="store_true", help="also check torch.compile of the patched model")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)
    dev = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU: TRITON_INTERPRET=1, small --max-size

    import gemmtune

    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)
    rows, bad = [], []
    for i in range(args.n):
        d, h = size(rng, args.max_size), size(rng, args.max_size)
        dtype = rng.choice([torch.bfloat16, torch.bfloat16, torch.float16, torch.float32])
        act, fuse = rng.choice(sorted(ACTS)), rng.random() < 0.5
        top = min(2048, args.max_size)
        m1, m2 = size(rng, top), size(rng, top)
        batch = rng.choice([2, 3, 4])
        m_new = next(m for m in (size(rng, top) for _ in range(100)) if m not in (m1, m2 * batch, 1))
        torch.manual_seed(args.seed * 1000 + i)
        model = Block(rng, d, h, act).to(dev, dtype).eval()
        ref64 = copy.deepcopy(model).double()
        plain = copy.deepcopy(model)
        row = {"d": d, "h": h, "dtype": str(dtype), "act": act, "fuse": fuse, "m": [m1, [batch, m2]],
               "m_new": m_new, "checks": {}}
        rnd = lambda *s: torch.randn(*s, d, device=dev, dtype=dtype)  # noqa: E731
        t0 = time.time()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                gemmtune.patch(model, example_inputs=[(rnd(m1),), (rnd(batch, m2),)], fast=True, fuse=fuse,
                               progress=False)
        except Exception as e:  # noqa: BLE001 - recorded: the point is to find these
            bad.append(f"model {i}: patch raised {type(e).__name__}: {str(e)[:300]}")
            row["checks"]["patch"] = f"{type(e).__name__}: {str(e)[:300]}"
            rows.append(row)
            continue
        row["tune_s"] = round(time.time() - t0, 1)
        row["layers"] = {n: type(mod).__name__ for n, mod in model.named_modules() if n}
        def judge(label, got, x, **extra):
            # against fp64: a bitwise comparison would fail on atomic split-K (its order of adds
            # varies) and where a loaded layer's first-call measurement kept F.linear instead
            e_p, e_t = err(got, ref64(x.double())), err(plain(x), ref64(x.double()))
            ok = e_p <= SLACK * e_t + FLOOR[dtype]
            row["checks"][label] = {"ok": ok, "err": e_p, "torch_err": e_t, **extra}
            if not ok:
                bad.append(f"model {i} {label} {tuple(x.shape)}: error {e_p:.3g} against torch's {e_t:.3g}")

        def failed(label, e):
            row["checks"][label] = f"{type(e).__name__}: {str(e)[:300]}"
            bad.append(f"model {i} {label}: {row['checks'][label]}")

        with torch.no_grad():
            for label, shape in (("seen", (m1,)), ("seen 3-D", (batch, m2)), ("one", (1,)), ("new", (m_new,))):
                x = rnd(*shape)
                try:
                    judge(label, model(x), x)
                except Exception as e:  # noqa: BLE001 - recorded: the point is to find these
                    failed(label, e)
            # save / load into a fresh copy of the unpatched model: the same choices, right outputs
            try:
                with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    path = os.path.join(tmp, f"m{i}.json")
                    gemmtune.save_patched(path, model)
                    again = gemmtune.load_patched(copy.deepcopy(plain), path)
                    hints = lambda mod: {k: [str(h.choice) for h in v.hint_choices]  # noqa: E731
                                         for k, v in gemmtune.nn.dispatchers(mod).items()}
                    if hints(again) != hints(model):
                        bad.append(f"model {i}: load_patched's choices {hints(again)} differ from {hints(model)}")
                    x = rnd(m1)
                    got = again(x)
                    judge("load_patched", got, x, bitwise=torch.equal(got, model(x)))
            except Exception as e:  # noqa: BLE001
                failed("load_patched", e)
            # a CUDA graph of the patched model at a seen count (its first calls already measured)
            try:
                if dev != "cuda":
                    raise _Skip
                static = rnd(m1)
                model(static)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    out = model(static)
                static.copy_(rnd(m1))
                g.replay()
                torch.cuda.synchronize()
                judge("cuda_graph", out, static, bitwise=torch.equal(out, model(static)))
            except _Skip:
                row["checks"]["cuda_graph"] = "skipped: no GPU"
            except Exception as e:  # noqa: BLE001
                failed("cuda_graph", e)
            # torch.compile of the patched model: the custom op (and Inductor's epilogue fusion
            # around it), static at a seen count, dynamic over the other counts
            for dyn in (False, True) if args.compile else ():
                label = f"compile dynamic={dyn}"
                try:
                    torch._dynamo.reset()
                    cm = torch.compile(model, dynamic=dyn)
                    for shape in ((m1,), (batch, m2), (m_new,)) if dyn else ((m1,),):
                        x = rnd(*shape)
                        judge(f"{label} {shape}", cm(x), x)
                except Exception as e:  # noqa: BLE001
                    failed(label, e)
        # what each dispatcher serves, by shape: a fuzz that only ever ran cuBLAS tested little
        row["decisions"] = {str(key): {"hints": [str(h.choice) for h in disp.hint_choices],
                                       "served": {str(sz): str(dec.choice) for sz, dec in disp.decisions.items()}}
                            for key, disp in gemmtune.nn.dispatchers(model).items()}
        rows.append(row)
        print(json.dumps(row), flush=True)
    summary = {"gpu": torch.cuda.get_device_name() if dev == "cuda" else "cpu", "torch": torch.__version__,
               "n": len(rows), "bad": bad}
    print(json.dumps(summary, indent=1))
    with open(os.path.join(args.out, "fuzz_patch.json"), "w") as f:
        json.dump({"summary": summary, "rows": rows}, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
