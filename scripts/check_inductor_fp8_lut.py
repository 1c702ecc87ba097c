"""GPU check: torch.compile(mode="max-autotune-no-cudagraphs") of torch._scaled_mm takes gemmtune's
exported Inductor lookup-table entries for fp8 (tuned_scaled_mm's keys), and its outputs match fp64.

    python scripts/check_inductor_fp8_lut.py      # one line per case, then 'inductor fp8 lut: ok'

Cases (fp8 e4m3, bf16 output, A row-major, B = W.t()):

* tensor-wise () scales, no bias, triton_mm -> triton::mm with the scaling epilogue;
* row-wise (M, 1) and W's (N, 1) scale transposed to (1, N) (strides (1, 1)), a bias,
  triton_mm -> triton::mm;
* tensor-wise (1, 1) scales, a bias, aten -> aten::_scaled_mm (cuBLASLt, called without out_dtype);
* row-wise contiguous (M, 1)/(1, N), no bias, persistent_tma ->
  triton::scaled_mm_device_tma_epilogue_scaling (with enable_persistent_tma_matmul on).

A case passes when Inductor logged a lookup hit for scaled_mm naming the expected template, the
generated code carries our config (BLOCK_M/N/K, GROUP_M, num_stages, num_warps as constexprs and
launch options; for aten an extern _scaled_mm call without out_dtype, which only a lookup hit
gives), and the output is within 1e-2 (relative Frobenius norm) of an fp64 reference on the
dequantized operands. On a miss the key Inductor tried is printed next to ours. Exit code 0 when
every case passes. No network; about 30-60 s on an H200.

    python scripts/check_inductor_fp8_lut.py --dry-run   # no GPU: the exported keys and configs only
"""
import logging
import re
import sys
import time

import torch
import triton
from torch._inductor import config as icfg
from torch._inductor.utils import run_and_get_code

from gemmtune import inductor_export as ie
from gemmtune.configs import Choice
from gemmtune.problem import Problem
from gemmtune.scaled import reference
from gemmtune.table import LookupTable, TableChoice, provenance

records = []


class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())


# The lookup module's logger (torch 2.13: lookup_table/choices.py; the package's name covers a
# lookup_table.py module too). DEBUG: a hit logs the key found, a miss the keys tried. Not
# propagated: torch's own handler would print every line again.
for name in ("torch._inductor.lookup_table", "torch._inductor.lookup_table.choices"):
    lg = logging.getLogger(name)
    lg.setLevel(logging.DEBUG)
    lg.addHandler(Keep())
    lg.propagate = False

E4M3 = torch.float8_e4m3fn
DRY = "--dry-run" in sys.argv[1:]
if DRY:
    dev, cap = "NVIDIA H200", "9.0"
else:
    dev = torch.cuda.get_device_name()
    cap = ".".join(map(str, torch.cuda.get_device_capability()))
prov = provenance(dev, cap, torch.__version__, triton.__version__, "0.1.0", "by-hand")
print(f"torch {torch.__version__}, triton {triton.__version__}, {dev} (sm {cap}){' dry run' if DRY else ''}")

# name, M, N, K, scale mode, scale variant, bias, choice, template id Inductor should report
# (the scale variant picks which of ie.inductor_keys(problem) Inductor should build: VARIANT_KEY)
CASES = [
    ("tensor () triton_mm", 512, 1024, 2048, "tensor", "t0", False,
     "triton_mm:BM128-BN128-BK64-S3-W8-G8", ie.TRITON_MM),
    ("row w_scale.t() +bias triton_mm", 256, 1024, 512, "row", "row_t", True,
     "triton_mm:BM64-BN128-BK128-S3-W4-G4", ie.TRITON_MM),
    ("tensor (1,1) +bias aten", 256, 512, 1024, "tensor", "t11", True, "aten", ie.ATEN_SCALED_MM),
    ("row nobias persistent_tma", 1024, 1024, 2048, "row", "row", False,
     "persistent_tma:BM128-BN128-BK128-S3-W8-G8", ie.SCALED_TMA),
]


VARIANT_KEY = {"t0": 0, "t11": 2, "row": 0, "row_t": 1}  # index into ie.inductor_keys(problem)


def scales(variant, m, n):
    g = torch.Generator(device="cuda").manual_seed(m + n)

    def r(*shape):
        return torch.exp(0.5 * torch.randn(*shape, generator=g, device="cuda"))
    if variant == "t0":
        return r(()), r(())
    if variant == "t11":
        return r(1, 1), r(1, 1)
    if variant == "row_t":
        return r(m, 1), r(n, 1).t()  # (1, N) with strides (1, 1), as a weight's per-row scale transposed
    return r(m, 1), r(1, n)


problems = {c[0]: Problem.from_sizes(c[1], c[2], c[3], "e4m3", "bf16", layout_b="col", op="scaled_mm",
                                     scale=c[4], bias=c[6]) for c in CASES}
