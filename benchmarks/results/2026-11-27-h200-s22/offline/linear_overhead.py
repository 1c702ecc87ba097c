import sys, timeit
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[4] / "src"))
import torch, gemmtune
from gemmtune import nn as gnn, dispatch as D
torch.set_num_threads(1)
lin = torch.nn.Linear(64, 64, bias=True)
x = torch.randn(2, 64)
d = gemmtune.compile_mm(n=64, k=64, dtype="float32", layout_b="col", hints={"m": [2]}, tune_fn=lambda probs, **kw: {p: "aten" for p in probs}, progress=False)
m = gnn.Linear.from_linear(lin, d)
with torch.no_grad():
    for _ in range(5): m(x)
    print(m.eager_paths)
    for f, name in [(lin, "nn.Linear"), (m, "gemmtune.nn.Linear"), (lambda t: torch.nn.functional.linear(t, lin.weight, lin.bias), "F.linear")]:
        n = 20000
        ts = [timeit.timeit(lambda: f(x), number=n) / n * 1e6 for _ in range(5)]
        print(name, round(min(ts), 3), "us")
