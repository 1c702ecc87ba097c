"""Session 58 tool (for the GPU host; runs anywhere): where a patched Llama decode step's extra host time
goes, function by function. A 16-layer Llama (hidden F) is decoded at batch 1, plain and patched (every
layer converted, every decision cuBLAS: the memoized F.linear path), each under cProfile for N steps;
prints the functions whose calls or own time per step differ, and the torch function modes active inside
a layer's forward (a mode would turn each tensor attribute read into a Python dispatch).

On the CPU machine (session 58) the two steps made the same calls but for the Linear forwards (nn.Linear's
two Module.__getattr__ against gemmtune's is_compiling and dict.get) and cost the same; on the GPU host
call 4 measured the patched step 1.7 us a layer dearer. Run there next:

    python scripts/sessions/exp_step_profile.py --device cuda --dtype bfloat16 --features 2048 --steps 50
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import warnings

import torch

sys.path.insert(0, "scripts")
from diag_linear_host import plain_and_patched  # noqa: E402


def _per_step(prof: cProfile.Profile, steps: int) -> dict[str, tuple[float, float]]:
    st = pstats.Stats(prof)
    out = {}
    for (file, line, fn), (_, ncalls, tottime, _, _) in st.stats.items():
        where = file.split("site-packages/")[-1].split("src/")[-1]
        out[f"{where}:{line}:{fn}"] = (ncalls / steps, tottime / steps * 1e6)
    return out


def main() -> None:
    import transformers as tf

    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    f, dt, dev = a.features, getattr(torch, a.dtype), a.device
    ph, models = plain_and_patched(f, dt, dev)
    modes = []
    layer = models["patched"].model.layers[0].self_attn.q_proj
    hook = layer.register_forward_pre_hook(  # removed after the warm-up: a hook slows its layer's call
        lambda mod, args: modes.append([type(m).__name__ for m in torch.overrides._get_current_function_mode_stack()]))
    res = {}
    with torch.no_grad():
        for name, m in models.items():
            for _ in range(3):
                ph.run(m)
            if name == "patched":
                hook.remove()
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(a.steps):
                ph.run(m)
            if dev == "cuda":
                torch.cuda.synchronize()
            prof.disable()
            res[name] = _per_step(prof, a.steps)
    print(f"torch {torch.__version__}, transformers {tf.__version__}, python {sys.version.split()[0]}, {dev}")
    print("torch function modes inside a layer's forward:", modes[-1] if modes else "none seen")
    for name, r in res.items():
        print(f"{name}: {sum(c for c, _ in r.values()):.0f} calls, {sum(t for _, t in r.values()):.0f} us own time a step "
              "(profiled)")
    rows = []
    for key in set(res["plain"]) | set(res["patched"]):
        (c0, t0), (c1, t1) = res["plain"].get(key, (0, 0)), res["patched"].get(key, (0, 0))
        if abs(c1 - c0) > 0.5 or abs(t1 - t0) > 20:
            rows.append((t1 - t0, c1 - c0, key))
    print("patched minus plain, a step (own time us, calls):")
    for dt_us, dc, key in sorted(rows, key=lambda r: -abs(r[0]))[:30]:
        print(f"  {dt_us:+9.1f} us {dc:+8.1f} calls  {key}")


if __name__ == "__main__":
    main()
