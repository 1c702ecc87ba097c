import sys, pickle, math
import numpy as np
d = pickle.load(open(sys.argv[1], "rb")); res = d["res"]
def ev(delta):
    h = 0; ha = 0
    for r in res:
        t = r["t"]; k = np.log(r["pred"]); ids = np.array(r["ids"])
        base = ids == "aten:"
        rest = np.flatnonzero(~base)
        j = rest[np.argmin(k[rest])]
        if base.any():
            a = np.flatnonzero(base)[0]
            pick = a if k[a] < k[j] - delta else j
        else:
            pick = j
        h += t[pick] <= 1.1 * t.min()
    return h / len(res)
for dl in (-0.2, -0.1, 0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 10):
    print(dl, round(ev(dl), 4))
