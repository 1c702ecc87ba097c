"""Bad input fails early with ValueError/TypeError whose message names the problem."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import gemmtune
from gemmtune import kernels
from gemmtune.problem import Problem
from gemmtune.configs import AtenConfig, Choice, DecomposeKConfig, SplitKConfig, TileConfig

SRC = Path(__file__).resolve().parents[1] / "src"
TILE = "triton_mm:BM32-BN32-BK32-S2-W4-G8"


def pair(m=8, n=8, k=16, dtype=torch.float16, device="cpu"):
    return torch.randn(m, k, device=device).to(dtype), torch.randn(k, n, device=device).to(dtype)


# ------------------------------------------------------------------ operands
@pytest.mark.parametrize("choice", [None, "aten", TILE])
def test_mismatched_inner_dims(choice):
    a, b = torch.randn(8, 16, dtype=torch.float16), torch.randn(17, 8, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"inner dimensions differ.*a.shape\[1\]=16 != b.shape\[0\]=17"):
        gemmtune.matmul(a, b, choice=choice)
    with pytest.raises(ValueError, match="inner dimensions differ"):
        Problem.from_tensors(a, b)


def test_mixed_dtypes():
    a, b = torch.randn(8, 16, dtype=torch.float16), torch.randn(16, 8, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="same dtype.*torch.float16 and torch.bfloat16"):
        gemmtune.matmul(a, b)


@pytest.mark.parametrize("dtype", [torch.int32, torch.float64, torch.int8])
def test_unsupported_dtype(dtype):
    a, b = pair(dtype=dtype)
    with pytest.raises(TypeError, match=f"unsupported dtype {dtype}"):
        gemmtune.matmul(a, b)
    with pytest.raises(TypeError, match="unsupported dtype"):
        gemmtune.matmul(a, b, choice=TILE)


@pytest.mark.parametrize("shape_a,shape_b,which", [((2, 8, 16), (16, 8), "a"), ((8, 16), (2, 16, 8), "b"),
                                                   ((16,), (16, 8), "a")])
def test_not_2d(shape_a, shape_b, which):
    a, b = torch.randn(*shape_a, dtype=torch.float16), torch.randn(*shape_b, dtype=torch.float16)
    with pytest.raises(ValueError, match=f"{which} must be 2-D"):
        gemmtune.matmul(a, b)


def test_not_a_tensor():
    with pytest.raises(TypeError, match="a must be a torch.Tensor, not list"):
        gemmtune.matmul([[1.0]], torch.randn(1, 1))  # type: ignore[arg-type]


@pytest.mark.parametrize("which", ["a", "b"])
def test_scaled_mm_not_a_tensor(which):
    a = torch.randn(8, 16).to(torch.float8_e4m3fn)
    b = torch.randn(8, 16).to(torch.float8_e4m3fn).t()
    args = {"a": a, "b": b, which: [[1.0]]}
    one = torch.ones(1)
    with pytest.raises(TypeError, match=f"{which} must be a torch.Tensor, not list"):
        gemmtune.scaled_mm(args["a"], args["b"], one, one)  # type: ignore[arg-type]


@pytest.mark.parametrize("field,value", [("aligned_a", "false"), ("aligned_b", 0), ("allow_tf32", 1),
                                         ("allow_tf32", None)])
def test_problem_flags_must_be_bools(field, value):
    # bool("false") is True: a truthy stand-in would key (and run) another problem silently.
    with pytest.raises(TypeError, match=f"Problem.{field} must be True or False, got {value!r}"):
        Problem.from_sizes(8, 8, 16, "fp32", **{field: value})


def test_different_devices():
    a = torch.randn(8, 16, dtype=torch.float16, device="meta")
    b = torch.randn(16, 8, dtype=torch.float16)
    with pytest.raises(ValueError, match="same device.*meta and cpu"):
        gemmtune.matmul(a, b)
    with pytest.raises(ValueError, match="same device"):
        gemmtune.matmul(b.t(), a.t(), choice=TILE)


@pytest.mark.parametrize("choice", [TILE, "splitk:BM32-BN32-BK32-S2-W4-G8-SK2-det", "decompose_k:s2"])
def test_triton_family_on_unsupported_device(choice):
    a, b = pair(device="meta")
    with pytest.raises(ValueError, match="runs on CUDA devices, not meta"):
        gemmtune.matmul(a, b, choice=choice)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cpu_tensors_without_interpreter():
    """Without TRITON_INTERPRET the Triton families refuse CPU tensors with a hint; aten runs.

    Both settings (unset, "0") in one subprocess that imports torch once and forks a child per
    setting before gemmtune (and triton's kernels) are imported: each child sets its value, then
    imports gemmtune, so triton.jit sees that value as it would in a fresh process (a torch import
    is most of a subprocess's ~5 s of CPU on the 2-core CI machine)."""
    code = textwrap.dedent(f"""
        import os, sys, traceback
        sys.path.insert(0, {str(SRC)!r})
        import torch
        assert "gemmtune" not in sys.modules and "triton" not in sys.modules, "imported before the fork"

        def check():
            import gemmtune
            assert not gemmtune.interpreter_enabled()
            a, b = torch.randn(8, 16, dtype=torch.float16), torch.randn(16, 8, dtype=torch.float16)
            out = gemmtune.matmul(a, b, choice="aten")
            assert torch.allclose(out.float(), a.float() @ b.float(), atol=1e-2)
            for choice in ({TILE!r}, "splitk:BM32-BN32-BK32-S2-W4-G8-SK2-det", "decompose_k:s2"):
                try:
                    gemmtune.matmul(a, b, choice=choice)
                except ValueError as e:
                    msg = str(e)
                    assert "needs CUDA tensors" in msg and "TRITON_INTERPRET=1" in msg, msg
                    assert "choice='aten'" in msg, msg
                else:
                    raise SystemExit(f"{{choice}} ran on CPU tensors without the interpreter")

        for value in (None, "0"):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    if value is not None:
                        os.environ["TRITON_INTERPRET"] = value
                    check()
                    print(f"OK {{value}}")
                    code = 0
                except BaseException:
                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0, f"TRITON_INTERPRET={{value}}: the check failed"
        print("OK")
    """)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["OK", "None", "OK", "0", "OK"], r.stdout + r.stderr


# ------------------------------------------------------------------ configs a family cannot run
@pytest.mark.parametrize("choice,match", [
    ("decompose_k:s3", "split=3 does not divide K=16"),
    ("decompose_k:s0", "split=0 must be >= 1"),
    ("triton_mm:BM48-BN32-BK32-S2-W4-G8", "block_m=48 must be a power of two"),
    ("triton_mm:BM32-BN32-BK8-S2-W4-G8", "block_k=8 must be a power of two >= 16"),
    ("triton_mm:BM32-BN32-BK32-S2-W3-G8", "num_warps=3"),
    ("triton_mm:BM32-BN32-BK32-S0-W4-G8", "num_stages=0"),
    ("splitk:BM32-BN32-BK32-S2-W4-G8-SK0-det", "split_k=0 must be >= 1"),
    ("splitk:BM32-BN96-BK32-S2-W4-G8-SK2-atomic", "block_n=96 must be a power of two"),
])
def test_config_family_cannot_run(choice, match):
    a, b = pair()
    with pytest.raises(ValueError, match=match):
        gemmtune.matmul(a, b, choice=choice)
    # Validation comes from the family itself, before any launch.
    c = Choice.parse(choice)
    with pytest.raises(ValueError, match=match):
        kernels.get(c.family).validate(Problem.from_tensors(a, b), c.config)


# ------------------------------------------------------------------ choice strings and objects
@pytest.mark.parametrize("text,match", [
    ("triton_mm:BM12", r"malformed parameters 'BM12'; expected triton_mm:BM<int>"),
    ("triton_mm:", "malformed parameters"),
    ("triton_mm", "malformed parameters"),
    ("splitk:BM32-BN32-BK32-S2-W4-G8-SK2", r"expected splitk:.*\(det\|atomic\)"),
    ("splitk:BM32-BN32-BK32-S2-W4-G8", "malformed parameters"),
    ("decompose_k:16", "expected decompose_k:s<int>"),
    ("decompose_k:s-2", "malformed parameters"),
    ("nope:x", "unknown kernel family 'nope'"),
    ("", "unknown kernel family ''"),
    ("aten:x", "aten takes no parameters"),
])
def test_malformed_choice_strings(text, match):
    with pytest.raises(ValueError, match=match):
        Choice.parse(text)
    with pytest.raises(ValueError, match=match):
        gemmtune.matmul(*pair(), choice=text)


def test_choice_parse_not_a_string():
    with pytest.raises(TypeError, match="must be a string, not int"):
        Choice.parse(3)  # type: ignore[arg-type]


@pytest.mark.parametrize("family,cfg", [
    ("triton_mm", DecomposeKConfig(2)), ("splitk", TileConfig(32, 32, 32, 2, 4)),
    ("decompose_k", AtenConfig()), ("aten", SplitKConfig(32, 32, 32, 2, 4)),
])
def test_wrong_config_type_for_family(family, cfg):
    with pytest.raises(TypeError, match=f"family {family} takes a .*, not a {type(cfg).__name__}"):
        Choice(family, cfg)


def test_unknown_family_object_and_params():
    with pytest.raises(ValueError, match="unknown kernel family 'cublas'"):
        Choice("cublas", AtenConfig())
    with pytest.raises(ValueError, match="unknown kernel family 'cublas'"):
        kernels.get("cublas")
    with pytest.raises(ValueError, match="bad parameters for triton_mm"):
        Choice.from_params("triton_mm", {"block_m": 64})
    with pytest.raises(ValueError, match="bad parameters for decompose_k"):
        Choice.from_params("decompose_k", {"split": 2, "tile": 4})


def test_choice_of_wrong_type_to_matmul():
    with pytest.raises(TypeError, match="choice must be a Choice, a choice id string or None, not int"):
        gemmtune.matmul(*pair(), choice=7)  # type: ignore[arg-type]



@pytest.mark.parametrize("choice", [None, "aten", "splitk:BM16-BN16-BK32-S1-W2-G8-SK2-det"])
def test_workspace_of_wrong_type_to_matmul(choice):
    """A split-K choice raised AttributeError ('str' object has no attribute 'partials') or torch's
    'Boolean value of Tensor ... is ambiguous' from deep in its launcher; others ignored it."""
    for ws in ("scratch", torch.empty(64)):
        with pytest.raises(TypeError, match=f"workspace must be a .*SplitKWorkspace or None, not {type(ws).__name__}"):
            gemmtune.matmul(*pair(), choice=choice, workspace=ws)  # type: ignore[arg-type]



def _negated(*shape):
    """A negated view (Tensor.is_neg()): the .imag of a conjugated complex tensor."""
    t = torch.randn(*shape, dtype=torch.complex64).conj().imag
    assert t.is_neg() and t.dtype == torch.float32
    return t


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU operands: Triton runs them only in the interpreter")
def test_negated_views_are_refused_not_read_without_their_sign():
    """A negated view's memory holds its values without the sign. torch's ops apply it; the Triton
    kernels read the memory, so a Triton choice returned -(a @ b) (a dispatcher too, for a shape
    it had run before) with no error, and a negated bias or residual was added with the wrong sign."""
    from gemmtune.api import interpreter_enabled
    if not interpreter_enabled():
        pytest.skip("needs TRITON_INTERPRET=1")
    torch.manual_seed(0)
    a, b = _negated(8, 16), torch.randn(16, 8)
    msg = r"a is a negated view .*pass a.resolve_neg\(\)"
    for choice in (TILE, "aten", None):
        with pytest.raises(ValueError, match=msg):
            gemmtune.matmul(a, b, choice=choice)
    with pytest.raises(ValueError, match=r"b is a negated view"):
        gemmtune.matmul(b.t().contiguous(), _negated(8, 16).t())
    with pytest.raises(ValueError, match=r"bias is a negated view"):
        gemmtune.matmul(a.resolve_neg(), b, choice=TILE, bias=_negated(8))
    with pytest.raises(ValueError, match=r"residual is a negated view"):
        gemmtune.matmul(a.resolve_neg(), b, choice=TILE, residual=_negated(8, 8))
    mm = gemmtune.compile_mm(n=8, k=16, dtype="fp32", hints={"m": [8]},
                             tune_fn=lambda ps, **kw: {p.key: TILE for p in ps})
    plain, bias = a.resolve_neg(), torch.randn(8)
    torch.testing.assert_close(mm(plain, b), (plain.double() @ b.double()).float(), rtol=1e-5, atol=1e-5)
    mm(plain, b, bias=bias)
    with pytest.raises(ValueError, match=msg):  # a shape whose kernel is cached already
        mm(a, b)
    with pytest.raises(ValueError, match=r"bias is a negated view"):
        mm(plain, b, bias=_negated(8))
    assert mm.decision(m=8).choice.id == TILE
    fp8 = torch.randn(8, 32).to(torch.float8_e4m3fn), torch.randn(8, 32).to(torch.float8_e4m3fn).t()
    with pytest.raises(ValueError, match=r"scale_a is a negated view"):
        gemmtune.scaled_mm(*fp8, _negated(8, 1), torch.ones(1, 8), out_dtype=torch.float32, choice=TILE)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU operands: Triton runs them only in the interpreter")
@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=["coo", "csr"])
@pytest.mark.parametrize("choice", ["aten", TILE])
@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_a_sparse_bias_or_residual_is_refused_by_name(layout, choice):
    """The operands' check refuses a sparse A or B by name; a sparse bias or residual went on to the
    kernels and raised from deep inside ("Cannot access storage of SparseTensorImpl", "Sparse CSR
    tensors do not have strides", aten's "expand is unsupported for Sparse tensors"), from
    gemmtune.matmul and from a dispatcher, at first sight and on a shape cached with dense ones;
    and so did a sparse scale or bias of gemmtune.scaled_mm ("reshape is not implemented for
    sparse tensors")."""
    from gemmtune.api import interpreter_enabled
    if choice != "aten" and not interpreter_enabled():
        pytest.skip("needs TRITON_INTERPRET=1")
    torch.manual_seed(0)
    a, b, bias, res = torch.randn(8, 16), torch.randn(16, 8), torch.randn(8), torch.randn(8, 8)
    sparse = {"bias": bias.to_sparse(), "residual": res.to_sparse(layout=layout)}  # (CSR needs 2-D)
    mm = gemmtune.compile_mm(n=8, k=16, dtype="fp32", hints={"m": [8]},
                             tune_fn=lambda ps, **kw: {p.key: choice for p in ps})
    for name, t in sparse.items():
        msg = f"{name} is a {t.layout} tensor.*{name}.to_dense"
        with pytest.raises(TypeError, match=msg):
            gemmtune.matmul(a, b, choice=choice, **{name: t})
        with pytest.raises(TypeError, match=msg):  # first sight
            mm(a, b, **{name: t})
        dense = {"bias": bias, "residual": res}[name]
        want = mm(a, b, **{name: dense})  # the shape's closure is cached
        try:  # its key has no layout: a kernel that takes the sparse tensor (aten's add_) may run it
            got = mm(a, b, **{name: t})
        except TypeError as e:
            assert re.search(msg, str(e)), e
        else:
            torch.testing.assert_close(got, want)
    fp8 = torch.randn(8, 32).to(torch.float8_e4m3fn), torch.randn(16, 32).to(torch.float8_e4m3fn).t()
    sa, sb = torch.rand(8, 1) + 0.5, torch.rand(1, 16) + 0.5
    for name, args in (("scale_a", (sa.to_sparse(), sb)), ("scale_b", (sa, sb.to_sparse(layout=layout))),
                       ("bias", (sa, sb, torch.randn(16).to_sparse()))):
        with pytest.raises(TypeError, match=f"{name} is a .*{name}.to_dense"):
            gemmtune.scaled_mm(*fp8, *args, out_dtype=torch.float32, choice=choice)


# ------------------------------------------------------------------ out_dtype
@pytest.mark.parametrize("choice", [None, "aten", TILE])
def test_out_dtype_fp16_for_bf16_inputs(choice):
    a, b = pair(dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="out_dtype float16 is not supported for bfloat16 inputs"):
        gemmtune.matmul(a, b, out_dtype=torch.float16, choice=choice)


def test_out_dtype_unknown():
    with pytest.raises(TypeError, match="unsupported dtype 'fp4'"):
        gemmtune.matmul(*pair(), out_dtype="fp4")
    # fp8 is a known dtype now (scaled_mm's operands), never an mm output.
    with pytest.raises(TypeError, match="out_dtype float8_e4m3fn is not supported"):
        gemmtune.matmul(*pair(), out_dtype="fp8")


def test_errors_leave_no_partial_output_behind(device):
    """A rejected call raises before allocating or launching: a good call right after is fine."""
    a, b = pair(device=device)
    with pytest.raises(ValueError):
        gemmtune.matmul(a, b, choice="decompose_k:s3")
    out = gemmtune.matmul(a, b, choice=TILE)
    ref = a.double() @ b.double()
    assert (out.double() - ref).abs().max() <= 1e-2 * ref.abs().max()


@pytest.mark.parametrize("kw", [{"dtype": "bf16"}, {"n": 8}, {"layout_b": "row"}])
def test_patch_names_a_setting_that_comes_from_each_weight(kw):
    """``patch(model, dtype=...)`` came out of compile_mm as "got multiple values for keyword
    argument 'dtype'", after the model had been walked."""
    model = torch.nn.Sequential(torch.nn.Linear(16, 8))
    with pytest.raises(TypeError, match=f"patch takes no {next(iter(kw))}=: each layer's"):
        gemmtune.patch(model, hints={"m": [8]}, **kw)
    assert type(model[0]) is torch.nn.Linear
