#!/usr/bin/env python3
"""Offline (no GPU): our tiled kernel against a stand-in for Inductor's mm template, same config,
compiled for sm_90a by the installed triton; counts what the main K loop of each holds.

    PYTHONPATH=src python scripts/parity_ir.py [--out DIR] [--shape 1024x1024x1024] ...

The stand-in (``inductor_mm`` below) follows the structure of torch/_inductor/kernel/templates/
triton_mm.py.jinja as Inductor renders it for a row-major A [M, K] and B [K, N]: sizes and
strides compiled in as constants, ``rm % M`` with max_contiguous/multiple_of on the wrapped
rows, a K loop over ``k_idx`` in [0, cdiv(K, BLOCK_K)) that recomputes its offsets each
iteration, no K mask when EVEN_K, ``acc += tl.dot(...)``, the output index
``xindex = idx_n + N * idx_m`` and a masked store. Ours is compiled through gemmtune's own
offline path (kernelinfo: the launch is recorded by kernels.tiled.offline and specialised by
triton's binder), so it gets exactly the constexprs a real launch would.

Writes, per kernel, TTGIR / LLIR / PTX / SASS (cuobjdump from the triton wheel) under --out and
prints a table of loop facts. These are compile facts, not timings.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from gemmtune import kernelinfo  # noqa: E402
from gemmtune.kernels import tiled  # noqa: E402


@triton.jit
def inductor_mm(A, B, out_ptr0,
                M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                stride_am: tl.constexpr, stride_ak: tl.constexpr,
                stride_bk: tl.constexpr, stride_bn: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                GROUP_M: tl.constexpr, EVEN_K: tl.constexpr):
    pid = tl.program_id(0).to(tl.int32)
    grid_m = (M + BLOCK_M - 1) // BLOCK_M
    grid_n = (N + BLOCK_N - 1) // BLOCK_N
    width = GROUP_M * grid_n
    group_id = pid // width
    group_size = tl.minimum(grid_m - group_id * GROUP_M, GROUP_M)
    pid_m = group_id * GROUP_M + (pid % group_size)
    pid_n = (pid % width) // group_size
    tl.assume(pid_m >= 0)
    tl.assume(pid_n >= 0)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Both operands row-major and at least one block wide: the template's contiguity hints.
    offs_a_m = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)
    offs_b_n = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_idx in range(0, tl.cdiv(K, BLOCK_K)):
        a_k = offs_k[None, :] + k_idx * BLOCK_K
        b_k = offs_k[:, None] + k_idx * BLOCK_K
        # Inductor's load_input renders the index with the strides as literals.
        if EVEN_K:
            a = tl.load(A + (a_k * stride_ak + offs_a_m[:, None] * stride_am))
            b = tl.load(B + (offs_b_n[None, :] * stride_bn + b_k * stride_bk))
        else:
            a = tl.load(A + (a_k * stride_ak + offs_a_m[:, None] * stride_am),
                        mask=offs_k[None, :] < K - k_idx * BLOCK_K, other=0.0)
            b = tl.load(B + (offs_b_n[None, :] * stride_bn + b_k * stride_bk),
                        mask=offs_k[:, None] < K - k_idx * BLOCK_K, other=0.0)
        acc += tl.dot(a, b, allow_tf32=False, out_dtype=tl.float32)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    idx_m = rm[:, None]
    idx_n = rn[None, :]
    mask = (idx_m < M) & (idx_n < N)
    xindex = idx_n + N * idx_m
    tl.store(out_ptr0 + tl.broadcast_to(xindex, acc.shape), acc, mask)


def inductor_launch(a, b, c, bm, bn, bk, g, stages, warps):
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), 1, 1)
    kw = dict(M=M, N=N, K=K, stride_am=a.stride(0), stride_ak=a.stride(1), stride_bk=b.stride(0),
              stride_bn=b.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=g, EVEN_K=K % bk == 0,
              num_warps=warps, num_stages=stages)
    return inductor_mm, grid, (a, b, c), kw


def ours_launches(a, b, c, bm, bn, bk, g, stages, warps, static=False, indexed_k=None, edge="auto"):
    kw = {"edge": edge} if indexed_k is None else {"indexed_k": indexed_k, "edge": edge}
    with tiled.offline() as launches:
        tiled.launch_tiled(a, b, c, block_m=bm, block_n=bn, block_k=bk, group_m=g, num_stages=stages,
                           num_warps=warps, k_per_split=a.shape[1], static=static, **kw)
    return launches


# ---- reading the compiled code -------------------------------------------------------------

def sass_of(cubin: bytes) -> str:
    from triton import knobs
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        r = subprocess.run([knobs.nvidia.cuobjdump.path, "-sass", f.name], capture_output=True, text=True,
                           timeout=120)
    return r.stdout


def ptx_loops(ptx: str) -> list[tuple[str, list[str]]]:
    """(label, instruction lines) of each backward-branch loop in the PTX: the lines from a label
    to the last branch that jumps back to it."""
    lines = [ln.split("//")[0].strip() for ln in ptx.splitlines()]
    labels = {ln[:-1]: i for i, ln in enumerate(lines) if re.fullmatch(r"\$L__\w+:", ln)}
    loops = []
    for i, ln in enumerate(lines):
        m = re.search(r"\bbra(?:\.uni)?\s+(\$L__\w+);", ln)
        if m and m.group(1) in labels and labels[m.group(1)] < i:
            body = [x for x in lines[labels[m.group(1)]:i + 1] if x and not x.endswith(":")]
            loops.append((m.group(1), body))
    return loops


def sass_loops(sass: str) -> list[tuple[str, list[str]]]:
    """Same for cuobjdump's SASS: the instructions from the target of a backward BRA to that BRA."""
    instrs = [(int(m.group(1), 16), m.group(2)) for m in
              re.finditer(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", sass)]
    loops = []
    for i, (addr, ins) in enumerate(instrs):
        m = re.search(r"\bBRA\s+(?:`\()?(0x[0-9a-f]+)", ins)
        if m and int(m.group(1), 16) < addr:
            target = int(m.group(1), 16)
            loops.append((hex(target), [x for a, x in instrs if target <= a <= addr]))
    return loops


PTX_CLASSES = (
    ("cp.async (16B)", r"^(?:@%p\d+\s+)?cp\.async\.c[ag]\.shared\.global.*(?:0x10|16),"),
    ("cp.async other", r"^(?:@%p\d+\s+)?cp\.async\.c[ag]\.shared\.global(?!.*(?:0x10|16),)"),
    ("cp.async.commit_group", r"^cp\.async\.commit_group"),
    ("cp.async.wait_group", r"^cp\.async\.wait_group"),
    ("tma", r"cp\.async\.bulk\.tensor"),
    ("ld.global", r"^(?:@!?%p\d+\s+)?ld\.global"),
    ("wgmma.mma_async", r"^wgmma\.mma_async"),
    ("wgmma.fence", r"^wgmma\.fence"),
    ("wgmma.commit_group", r"^wgmma\.commit_group"),
    ("wgmma.wait_group", r"^wgmma\.wait_group"),
    ("bar.sync", r"^bar\.sync|^barrier"),
    ("predicated (@p)", r"^@!?%p"),
    ("setp", r"^setp\."),
    ("selp", r"^selp\."),
    ("int 32-bit (add/sub/mul/mad/shl/shr/and/or/xor .s32/.u32/.b32)",
     r"^(?:add|sub|mul|mad|shl|shr|and|or|xor|min|max)(?:\.lo|\.wide)?\.(?:s32|u32|b32)\b"),
    ("int 64-bit (.s64/.u64/.b64 arithmetic)",
     r"^(?:add|sub|mul|mad|shl|shr|and|or|xor)(?:\.lo|\.wide)?\.(?:s64|u64|b64)\b"),
    ("mul.wide / cvt to 64", r"^mul\.wide|^cvt\.[su]64"),
    ("mov", r"^mov\."),
)

SASS_CLASSES = (
    ("LDGSTS (cp.async)", r"^(?:@!?U?P\w+\s+)?LDGSTS"),
    ("LDGDEPBAR/DEPBAR", r"DEPBAR"),
    ("HGMMA", r"^(?:@!?U?P\w+\s+)?HGMMA"),
    ("WARPGROUP.ARRIVE/DEPBAR", r"^WARPGROUP"),
    ("BAR", r"^(?:@!?U?P\w+\s+)?BAR\b"),
    ("LDSM/LDS", r"^(?:@!?U?P\w+\s+)?LDS"),
    ("IADD3/IMAD/LEA/LOP3/SHF (int ALU)", r"^(?:@!?U?P\w+\s+)?(?:IADD3|IMAD|LEA|LOP3|SHF|IADD|ISETP|SEL|IABS|I2F|F2I)"),
    ("ISETP", r"^(?:@!?U?P\w+\s+)?ISETP"),
    ("uniform U* ops", r"^(?:@!?U?P\w+\s+)?U[A-Z]"),
    ("R2UR", r"R2UR"),
    ("predicated", r"^@!?U?P"),
    ("total", r"."),
)


def store_kinds(sass: list[str]) -> str:
    """``STG.E.128 x8, ...``: the global store instructions by opcode (width), predicates dropped."""
    kinds: dict[str, int] = {}
    for ins in sass:
        m = re.match(r"(?:@!?U?P\w+\s+)?(STG\S*)", ins)
        if m:
            kinds[m.group(1)] = kinds.get(m.group(1), 0) + 1
    return ", ".join(f"{k} x{v}" for k, v in sorted(kinds.items())) or "-"


def loop_order(body: list[str]) -> str:
    """The K loop's SASS as one character an instruction: A WARPGROUP.ARRIVE, G HGMMA, W WARPGROUP.DEPBAR,
    B BAR, L LDGSTS, D (LDG)DEPBAR, . anything else; then where the arrive sits and how many
    instructions the LDGSTS span (first to last). Inductor's template on 512x4096x4096 bf16,
    BM64-BN128-BK64-S4-W4, triton 3.6: the arrive at 26, the 12 LDGSTS within 27 (its next stage's
    addresses computed before the HGMMAs)."""
    sig = ""
    for ins in body:
        op = re.sub(r"^@!?U?P\w+\s+", "", ins).split()[0]
        sig += ("G" if op.startswith("HGMMA") else "B" if op.startswith("BAR") else "L" if op.startswith("LDGSTS")
                else "A" if op.startswith("WARPGROUP.ARRIVE") else "W" if op.startswith("WARPGROUP.DEPBAR")
                else "D" if "DEPBAR" in op else ".")
    ldg = [i for i, c in enumerate(sig) if c == "L"]
    return f"{sig}  arrive at {sig.find('A')}, LDGSTS span {ldg[-1] - ldg[0] + 1 if ldg else 0}"


def classify(body: list[str], classes) -> dict:
    return {name: sum(1 for ln in body if re.search(pat, ln)) for name, pat in classes}


def ttgir_facts(ttgir: str) -> dict:
    return {
        "scf.for": ttgir.count("scf.for"),
        "async_copy_global_to_local": ttgir.count("ttg.async_copy_global_to_local"),
        "async_wait": len(re.findall(r"ttg\.async_wait .*num = (\d+)", ttgir)),
        "async_wait nums": re.findall(r"ttg\.async_wait .*num = (\d+)", ttgir),
        "warp_group_dot": ttgir.count("ttng.warp_group_dot "),
        "warp_group_dot_wait pendings": re.findall(r"ttng\.warp_group_dot_wait .*pendings = (\d+)", ttgir),
        "local_alloc shapes": re.findall(r"ttg\.local_alloc .*?!ttg\.memdesc<([^,]+x[^,]+)", ttgir),
        "tt.load (not async)": ttgir.count(" tt.load "),
        "loop iter_args": [len(m.split(",")) for m in re.findall(r"iter_args\((.*?)\)\s*->", ttgir)],
        "i64 ops": len(re.findall(r"arith\.\w+ .*: (?:tensor<[^>]*x)?i64", ttgir)),
    }


def compile_one(fn, grid, args, kwargs, arch):
    return kernelinfo._compile(fn, grid, args, kwargs, arch)


def analyse(tag, info, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    for kind in ("ttir", "ttgir", "llir", "ptx"):
        if kind in info.asm:
            (out / f"{tag}.{kind}").write_text(info.asm[kind])
    sass = sass_of(info.asm["cubin"]) if "cubin" in info.asm else ""
    (out / f"{tag}.sass").write_text(sass)
    ptx = info.asm["ptx"]
    ploops = ptx_loops(ptx)
    sloops = sass_loops(sass)
    # The main K loop is the one holding the wgmma (PTX) / HGMMA (SASS).
    pmain = [b for _, b in ploops if any("wgmma.mma_async" in x for x in b)]
    smain = [b for _, b in sloops if any("HGMMA" in x for x in b)]
    allptx = [x for x in (ln.split("//")[0].strip() for ln in ptx.splitlines()) if x and not x.endswith(":")]
    allsass = [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", sass) if m.group(1) != "NOP"]
    first = {}
    for name, pat in (("first LDGSTS", "LDGSTS"), ("first HGMMA", "HGMMA")):
        first[name] = next((i for i, x in enumerate(allsass) if pat in x), None)
    summary = {
        "SASS instructions": len(allsass), **first,
        "LDGSTS": sum("LDGSTS" in x for x in allsass), "HGMMA": sum("HGMMA" in x for x in allsass),
        # A runtime integer division/modulo compiles to I2F + MUFU.RCP + a fix-up sequence.
        "MUFU.RCP (runtime int div/mod)": sum("MUFU.RCP" in x for x in allsass),
        # The output's stores by width (STG.E.128 is 16 bytes, STG.E.U16 one bf16).
        "stores": store_kinds(allsass),
        "K loop": ("unrolled" if not smain and sum("HGMMA" in x for x in allsass) > 4
                   else f"{len(smain[0])} SASS instr / iter" if smain else "?"),
        "K loop int ALU / iter": classify(smain[0], SASS_CLASSES)["IADD3/IMAD/LEA/LOP3/SHF (int ALU)"] if smain else None,
    }
    return {
        "tag": tag, "summary": summary, "registers": info.registers, "spill_bytes": info.spill_bytes, "shared": info.shared_bytes,
        "num_stages": info.num_stages, "grid": info.grid,
        "ttgir": ttgir_facts(info.asm["ttgir"]),
        "ptx_loops": len(ploops), "sass_loops": len(sloops),
        "ptx_main_loop": classify(pmain[0], PTX_CLASSES) if pmain else None,
        "ptx_main_loop_lines": len(pmain[0]) if pmain else None,
        "ptx_whole": classify(allptx, PTX_CLASSES),
        "sass_main_loop": classify(smain[0], SASS_CLASSES) if smain else None,
        "sass_loop_order": loop_order(smain[0]) if smain else None,
        "sass_whole": classify(allsass, SASS_CLASSES),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "parity-ir"), help="where the IR goes")
    ap.add_argument("--shape", action="append", help="MxNxK (bf16, row-major A and B); repeatable")
    ap.add_argument("--config", default="64,128,64,8,4,4", help="BM,BN,BK,GROUP_M,stages,warps")
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--json")
    ap.add_argument("--indexed-k", action="store_true", help="also the indexed K loop, plain and static")
    ap.add_argument("--wrap", action="store_true", help="also ours with edge='wrap' (rows / cols past the edge "
                    "wrap around instead of being masked), plain and static")
    ap.add_argument("--order", action="store_true", help="also print each kernel's K loop in SASS order "
                    "(loop_order: where the address math sits against the HGMMAs and the LDGSTS)")
    args = ap.parse_args()
    if tiled._INTERPRETED:
        raise SystemExit("compiles real kernels: run without TRITON_INTERPRET=1")
    shapes = args.shape or ["1024x1024x1024", "512x4096x4096"]
    bm, bn, bk, g, stages, warps = map(int, args.config.split(","))
    rows = []
    for shp in shapes:
        M, N, K = map(int, shp.split("x"))
        a = torch.empty(M, K, dtype=torch.bfloat16)
        b = torch.empty(K, N, dtype=torch.bfloat16)
        c = torch.empty(M, N, dtype=torch.bfloat16)
        out = Path(args.out) / shp
        kernels = [("inductor", [inductor_launch(a, b, c, bm, bn, bk, g, stages, warps)]),
                   ("ours", ours_launches(a, b, c, bm, bn, bk, g, stages, warps)),
                   ("ours_static", ours_launches(a, b, c, bm, bn, bk, g, stages, warps, static=True))]
        if args.wrap:
            kernels += [("ours_wrap", ours_launches(a, b, c, bm, bn, bk, g, stages, warps, edge="wrap")),
                        ("ours_static_wrap", ours_launches(a, b, c, bm, bn, bk, g, stages, warps, static=True,
                                                           edge="wrap"))]
        if args.indexed_k:
            kernels += [("ours_ik", ours_launches(a, b, c, bm, bn, bk, g, stages, warps, indexed_k=True)),
                        ("ours_static_ik", ours_launches(a, b, c, bm, bn, bk, g, stages, warps, static=True,
                                                         indexed_k=True))]
            if args.wrap:  # the form a tuned odd row runs most often (session 45's call 6)
                kernels += [("ours_static_ik_wrap", ours_launches(a, b, c, bm, bn, bk, g, stages, warps,
                                                                  static=True, indexed_k=True, edge="wrap"))]
        for tag, launches in kernels:
            (fn, grid, fargs, kw), = launches
            info = compile_one(fn, grid, fargs, kw, args.arch)
            row = analyse(tag, info, out)
            row["shape"] = shp
            rows.append(row)
    import triton as _t
    cols = ["registers", "shared", "num_stages"]
    keys = list(rows[0]["summary"])
    print(f"triton {_t.__version__}, sm_{args.arch}, config {args.config}")
    print("| shape | kernel | " + " | ".join(cols + keys) + " |")
    print("|---" * (2 + len(cols) + len(keys)) + "|")
    for r in rows:
        print(f"| {r['shape']} | {r['tag']} | " + " | ".join(str(r[c]) for c in cols) + " | "
              + " | ".join(str(r["summary"][k]) for k in keys) + " |")
    for r in rows:
        print(f"== {r['shape']} {r['tag']}: regs {r['registers']} spill {r['spill_bytes']} smem {r['shared']} "
              f"stages {r['num_stages']} grid {r['grid']}")
        print("   ttgir:", r["ttgir"])
        print("   ptx main loop:", r["ptx_main_loop_lines"], "lines", r["ptx_main_loop"])
        print("   sass main loop:", r["sass_main_loop"])
        print("   sass whole:", r["sass_whole"])
        if args.order:
            print("   sass loop order:", r["sass_loop_order"])
    if args.json:
        Path(args.json).write_text(json.dumps({"triton": _t.__version__, "arch": args.arch, "config": args.config,
                                               "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
