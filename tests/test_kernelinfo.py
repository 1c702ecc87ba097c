"""gemmtune inspect: a choice compiled for a GPU target on a machine without one (Triton ships
ptxas and cuobjdump), and the offline launch recorder it rests on."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from gemmtune import kernels
from gemmtune.configs import Choice
from gemmtune.kernelinfo import count_ptx
from gemmtune.kernels import tiled
from gemmtune.kernels.splitk import SplitKWorkspace


def _compile_env() -> dict:
    """This process's environment for a compiling subprocess: the source tree first on the path,
    and no TRITON_INTERPRET (the tests set it)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(os.path.dirname(__file__), "..", "src"),
                                         env.get("PYTHONPATH", "")])
    return env


# One compiling process for the module's tests (one per xdist worker that runs any): each of
# them used to start its own `python -m gemmtune.cli inspect` or script, importing torch, triton
# and gemmtune again (~5 s of CPU each, ten of them). It runs each request as that command would:
# the CLI's main() with the argv, or a script file as __main__, with file descriptors 1 and 2
# pointed at files for the request's run, so that stdout and stderr hold everything the command
# (or a tool it starts) writes; an exception that escapes is printed as Python prints it.
_SERVER = r"""
import json, os, runpy, sys, traceback
reply = os.fdopen(os.dup(1), "w")
for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush(); sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(req["out"], "w") as fo, open(req["err"], "w") as fe:
        os.dup2(fo.fileno(), 1); os.dup2(fe.fileno(), 2)
        try:
            if "argv" in req:
                from gemmtune.cli import main
                rc = main(req["argv"])
            else:
                sys.argv = [req["script"]]
                runpy.run_path(req["script"], run_name="__main__")
                rc = 0
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            rc = 1
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os.dup2(saved[0], 1); os.dup2(saved[1], 2)
            os.close(saved[0]); os.close(saved[1])
    reply.write(json.dumps(rc) + "\n"); reply.flush()
"""


