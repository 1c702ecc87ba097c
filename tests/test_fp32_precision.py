"""fp32 with TF32 off: the Triton families multiply as 3xTF32 by default (gemmtune.precision).

On the CPU the interpreter computes an fp32 tl.dot the same way whatever its input_precision, so
these tests check the setting, its plumbing into every launch, its errors and the Inductor export's
refusal; the GPU tests check the tensor-core instructions, the accuracy against fp64 and cuBLAS's,
and non-finite inputs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import gemmtune
from gemmtune import precision
from gemmtune.configs import Choice, SplitKConfig, TileConfig
from gemmtune.inductor_export import choice_config
from gemmtune.kernels.base import Unsupported
from gemmtune.kernels.tiled import input_precision
from gemmtune.problem import Problem

SRC = str(Path(__file__).resolve().parents[1] / "src")
ON_GPU = torch.cuda.is_available()


# The tests below that need the setting read by a fresh process: their snippets run in one
# subprocess that imports torch once (most of a subprocess's ~5 s of CPU) and then forks a child
# per snippet, before gemmtune or triton is imported; each child sets its environment, changes
# to its folder and runs its snippet (or `python -m gemmtune.cli` through runpy) as a process
# started with that environment would, its exit status, stdout and stderr kept apart.
_FORK_SERVER = r"""
import json, os, runpy, sys, tempfile, traceback
import torch
assert not [m for m in ("gemmtune", "triton") if m in sys.modules], "imported before the fork"
out = {}
for name, job in json.loads(sys.argv[1]).items():
    with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as e:
        pid = os.fork()
        if pid == 0:
            rc = 1
            try:
                os.dup2(o.fileno(), 1)
                os.dup2(e.fileno(), 2)
                os.environ.update(job["env"])
                os.chdir(job["cwd"])
                if "module" in job:
                    sys.argv = [job["module"], *job["argv"]]
                    runpy.run_module(job["module"], run_name="__main__", alter_sys=True)
                else:
                    exec(compile(job["code"], "<string>", "exec"), {"__name__": "__main__"})
                rc = 0
            except SystemExit as x:
                rc = x.code if isinstance(x.code, int) else (0 if x.code is None else 1)
                if not isinstance(x.code, (int, type(None))):
                    print(x.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(rc)
        _, status = os.waitpid(pid, 0)
        o.seek(0)
        e.seek(0)
        out[name] = [os.waitstatus_to_exitcode(status), o.read().decode(), e.read().decode()]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def forked(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """name -> the CompletedProcess of each snippet in _FORKED, run as _FORK_SERVER says."""
    import json

    cwd = tmp_path_factory.mktemp("fp32-forked")
    jobs = {name: {**job, "cwd": str(cwd)} for name, job in _FORKED.items()}
    jobs["cli"]["argv"] = [a.replace("{cwd}", str(cwd)) for a in jobs["cli"]["argv"]]
    r = subprocess.run([sys.executable, "-c", _FORK_SERVER, json.dumps(jobs)], env={**os.environ, "PYTHONPATH": SRC},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    got = {name: subprocess.CompletedProcess(name, rc, out, err)
           for name, (rc, out, err) in json.loads(r.stdout.strip().splitlines()[-1]).items()}
    got["cwd"] = cwd
    return got


def _rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref).norm() / ref.norm()).item()


def test_the_setting_defaults_to_3xtf32_and_names_a_bad_value():
    assert precision.fp32_setting({}) == "tf32x3"
    assert precision.fp32_setting({precision.FP32_PRECISION_ENV: " IEEE "}) == "ieee"
    with pytest.raises(ValueError, match=r"GEMMTUNE_FP32_PRECISION='tf32': expected one of tf32x3, ieee"):
        precision.fp32_setting({precision.FP32_PRECISION_ENV: "tf32"})


def test_only_fp32_without_tf32_takes_the_setting():
    assert input_precision(torch.float32, False) == precision.fp32_setting() == "tf32x3"
    assert input_precision(torch.float32, True) == "tf32"  # the caller asked for TF32: one product
    assert input_precision(torch.float16, False) == "tf32"  # (16-bit tl.dot ignores it)


_FORKED = {
    "ieee": {"code": "import torch; from gemmtune.kernels.tiled import input_precision; "
                     "print(input_precision(torch.float32, False))",
             "env": {"GEMMTUNE_FP32_PRECISION": "ieee"}},
    "cli": {"module": "gemmtune.cli", "argv": ["tune", "--shape", "8x8x8:fp32", "--store", "{cwd}/s.sqlite",
                                                "--out", "{cwd}/t.json"],
            "env": {"GEMMTUNE_FP32_PRECISION": "fast"}},
    "launch": {"code": "import torch, gemmtune\n"
                       "a, b = torch.randn(5, 7), torch.randn(7, 3)\n"
                       "try:\n"
                       "    gemmtune.matmul(a, b, choice='triton_mm:BM16-BN16-BK16-S1-W4-G8')\n"
                       "except ValueError as e:\n"
                       "    print('refused:', e)\n",
               "env": {"GEMMTUNE_FP32_PRECISION": "x9", "TRITON_INTERPRET": "1"}},
    "export": {"code": "from gemmtune.configs import Choice, TileConfig\n"
                       "from gemmtune.inductor_export import choice_config\n"
                       "from gemmtune.problem import Problem\n"
                       "p = Problem.from_sizes(256, 256, 256, 'fp32')\n"
                       "print(choice_config(Choice('triton_mm', TileConfig(64, 64, 32, 3, 4)), p, 132)['BLOCK_K'])",
               "env": {"GEMMTUNE_FP32_PRECISION": "ieee"}},
}


def test_ieee_is_taken_from_the_environment_by_every_launch(forked):
    r = forked["ieee"]
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ieee"]


def test_a_bad_value_is_one_line_from_the_command_line(forked):
    r = forked["cli"]  # `python -m gemmtune.cli tune ...` with GEMMTUNE_FP32_PRECISION=fast
    assert r.returncode == 2
    assert "GEMMTUNE_FP32_PRECISION='fast': expected one of tf32x3, ieee" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (forked["cwd"] / "s.sqlite").exists()  # refused before any work


def test_a_bad_value_raises_at_the_libraries_first_fp32_launch(forked):
    r = forked["launch"]
    assert r.returncode == 0, r.stderr
    assert "refused: GEMMTUNE_FP32_PRECISION='x9'" in r.stdout


@pytest.mark.parametrize("choice", ["triton_mm:BM32-BN32-BK16-S2-W4-G8",
                                    "splitk:BM16-BN32-BK16-S2-W4-G8-SK3-atomic",
                                    "splitk:BM16-BN32-BK16-S2-W4-G8-SK3-det",
                                    # the fp32 default tile configs.fit_stages admits, copy-free and
                                    # through pad+ (B copied K-major under 3xTF32)
                                    "triton_mm:BM128-BN128-BK64-S3-W8-G8",
                                    "pad+triton_mm:BM128-BN128-BK64-S3-W8-G8"])
@pytest.mark.parametrize("view", ["plain", "transposed_b", "offset_a"])
def test_fp32_kernels_match_fp64_on_odd_shapes(choice, view):
    """The launches take the new input precision on odd sizes, views and ragged K (in the
    interpreter the product itself is fp32's; the GPU test below checks 3xTF32's numbers)."""
    if ON_GPU:
        pytest.skip("the interpreter's run; on a GPU test_3xtf32_on_tensor_cores_at_fp32_accuracy")
    g = torch.Generator().manual_seed(hash((choice, view)) % 2**31)
    m, n, k = 37, 29, 131
    a = torch.randn(m, k, generator=g)
    b = torch.randn(k, n, generator=g)
    if view == "transposed_b":
        b = torch.randn(n, k, generator=g).t()
    if view == "offset_a":
        a = torch.randn(m * k + 3, generator=g)[3:].view(m, k)
    out = gemmtune.matmul(a, b, choice=choice)
    assert _rel(out, a.double() @ b.double()) < 1e-4


def test_the_inductor_export_refuses_fp32_triton_tiles_measured_as_3xtf32():
    fp32 = Problem.from_sizes(256, 256, 256, "fp32")
    with pytest.raises(Unsupported, match="3xTF32"):
        choice_config(Choice("triton_mm", TileConfig(64, 64, 32, 3, 4)), fp32, 132)
    with pytest.raises(Unsupported, match="3xTF32"):
        choice_config(Choice("splitk", SplitKConfig(64, 64, 32, 3, 4, 8, 2, False)), fp32, 132)
    # the same tile at bf16 exports as before
    assert choice_config(Choice("triton_mm", TileConfig(64, 64, 32, 3, 4)),
                         Problem.from_sizes(256, 256, 256, "bf16"), 132)["BLOCK_M"] == 64


def test_the_export_keeps_fp32_tiles_tuned_with_ieee(forked):
    r = forked["export"]
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["32"]


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
@pytest.mark.parametrize("shape", [(37, 129, 67), (16, 2816, 1031), (257, 511, 2053)])
@pytest.mark.parametrize("choice", ["triton_mm:BM64-BN64-BK32-S3-W4-G8",
                                    "splitk:BM16-BN64-BK32-S3-W4-G8-SK4-atomic",
                                    "splitk:BM16-BN64-BK32-S3-W4-G8-SK4-det"])
def test_3xtf32_on_tensor_cores_at_fp32_accuracy(shape, choice):
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("TF32 tensor cores need sm_80")
    torch.backends.cuda.matmul.allow_tf32 = False
    m, n, k = shape
    g = torch.Generator(device="cuda").manual_seed(m * n + k)
    a = torch.randn(m, k, device="cuda", generator=g)
    b = torch.randn(n, k, device="cuda", generator=g).t()  # a Linear's weight: K-contiguous
    ref = a.double() @ b.double()
    got, sgemm = _rel(gemmtune.matmul(a, b, choice=choice), ref), _rel(a @ b, ref)
    assert got < 1e-5 and got < 4 * sgemm + 1e-7, (got, sgemm)
    a[1, 2] = float("inf")  # what SGEMM gives there, 3xTF32 gives too
    want, out = a @ b, gemmtune.matmul(a, b, choice=choice)
    assert torch.equal(out.isinf(), want.isinf()) and torch.equal(out.isnan(), want.isnan())


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
def test_3xtf32_compiles_to_tf32_tensor_core_instructions():
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("TF32 tensor cores need sm_80")
    from gemmtune.kernels import triton_mm
    a = torch.randn(256, 512, device="cuda")
    b = torch.randn(512, 256, device="cuda").t().contiguous().t()
    out = torch.empty(256, 256, device="cuda")
    ck = triton_mm.run(a, b, out, TileConfig(64, 64, 32, 3, 4))
    ptx = ck.asm["ptx"]
    mmas = re.findall(r"(?:wgmma\.mma_async|mma\.sync)\S*tf32", ptx)
    assert mmas, "no TF32 tensor-core instruction in the fp32 kernel's PTX"


# --- pad+ copies B K-major for 3xTF32 (precision.pads_b_kmajor) ---------------------------------

def _x3(monkeypatch, value="tf32x3"):
    monkeypatch.setattr(precision, "_FP32_ON_DEVICE", [value])


def test_the_padded_problem_of_3xtf32_fp32_has_a_kmajor_b(monkeypatch):
    """Problem.padded (what a pad+ choice runs) says B is K-major for fp32 mm / addmm run as 3xTF32,
    row-major for IEEE fp32, 16-bit operands and a bmm."""
    _x3(monkeypatch)
    assert Problem.from_sizes(1024, 4096, 4096, "fp32").padded().layout_b == "col"
    assert Problem.from_sizes(37, 29, 131, "fp32", layout_b="col").padded().layout_b == "col"
    assert Problem.from_sizes(1024, 4096, 4096, "bf16").padded().layout_b == "row"
    assert Problem.from_sizes(1024, 4096, 4096, "fp32", allow_tf32=True).padded().layout_b == "row"
    bmm = Problem.from_sizes(64, 64, 64, "fp32", op="bmm", batch=4)
    assert bmm.padded().layout_b == "row"
    _x3(monkeypatch, "ieee")
    assert Problem.from_sizes(1024, 4096, 4096, "fp32").padded().layout_b == "row"


def test_an_aligned_3xtf32_problem_with_a_row_major_b_gets_kmajor_pad_twins(monkeypatch):
    """From M = KMAJOR_TWINS_MIN_M, an aligned fp32 problem run as 3xTF32 with a row-major B gets
    pad+ twins (a K-major copy of B); not with a K-major B, a smaller M, IEEE products or bf16.
    --fast's compile plan counts them, and the analytic model ranks such a twin first on a large
    row-major-B product (and a copy-free choice with a K-major B)."""
    from gemmtune.device import DeviceInfo
    from gemmtune.model.analytic import AnalyticModel
    from gemmtune.tuning.plan import KMAJOR_TWINS_MIN_M, candidates, compiles_at_most

    _x3(monkeypatch)
    dev = DeviceInfo.lookup("h200")
    fams = ["triton_mm", "aten"]

    def pads(p):
        return [c for c in candidates(p, fams, "default", dev) if c.pad]
    big = Problem.from_sizes(KMAJOR_TWINS_MIN_M, 4096, 4096, "fp32")
    twins = pads(big)
    assert twins and {c.family for c in twins} == {"triton_mm"}  # no pad+aten: SGEMM gains nothing from it
    assert not pads(Problem.from_sizes(KMAJOR_TWINS_MIN_M - 16, 4096, 4096, "fp32"))
    assert not pads(Problem.from_sizes(4096, 4096, 4096, "fp32", layout_b="col"))
    assert not pads(Problem.from_sizes(4096, 4096, 4096, "bf16"))
    assert compiles_at_most(None, big, "FAST", 1, 132) > compiles_at_most(None, Problem.from_sizes(
        KMAJOR_TWINS_MIN_M, 4096, 4096, "fp32", layout_b="col"), "FAST", 1, 132)
    for p, pad_first in ((Problem.from_sizes(2048, 2048, 2048, "fp32"), True),
                         (Problem.from_sizes(2048, 2048, 2048, "fp32", layout_b="col"), False)):
        cs = candidates(p, fams, "default", dev)
        est = AnalyticModel(dev).predict(p, cs)
        best = min(range(len(cs)), key=lambda i: est[i])
        assert cs[best].pad is pad_first and cs[best].family == "triton_mm", cs[best].id
    _x3(monkeypatch, "ieee")
    assert not pads(Problem.from_sizes(4096, 4096, 4096, "fp32"))


@pytest.mark.parametrize("view", ["plain", "transposed_a", "offset_a", "odd_n"])
def test_a_3xtf32_pad_choice_runs_on_a_kmajor_copy_of_b_and_matches_fp64(monkeypatch, view):
    """A pad+ choice of an fp32 problem run as 3xTF32 hands its family B copied K-major (stride 1
    along K), A as it is where it can be, and matches fp64 (the interpreter computes the fp32 dot
    exactly as fp32; the GPU test checks 3xTF32's numbers); under IEEE the copy stays row-major."""
    if ON_GPU:
        pytest.skip("the interpreter's run; on a GPU test_3xtf32_pad_choice_on_the_gpu")
    from gemmtune.kernels import triton_mm

    g = torch.Generator().manual_seed(hash(view) % 2**31)
    m, n, k = (37, 29, 132) if view == "odd_n" else (37, 32, 132)
    a = torch.randn(m, k, generator=g)
    if view == "transposed_a":
        a = torch.randn(k, m, generator=g).t()
    if view == "offset_a":
        a = torch.randn(m * k + 3, generator=g)[3:].view(m, k)
    b = torch.randn(k, n, generator=g)  # row-major: the layout the copy turns
    seen = []
    real_run = triton_mm.run

    def spy(a_, b_, out, cfg, **kw):
        seen.append((a_.data_ptr() == a.data_ptr(), b_.stride()))
        return real_run(a_, b_, out, cfg, **kw)
    monkeypatch.setattr(triton_mm, "run", spy)
    for value, kmajor in (("tf32x3", True), ("ieee", False)):
        _x3(monkeypatch, value)
        seen.clear()
        out = gemmtune.matmul(a, b, choice="pad+triton_mm:BM32-BN32-BK16-S2-W4-G8")
        assert _rel(out, a.double() @ b.double()) < 1e-5, value
        (a_as_is, b_strides), = seen
        assert (b_strides[0] == 1) is kmajor, (value, b_strides)
        if view == "plain" and value == "tf32x3":
            assert a_as_is  # row-major, contiguous, K already a whole number of 16-byte vectors


@pytest.mark.gpu
@pytest.mark.skipif(not ON_GPU, reason="needs a CUDA GPU")
@pytest.mark.parametrize("shape", [(512, 1024, 768), (37, 129, 67)])
def test_3xtf32_pad_choice_on_the_gpu(shape):
    """The K-major pad+ path on tensor cores: fp32 accuracy against fp64 (within 4x SGEMM's), on a
    row-major B, an odd one included."""
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("TF32 tensor cores need sm_80")
    torch.backends.cuda.matmul.allow_tf32 = False
    m, n, k = shape
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", generator=g)
    b = torch.randn(k, n, device="cuda", generator=g)
    ref = a.double() @ b.double()
    for choice in ("pad+triton_mm:BM128-BN64-BK32-S3-W4-G8", "pad+persistent_tma:BM128-BN128-BK32-S3-W8-G8-F"):
        got, sgemm = _rel(gemmtune.matmul(a, b, choice=choice), ref), _rel(a @ b, ref)
        assert got < 1e-5 and got < 4 * sgemm + 1e-7, (choice, got, sgemm)


def test_the_analytic_model_knows_3xtf32s_slow_tile_shapes(monkeypatch):
    """Under 3xTF32 the analytic model ranks the tile that measured best (BM128-BN64-BK32; H200,
    session 49) above 8 warps over 64 rows, a 16-deep K block and a 2-stage pipeline, each of
    which measured 1.3-2.3x slower; with IEEE products those charges do not apply."""
    from gemmtune.device import DeviceInfo
    from gemmtune.model.analytic import AnalyticModel

    dev = DeviceInfo.lookup("h200")
    p = Problem.from_sizes(2048, 2048, 2048, "fp32", layout_b="col")
    ids = ["triton_mm:BM128-BN64-BK32-S4-W8-G8", "triton_mm:BM64-BN128-BK32-S4-W8-G8",
           "triton_mm:BM64-BN64-BK16-S2-W4-G8", "triton_mm:BM128-BN128-BK32-S2-W8-G8"]
    cs = [Choice.parse(c) for c in ids]
    _x3(monkeypatch)
    est = AnalyticModel(dev).predict(p, cs)
    assert all(est[0] < e for e in est[1:]), dict(zip(ids, est))
    assert est[1] > 1.8 * est[0]  # the warp groups splitting N
    _x3(monkeypatch, "ieee")
    ieee = AnalyticModel(dev).predict(p, cs)
    assert ieee[1] < 1.5 * ieee[0], dict(zip(ids, ieee))


def test_the_analytic_model_charges_3xtf32_a_32_deep_k_block(monkeypatch):
    """Under 3xTF32 the BK64 tile on 8 warps, which ran 1.08-1.19x faster than its BK32 twin and
    1.02-1.16x faster than BM128-BN64-BK32-S4-W8 on all 9 large fp32 shapes of session 50's call 2
    (H200), ranks first of the three; with IEEE products BK32's charge does not apply."""
    from gemmtune.device import DeviceInfo
    from gemmtune.model.analytic import X3_BK32_FACTOR, AnalyticModel

    dev = DeviceInfo.lookup("h200")
    p = Problem.from_sizes(4096, 4096, 4096, "fp32", layout_b="col")
    ids = ["triton_mm:BM128-BN128-BK64-S3-W8-G8", "triton_mm:BM128-BN128-BK32-S3-W8-G8",
           "triton_mm:BM128-BN64-BK32-S4-W8-G8"]
    cs = [Choice.parse(c) for c in ids]
    _x3(monkeypatch)
    est = AnalyticModel(dev).predict(p, cs)
    assert est[0] < est[1] and est[0] < est[2], dict(zip(ids, est))
    _x3(monkeypatch, "ieee")
    ieee = AnalyticModel(dev).predict(p, cs)
    assert est[1] / est[0] > ieee[1] / ieee[0] * (1 + (X3_BK32_FACTOR - 1) / 2), (dict(zip(ids, est)), ieee)


def test_a_3xtf32_pad_choice_reads_a_kmajor_b_that_needs_no_padding_as_it_is(monkeypatch):
    """B already K-major, aligned and of whole 16-byte rows (the copy would be the same bytes): the
    pad+ path hands it to the family as it is, and copies only the unaligned A."""
    from gemmtune.kernels import triton_mm

    _x3(monkeypatch)
    g = torch.Generator().manual_seed(7)
    a = torch.randn(33 * 64 + 1, generator=g)[1:].view(33, 64)  # offset: A must be copied
    b = torch.randn(32, 64, generator=g).t()                      # K-major, K = 64, N = 32
    seen = []
    real_run = triton_mm.run

    def spy(a_, b_, out, cfg, **kw):
        seen.append((a_.data_ptr() == a.data_ptr(), b_.data_ptr() == b.data_ptr()))
        return real_run(a_, b_, out, cfg, **kw)
    monkeypatch.setattr(triton_mm, "run", spy)
    out = gemmtune.matmul(a, b, choice="pad+triton_mm:BM32-BN32-BK16-S2-W4-G8")
    assert _rel(out, a.double() @ b.double()) < 1e-5
    assert seen == [(False, True)], seen


def test_pad_aten_keeps_a_row_major_copy_of_b_under_3xtf32(monkeypatch):
    """cuBLAS's SGEMM gains nothing from a K-major B, so pad+aten copies B row-major (a straight
    copy) under 3xTF32 too, while a Triton pad+ choice of the same problem gets a K-major one."""
    from gemmtune.kernels import aten

    _x3(monkeypatch)
    g = torch.Generator().manual_seed(11)
    a = torch.randn(17, 30, generator=g)
    b = torch.randn(30, 21, generator=g)  # N = 21, K = 30: both padded
    seen = []
    real_run = aten.run

    def spy(a_, b_, out, cfg, **kw):
        seen.append(b_.stride())
        return real_run(a_, b_, out, cfg, **kw)
    monkeypatch.setattr(aten, "run", spy)
    out = gemmtune.matmul(a, b, choice="pad+aten")
    assert _rel(out, a.double() @ b.double()) < 1e-5
    assert len(seen) == 1 and seen[0][1] == 1, seen  # row-major: unit stride along N


def test_fast_draws_its_3xtf32_picks_from_the_default_space(monkeypatch):
    """--fast under 3xTF32 adds the analytic model's first of its two best families among the
    default space's choices (tuning.plan.x3_pool): on the H200's large fp32 problems that is the
    8-warp BK64 tile, the best kernel on 6 of 9 (session 50, call 2) and on 6 of 12 seed-51 shapes
    (call 3), which the exhaustive space's analytic ranking had put below unmeasured 4-warp tiles."""
    from gemmtune.device import DeviceInfo
    from gemmtune.tuning.plan import CandidatePlan, load_ranker

    _x3(monkeypatch)
    dev = DeviceInfo.lookup("h200")
    fams = ("triton_mm", "triton_static", "persistent_tma", "splitk", "skinny", "decompose_k", "aten")
    plan = CandidatePlan(fams, "exhaustive", dev, None, "FAST", load_ranker(None, dev, "3.6.0", numpy_predict=True))
    for m, n, k, lb in [(1951, 10240, 3072, "col"), (4032, 4032, 4032, "col"), (1856, 1856, 1856, "row")]:
        got = [c.id for c in plan(Problem.from_sizes(m, n, k, "fp32", layout_b=lb)).choices]
        want = ("pad+" if lb == "row" else "") + "triton_mm:BM128-BN128-BK64-S3-W8-G8"
        assert want in got, (m, n, k, got)
