"""The closures a dispatcher's cached calls run: allocate the output and launch, through a prepared
launcher on a GPU when one checks out against Triton's ordinary launch (a mixin of Dispatcher)."""

from __future__ import annotations

import functools
import math
import warnings
from typing import Callable

import torch

from .. import kernels
from ..configs import Choice
from ..epilogue import EpilogueArgs, apply_
from .common import ATEN, _any_autocast, _locked


def on_device(run: Callable, device: torch.device, current: Callable[[], int] | None = None) -> Callable:
    """``run`` made to launch on ``device`` (a CUDA device with its index) whatever the current
    CUDA device is.

    Triton launches on the current device's stream, and a relaunch runs a kernel loaded on the
    device it was compiled for. A model spread over GPUs (``device_map="auto"``) calls layers on
    cuda:1 while cuda:0 is current: unguarded, triton refused every such launch of a Triton choice
    on 2 x H100 ("Pointer argument ... cannot be accessed from Triton", session 25). The check
    costs one C call where the device is already current (0.4-1.1 us a cached call, measured)."""
    if current is None:
        current = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)
    idx = device.index

    def run_on(*args):
        if current() == idx:
            return run(*args)
        with torch.cuda.device(idx):
            return run(*args)
    run_on.__wrapped__ = run
    return run_on


