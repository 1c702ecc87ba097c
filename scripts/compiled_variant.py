"""One compiled variant of a model's phase, as the experiment scripts measure it (exp_gemv_handback,
exp_pdl_model): its first calls run and timed, the step captured in a CUDA graph (not on the
CPU), checked against a reference output (logits relative error, argmax agreement) and profiled.
Results go into ``rec``; a failure is recorded there, never raised, so one variant failing does
not lose the others."""
from __future__ import annotations

import time

from gemmtune import benchmodel
from gemmtune.benchmodel.phases import rel_err


def run_variant(v, phase, want, rec: dict, name: str, *, dry: bool):
    """The CUDA-graph replay of ``phase.run(v)`` (None in a dry run, or when it failed), with
    ``rec`` filled: first_calls_s, logits_rel_err, argmax_agree, replay_ok and a profile (or error)."""
    t0 = time.perf_counter()
    try:
        if dry:
            got, replay = phase.run(v).float(), None
        else:
            replay, info = benchmodel.capture(lambda: phase.run(v), keep=lambda: phase.state(v))
            rec["replay_ok"] = bool(info["replay_ok"])
            got = replay().float()
    except Exception as e:  # noqa: BLE001 - recorded: one variant failing must not lose the others
        rec["error"] = f"{type(e).__name__}: {e}"[:400]
        print(f"{name}: {rec['error']}", flush=True)
        return None
    rec["first_calls_s"] = time.perf_counter() - t0
    rec["logits_rel_err"] = rel_err(got, want)
    rec["argmax_agree"] = float((got.argmax(-1) == want.argmax(-1)).float().mean())
    if replay is not None:
        from gemmtune.benchmodel.profile import profile_replay
        prof = profile_replay(replay, 20)
        rec["profile"] = {"us": prof["us"], "gemm_us": prof["gemm_us"], "kernels": prof["kernels"],
                          # gemmtune's kernels and cuBLAS's: the GEMMs that are not Inductor's own Triton kernels
                          "gemmtune_or_cublas_gemm_us": sum(k["us"] for k in prof["top"] if k["class"] == "gemm"
                                                            and not k["name"].startswith("triton_")),
                          "top": prof["top"][:30]}
    print(f"{name}: first calls {rec['first_calls_s']:.1f} s, logits rel err {rec['logits_rel_err']:.2e}, "
          f"argmax {rec['argmax_agree']:.3f}"
          + (f", step {rec['profile']['us']:.1f} us profiled, GEMMs {rec['profile']['gemm_us']:.1f} us"
             if "profile" in rec else ""), flush=True)
    return replay