table = LookupTable(prov, {problems[c[0]].key: [TableChoice(Choice.parse(c[7]))] for c in CASES})
conv = ie.convert(table)
print(f"exported: {len(conv.table)} keys for {len(CASES)} problems; skipped: {[str(s) for s in conv.skipped]}")
for c in CASES:
    key = ie.inductor_keys(problems[c[0]])[VARIANT_KEY[c[5]]]
    print(f"  {c[0]}: {len(ie.inductor_keys(problems[c[0]]))} keys, this case's {key}\n    -> {conv.table[key]}")
if DRY:
    ok = not conv.skipped and all(conv.table[ie.inductor_keys(problems[c[0]])[0]][0]["template_id"] == c[8]
                                  for c in CASES)
    print("dry run: ok" if ok else "dry run: FAILED")
    sys.exit(0 if ok else 1)
ie.install(table)
icfg.force_disable_caches = True  # every case lowers (and looks up) afresh

bad = 0
t_all = time.time()
for name, m, n, k, mode, variant, with_bias, choice_id, template in CASES:
    p = problems[name]
    ours = ie.inductor_keys(p)
    cfg = conv.table[ours[0]][0]
    a = torch.randn(m, k, device="cuda").to(E4M3)
    b = torch.randn(n, k, device="cuda").to(E4M3).t()
    sa, sb = scales(variant, m, n)
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16) if with_bias else None
    patch = {"triton.enable_persistent_tma_matmul": template == ie.SCALED_TMA}
    start = len(records)
    t0 = time.time()
    try:
        torch._dynamo.reset()
        with icfg.patch(patch):
            fn = torch.compile(lambda a, b, sa, sb, bias: torch._scaled_mm(
                a, b, sa, sb, bias=bias, out_dtype=torch.bfloat16), mode="max-autotune-no-cudagraphs")
            out, code = run_and_get_code(fn, a, b, sa, sb, bias)
    except Exception as e:  # noqa: BLE001 - report and go on
        print(f"{name}: FAILED {type(e).__name__}: {str(e)[:400]}")
        for msg in records[start:]:
            print("   log:", msg[:300])
        bad += 1
        continue
    secs = time.time() - t0
    logs = records[start:]
    hit = [msg for msg in logs if "lookup hit for scaled_mm" in msg]
    hit_ok = any(template in msg for msg in hit)
    found = [k for msg in logs for k in re.findall(r"key '(.*)' for scaled_mm", msg)]
    which = (f"key variant {ours.index(found[0])}" + (" as expected" if ours.index(found[0]) == VARIANT_KEY[variant]
                                                      else f", expected {VARIANT_KEY[variant]}")
             if found and found[0] in ours else "key not logged")
    src = "\n".join(code)
    if template == ie.ATEN_SCALED_MM:
        calls = [ln.strip() for ln in src.splitlines() if "extern_kernels._scaled_mm(" in ln]
        code_ok = len(calls) == 1 and "out_dtype" not in calls[0] and "triton_tem" not in src
        seen = calls[:1]
    else:
        # Template kwargs are written as constexpr defines ("BLOCK_M : tl.constexpr = 128") and
        # into the kernel's inductor_meta config_args ("'BLOCK_M': 128"); either will do.
        names = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"] + (["SCALE_RECIPE_A"] if template == ie.SCALED_TMA
                                                                else [])
        want = [(f"{nm} : tl.constexpr = {cfg[nm]}", f"'{nm}': {cfg[nm]}") for nm in names]
        want += [(f"num_stages={cfg['num_stages']}",) * 2, (f"num_warps={cfg['num_warps']}",) * 2]
        missing = [w[0] for w in want if not any(x in src for x in w)]
        code_ok = not missing and "triton_tem" in src
        seen = missing or [f"{len(want)} config markers found"]
    ref = reference(a, b, sa, sb, bias)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    eager = torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=torch.bfloat16)
    eager_err = ((eager.double() - ref).norm() / ref.norm()).item()
    ok = hit_ok and code_ok and err < 1e-2 and out.dtype == torch.bfloat16
    bad += not ok
    print(f"{name}: {'ok' if ok else 'FAILED'}; hit {'yes' if hit_ok else 'NO'} ({template}, {which}); "
          f"code {'ok' if code_ok else 'NO'} {seen}; rel err {err:.2e} (eager {eager_err:.2e}); {secs:.1f} s")
    if not ok:
        print("   our key for this case:", ours[VARIANT_KEY[variant]])
        for msg in logs:
            if "lookup" in msg.lower() or "key" in msg.lower():
                print("   log:", msg[:400])
        tried = [re.findall(r"tried keys: (.*)\) \(table", msg) for msg in logs]
        if any(tried):
            print("   inductor tried:", [t for t in tried if t])
print(f"total {time.time() - t_all:.1f} s")
print("inductor fp8 lut: ok" if not bad else f"inductor fp8 lut: {bad} of {len(CASES)} failed")
sys.exit(1 if bad else 0)