class Launching:
    """Dispatcher's launch closures (``self._workspace``, ``self.torch_dtype``, ``self._interp``)."""

    def _make_run(self, choice: Choice, m: int, n: int, k: int, device: torch.device,
                  a: torch.Tensor | None = None, b: torch.Tensor | None = None,
                  epilogue: EpilogueArgs | None = None, batch: int | None = None) -> Callable:
        """The prebuilt closure a cached call runs, on ``device`` whatever device is current
        (``on_device``; built there too, since preparing a launch runs the kernel).

        ``_build_run`` makes it; torch's own ops (an aten choice's ``torch.mm``) follow their
        operands' device and are returned unwrapped."""
        if device.type != "cuda":
            return self._build_run(choice, m, n, k, device, a, b, epilogue, batch)
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        with torch.cuda.device(device):
            run = self._build_run(choice, m, n, k, device, a, b, epilogue, batch)
        return run if run in (torch.mm, torch.bmm) else on_device(run, device)

    def _build_run(self, choice: Choice, m: int, n: int, k: int, device: torch.device,
                   a: torch.Tensor | None = None, b: torch.Tensor | None = None,
                   epilogue: EpilogueArgs | None = None, batch: int | None = None) -> Callable:
        """The closure itself: allocate the output, launch.

        On a GPU, Triton choices (``pad+`` ones included) launch through a prepared
        launcher (``kernels.prepare_choice``) that skips Triton's per-call argument
        binding, while the operands keep the strides and alignment of the first call
        (``a``, ``b``); anything else takes the ordinary launch. With an ``epilogue``
        (the first call's) the closure is ``run(a, b, bias, residual)``."""
        if epilogue is not None:
            return self._make_fused_run(choice, m, n, k, device, a, b, epilogue)
        shape, dt, empty = (m, n) if batch is None else (batch, m, n), self.torch_dtype, torch.empty
        if m == 0 or n == 0 or batch == 0:
            return lambda a, b: empty(shape, dtype=dt, device=device)
        if k == 0:
            return lambda a, b: torch.zeros(shape, dtype=dt, device=device)
        if choice == ATEN:
            op = torch.mm if batch is None else torch.bmm  # allocates its own output; nothing else

            def run_aten(a, b):
                if _any_autocast():
                    # torch.mm follows autocast (bf16 out of fp32 operands, at bf16 precision), the
                    # other choices keep the operands' dtype: a dispatcher's output dtype depended on
                    # the choice of the shape (session 45's CPU hunt). Off only inside this call.
                    with torch.autocast(a.device.type, enabled=False):
                        return op(a, b)
                return op(a, b)
            return run_aten
        if choice.pad:
            launch = functools.partial(kernels.run_choice_unchecked, choice, allow_tf32=False,
                                       workspace=self._workspace)
        else:
            launch = functools.partial(kernels.get(choice.family).run, cfg=choice.config,
                                       allow_tf32=False, workspace=self._workspace)
        if self._interp(device) and choice.family in kernels.TRITON_FAMILIES:
            launch = _locked(launch)
        launch = self._or_cublas(choice, launch)
        prepared = self._prepare(choice, a, b, shape) if a is not None and device.type == "cuda" else None
        if prepared is not None:
            matches, fast = prepared

            def run(a, b):
                out = empty(shape, dtype=dt, device=device)
                if matches(a, b):
                    fast(a, b, out)
                else:
                    launch(a, b, out)
                return out
            return run

        def run(a, b):
            out = empty(shape, dtype=dt, device=device)
            launch(a, b, out)
            return out
        return run

    def _make_fused_run(self, choice: Choice, m: int, n: int, k: int, device: torch.device,
                        a: torch.Tensor | None, b: torch.Tensor | None, epilogue: EpilogueArgs) -> Callable:
        """``_make_run`` for calls with an epilogue: ``run(a, b, bias, residual)``, whose parts
        (``epilogue.spec``) are fixed by the cache key; every family, aten included, fuses it."""
        shape, dt, empty, spec = (m, n), self.torch_dtype, torch.empty, epilogue.spec
        if m == 0 or n == 0:
            return lambda a, b, bias, residual: empty(shape, dtype=dt, device=device)
        if k == 0:  # act(0 + bias) + residual: no product to fuse into
            return lambda a, b, bias, residual: apply_(torch.zeros(shape, dtype=dt, device=device),
                                                       EpilogueArgs(spec, bias, residual))
        if choice.pad:
            launch = functools.partial(kernels.run_choice_unchecked, choice, allow_tf32=False, workspace=self._workspace)
        else:
            launch = functools.partial(kernels.get(choice.family).run, cfg=choice.config,
                                       allow_tf32=False, workspace=self._workspace)
        if self._interp(device) and choice.family in kernels.TRITON_FAMILIES:
            launch = _locked(launch)
        launch = self._or_cublas(choice, launch)
        prepared = self._prepare(choice, a, b, shape, epilogue) if a is not None and device.type == "cuda" else None
        if prepared is not None:
            matches, fast = prepared

            def run(a, b, bias, residual):
                out = empty(shape, dtype=dt, device=device)
                e = EpilogueArgs(spec, bias, residual)
                if matches(a, b, epilogue=e):
                    fast(a, b, out, epilogue=e)
                else:
                    launch(a, b, out, epilogue=e)
                return out
            return run

        def run(a, b, bias, residual):
            out = empty(shape, dtype=dt, device=device)
            launch(a, b, out, epilogue=EpilogueArgs(spec, bias, residual))
            return out
        return run

    def _or_cublas(self, choice: Choice, launch: Callable) -> Callable:
        """``launch``, or where ``choice`` can refuse a call's operands (``kernels.operands_reason``:
        a copy-free persistent_tma choice, whose TMA needs 16-byte aligned bases and strides) a
        launch that serves such a call with cuBLAS (``torch.mm`` into ``out``, the epilogue applied
        as for an aten choice) and says so once. A cached call of a shape meets operands of other
        strides or alignment than the shape's first call when, say, a view of an odd offset comes
        in; before, it raised from deep in the persistent kernel's launch."""
        if not kernels.may_refuse_operands(choice):
            return launch

        def launch_or_cublas(a, b, out, **kw):
            why = kernels.operands_reason(choice, a, b)
            if why is None:
                return launch(a, b, out, **kw)
            if not getattr(self, "_warned_refused", False):
                self._warned_refused = True
                warnings.warn(f"gemmtune: {choice.id} cannot read these operands ({why}): such calls run "
                              "torch.mm (cuBLAS)", RuntimeWarning, stacklevel=4)
            kernels.run_choice_unchecked(ATEN, a, b, out, workspace=self._workspace, epilogue=kw.get("epilogue"))
        return launch_or_cublas

    def _prepare(self, choice: Choice, a, b, shape, epilogue: EpilogueArgs | None = None):
        """(matches, launch) of a prepared launcher for ``choice`` at this problem, checked
        once against Triton's ordinary launch on these very operands; None when the family
        has none, or when the check fails (then the ordinary launch serves, and we say so).
        Both take the ``epilogue`` as a keyword."""
        try:
            want = torch.empty(shape, dtype=self.torch_dtype, device=a.device)
            got = kernels.prepare_choice(choice, a, b, want, allow_tf32=False, workspace=self._workspace,
                                         epilogue=epilogue)
            if got is None:
                return None
            matches, fast = got
            out = torch.full(shape, math.nan, dtype=self.torch_dtype, device=a.device)
            fast(a, b, out, epilogue=epilogue)
            torch.cuda.synchronize(a.device)
            # Atomic reductions (splitk's and skinny's) add in a varying order.
            det = getattr(choice.config, "deterministic", True)
            same = torch.equal(out, want) if det else bool(torch.allclose(out.float(), want.float(),
                                                                             rtol=2e-2, atol=2e-2))
            if same and matches(a, b, epilogue=epilogue):
                return matches, fast
            reason = "its output differed from Triton's ordinary launch"
        except Exception as e:  # a launcher this triton does not support: the ordinary path serves
            reason = f"{type(e).__name__}: {e}"[:300]
        warnings.warn(f"gemmtune: prepared launch of {choice.id} not used ({reason}); "
                      "launching through Triton's ordinary path", RuntimeWarning, stacklevel=4)
        return None