class _Compiler:
    """The module's compiling process (TRITON_INTERPRET unset), started at its first request."""

    def __init__(self, folder):
        self.folder, self.proc, self.n = folder, None, 0

    def _request(self, req: dict, args) -> subprocess.CompletedProcess:
        if self.proc is None:
            self.log = open(self.folder / "server.log", "w+")
            self.proc = subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self.log, text=True, env=_compile_env())
        self.n += 1
        out, err = self.folder / f"{self.n}.out", self.folder / f"{self.n}.err"
        self.proc.stdin.write(json.dumps(req | {"out": str(out), "err": str(err)}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.log.seek(0)
            raise AssertionError(f"the compiling process died: {self.log.read()[-3000:]}")
        return subprocess.CompletedProcess(args, json.loads(line), out.read_text(), err.read_text())

    def inspect(self, *argv) -> subprocess.CompletedProcess:
        return self._request({"argv": ["inspect", *argv]}, ["gemmtune", "inspect", *argv])

    def script(self, path) -> subprocess.CompletedProcess:
        return self._request({"script": str(path)}, [sys.executable, str(path)])

    def close(self):
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
            self.log.close()


@pytest.fixture(scope="module")
def compiler(tmp_path_factory):
    c = _Compiler(tmp_path_factory.mktemp("compiler"))
    yield c
    c.close()


def _inspect_interpreted(capsys, *argv):
    """``gemmtune inspect`` in this (interpreted) process, as a command would run: its status and output."""
    from gemmtune.cli import main
    capsys.readouterr()
    rc = main(["inspect", *argv])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["gemmtune", "inspect", *argv], rc, out, err)


def test_offline_mode_records_launches_and_runs_nothing():
    a, b = torch.randn(5, 40, dtype=torch.float16), torch.randn(40, 24, dtype=torch.float16)
    out = torch.full((5, 24), 7.0, dtype=torch.float16)
    with tiled.offline() as launches:
        kernels.run_choice(Choice.parse("splitk:BM16-BN16-BK16-S1-W2-G8-SK2-det"), a, b, out, workspace=SplitKWorkspace())
    # One launch: the last program to arrive at a tile sums the slices in the same kernel.
    assert [getattr(fn, "__name__", None) or fn.fn.__name__ for fn, *_ in launches] == ["_tiled_mm_kernel"]
    (_, grid, args, kwargs), = launches
    assert grid == (2, 2) and kwargs["BLOCK_K"] == 16
    assert (out == 7).all()  # nothing ran
    kernels.run_choice(Choice.parse("triton_mm:BM16-BN16-BK16-S1-W2-G8"), a, b, out)  # and launches run again after
    assert not (out == 7).any()


def test_count_ptx_tells_vector_from_scalar_loads_and_skips_comments():
    ptx = """
    ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd1];
    ld.global.nc.L1::evict_last.v2.b32 {%r5, %r6}, [%rd2];
    @%p1 ld.global.b16 %rs1, [%rd3];
    // ld.global.v4.b32 in a comment
    cp.async.cg.shared.global [%r7], [%rd4], 16;
    wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%f1}, %rd5, %rd6;
    red.global.add.f32 [%rd7], %f2;
    """
    c = count_ptx(ptx)
    assert (c["ld.global.v4"], c["ld.global.v2"], c["ld.global scalar"]) == (1, 1, 1)
    assert (c["cp.async"], c["wgmma"], c["atom/red"], c["mma.sync"]) == (1, 1, 1, 0)


def test_inspect_compiles_for_sm90_on_a_cpu_machine(compiler):
    r = compiler.inspect("triton_mm:BM128-BN128-BK64-S3-W8-G8", "skinny:BM1-BN32-BK128-SK1-S1-W4-core-det", "aten",
                 "--shape", "64x4096x768:bf16", "--layout-b", "col", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)  # the whole of stdout: the note on aten goes to stderr under --json
    rows = {k["choice"]: k for k in doc["kernels"]}
    assert "aten" not in rows and "no Triton kernel" in r.stderr  # cuBLAS launches none
    tiled_row = rows["triton_mm:BM128-BN128-BK64-S3-W8-G8"]
    assert tiled_row["arch"] == "sm_90" and tiled_row["wgmma"] > 0 and tiled_row["cp.async"] > 0
    assert tiled_row["registers"] and tiled_row["spill B"] == 0 and tiled_row["shared B"] > 0
    core = rows["skinny:BM1-BN32-BK128-SK1-S1-W4-core-det"]  # K-contiguous B: 16-byte vector loads
    assert core["ld.global.v4"] > 0 and core["wgmma"] == 0 and core["grid"] == "8192x1"  # 64 row blocks x 128 strips


@pytest.mark.slow
def test_inspect_targets_ampere_and_refuses_the_interpreter(compiler, capsys):
    r = compiler.inspect("triton_mm:BM64-BN64-BK32-S3-W4-G8", "--shape", "256x256x256:fp16", "--arch", "80", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    row = json.loads(r.stdout)["kernels"][0]
    assert row["arch"] == "sm_80" and row["wgmma"] == 0 and row["mma.sync"] > 0
    assert os.environ.get("TRITON_INTERPRET") == "1"  # this process's (conftest sets it without a GPU)
    r = _inspect_interpreted(capsys, "triton_mm:BM64-BN64-BK32-S3-W4-G8", "--shape", "256x256x256:fp16")
    assert r.returncode == 2 and "unset TRITON_INTERPRET" in r.stderr and "Traceback" not in r.stderr


def test_inspect_takes_a_bmm_with_a_broadcast_weight(compiler):
    """bmm was refused ("bmm: not yet"); its operands are 3-D, a bcast_ one expanded (stride 0)."""
    r = compiler.inspect("triton_mm:BM64-BN64-BK32-S3-W4-G8", "--shape", "8x128x128x64:bf16", "--op", "bmm",
                 "--layout-b", "bcast_col", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout[r.stdout.index("{"):])
    (row,) = doc["kernels"]
    assert doc["layout_b"] == "bcast_col" and row["grid"].endswith("x8") and row["wgmma"] > 0
    r = compiler.inspect("aten", "--shape", "128x128x64:bf16", "--layout-b", "bcast_col")
    assert r.returncode == 2 and "a broadcast operand is bmm's" in r.stderr and "Traceback" not in r.stderr


_PDL_PTX = r"""
import json, re
from gemmtune.kernelinfo import inspect_choice
from gemmtune.problem import Problem
out = {}
for name, cid, m, layout in (("col", "skinny:BM1-BN4-BK1024-SK1-S1-W4-core-det-pdl", 1, "col"),
                             ("row", "skinny:BM1-BN4-BK1024-SK1-S1-W4-core-det-pdl", 1, "row"),
                             ("dot", "skinny:BM16-BN64-BK64-SK1-S1-W4-dot-det-pdl", 16, "col")):
    (info,) = inspect_choice(cid, Problem.from_sizes(m, 2048, 2048, "bf16", layout_b=layout), arch=90)
    ptx = "\n".join(l.split("//")[0] for l in info.asm["ptx"].splitlines())
    head, _, tail = ptx.partition("griddepcontrol.wait")
    out[name] = {"waits": ptx.count("griddepcontrol.wait"), "launch": "griddepcontrol.launch_dependents" in tail,
                   "loads_before": len(re.findall(r"ld\.global", head)),
                   "stores_or_atomics_before": len(re.findall(r"st\.global|atom\.|red\.global", head))}
print(json.dumps(out))
"""


def test_pdl_strip_ptx_loads_only_b_before_its_wait(compiler, tmp_path):
    """A -pdl GEMV strip compiled for sm_90 on the CPU machine: one griddepcontrol.wait, with no
    store or atomic before it. With a K-contiguous B, the B tile's loads come before the wait (the
    prefetch): BLOCK_N x BLOCK_K = 4 x 1024 bf16 over 128 threads is 64 bytes each, four 16-byte
    loads. The N-contiguous CUDA-core path and the tl.dot path (batched decode) load their first B
    tile before it too (each peels its first K step), and nothing else."""
    script = tmp_path / "pdl_ptx.py"
    script.write_text(_PDL_PTX)
    r = compiler.script(script)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    for path in ("col", "row", "dot"):
        assert doc[path]["waits"] == 1 and doc[path]["launch"], doc
        assert doc[path]["stores_or_atomics_before"] == 0, doc
    assert doc["col"]["loads_before"] == 4, doc
    # N-contiguous B, 1024 x 4 bf16 over 128 threads: 64 bytes each in 8-byte vectors (4 columns), 8
    # loads; tl.dot's 64 x 64 bf16 B tile: 64 bytes each, four 16-byte loads. A's tile would add one.
    assert doc["row"]["loads_before"] == 8 and doc["dot"]["loads_before"] == 4, doc


def test_inspect_refuses_a_pdl_choice_before_hopper(compiler):
    r = compiler.inspect("skinny:BM1-BN4-BK1024-SK1-S1-W4-core-det-pdl", "--shape", "1x2048x2048:bf16", "--layout-b", "col",
                 "--arch", "80")
    assert r.returncode != 0
    assert "compute capability 9.0 or later" in (r.stdout + r.stderr) and "Traceback" not in r.stderr


def test_flat_strip_has_no_shared_memory_broadcast_of_a(compiler):
    """The -flat one-row strip, compiled for sm_90 on the CPU machine, against its 3-D twin: the same
    16-byte loads of B, but no A broadcast through shared memory. The 3-D product's puts its
    barriers in the K loop (10 in all at BN4-BK512-W2 with triton 3.9, 3 for -flat, whose are the
    final reduction's), and needs 2 KB of shared memory for it. The counts are the compiler's, so
    the test asks for fewer, not for a number."""
    r = compiler.inspect("skinny:BM1-BN4-BK512-SK1-S1-W2-core-det", "skinny:BM1-BN4-BK512-SK1-S1-W2-core-det-flat",
                 "--shape", "1x3072x2048:bf16", "--layout-b", "col", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {k["choice"]: k for k in json.loads(r.stdout[r.stdout.index("{"):])["kernels"]}
    cube, flat = rows["skinny:BM1-BN4-BK512-SK1-S1-W2-core-det"], rows["skinny:BM1-BN4-BK512-SK1-S1-W2-core-det-flat"]
    assert flat["ld.global.v4"] == cube["ld.global.v4"] > 0
    assert flat["bar.sync"] < cube["bar.sync"] and flat["shared B"] < cube["shared B"], (flat, cube)
    assert flat["spill B"] == 0


_TWO_LOADS = """
import json, torch, triton, triton.language as tl
from gemmtune.kernelinfo import _compile

@triton.jit
def independent(x_ptr, y_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    tl.store(y_ptr + r, tl.load(x_ptr + r) + tl.load(x_ptr + B + r))

@triton.jit
def chained(i_ptr, x_ptr, y_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    tl.store(y_ptr + r, tl.load(x_ptr + tl.load(i_ptr + r)))

x, y, idx = torch.empty(256), torch.empty(128), torch.empty(128, dtype=torch.int32)
two = _compile(independent, (1,), (x, y), {"B": 128, "num_warps": 4}, 90)
one = _compile(chained, (1,), (idx, x, y), {"B": 128, "num_warps": 4}, 90)
print(json.dumps([two.counts.get("LDG in flight"), one.counts.get("LDG in flight")]))
"""


def test_ldg_in_flight_counts_the_loads_issued_before_a_wait(compiler, tmp_path):
    """Compiled for sm_90 on the CPU machine (no interpreter) and read back from the SASS
    (nvdisasm, which Triton ships): two independent loads are both in flight before their add; a
    load whose address is the previous load's value has to wait for it."""
    script = tmp_path / "two_loads.py"  # a file: triton.jit reads its kernels' source
    script.write_text(_TWO_LOADS)
    r = compiler.script(script)
    assert r.returncode == 0, r.stderr[-2000:]
    two, one = json.loads(r.stdout.strip().splitlines()[-1])
    if two is None:
        pytest.skip("this triton ships no nvdisasm")
    assert two >= 2 and one == 1, (two, one)


_PREFETCH_B_ADDRESSES = """
import json, re, torch
from gemmtune.kernelinfo import _compile
from gemmtune.kernels import tiled
a, b = torch.empty(64, 128, dtype=torch.float16), torch.empty(128, 1001, dtype=torch.float16)
c = torch.empty(64, 1001, dtype=torch.float16)
with tiled.offline() as launches:
    tiled.launch_tiled(a, b, c, block_m=64, block_n=64, block_k=32, group_m=8, num_stages=3, num_warps=4,
                       k_per_split=128, static=True, indexed_k=True, edge="wrap")
(fn, grid, args, kw), = launches
sass = _compile(fn, grid, args, kw, 90).asm.get("sass") or ""
print(json.dumps({"prefetch": kw["PREFETCH_B"], "b_loads": len(re.findall(r"LDG\\.E\\.U16", sass)),
                  "imm": len(re.findall(r"LDG\\.E\\.U16 R\\d+, desc\\[\\w+\\]\\[R\\d+\\.64\\+0x", sass))}))
"""


def test_prefetched_b_loads_share_a_base_with_immediate_offsets(compiler, tmp_path):
    """The static indexed form's prefetched B (odd N, row-major: scalar 2-byte loads), compiled for
    sm_90 on the CPU machine: B's addresses are column pointers plus a constant row offset, so a
    thread's loads of one tile are one 64-bit base and an immediate each. Summed into one int32
    offset per element (before session 55), every load took an add and a 64-bit LEA pair of its own
    and none had an immediate (300x20001x512 fp16 at BM128-BN128-BK64, triton 3.6: 401 SASS
    instructions a K iteration against 213). A tile is 32 x 64 / 128 threads = 16 loads a thread;
    the count is the compiler's, so the test asks for all but one of a tile's with an immediate."""
    script = tmp_path / "prefetch_b.py"
    script.write_text(_PREFETCH_B_ADDRESSES)
    r = compiler.script(script)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    if got["b_loads"] == 0:
        pytest.skip("this triton ships no SASS disassembler")
    assert got["prefetch"] and got["imm"] >= 15, got
