"""The benchmark's operands for an unaligned key are the tensors a model passes for it: the pointer is
shifted only where the fresh operand's strides are aligned (gemmtune.bench.measure.make_operand)."""
import pytest

from gemmtune.bench.measure import make_inputs
from gemmtune.problem import Problem


def _ptr_mod(t):
    return t.data_ptr() % 16


@pytest.mark.parametrize("m,n,k,la,lb", [
    (64, 1, 96, "row", "row"),     # a K x 1 column stored row-major: a 2-byte leading stride
    (64, 4, 96, "row", "row"),     # rows of 8 bytes (N = 4, bf16)
    (33, 17, 65, "row", "col"),    # odd K: A's rows and B's columns are 130 bytes
    (17, 33, 65, "strided", "row"),
])
@pytest.mark.parametrize("op", ["mm", "bmm"])
def test_naturally_unaligned_operands_keep_an_aligned_pointer(m, n, k, la, lb, op):
    p = Problem.from_sizes(m, n, k, "bf16", layout_a=la, layout_b=lb, batch=3 if op == "bmm" else 1, op=op)
    a, b = make_inputs(p, "cpu", 2, 0)[1]
    # The key is what torch.randn's tensors of these sizes give (the dispatcher's key at run time) ...
    assert Problem.from_tensors(a, b).key == p.key
    # ... and so are the pointers: a shifted one made cuBLAS slower than on a model's tensors.
    for t, al in ((a, p.aligned_a), (b, p.aligned_b)):
        if not al:
            assert _ptr_mod(t) == 0 and t.storage_offset() == 0


@pytest.mark.parametrize("op", ["mm", "bmm"])
def test_aligned_strides_get_a_shifted_pointer_when_the_key_is_unaligned(op):
    p = Problem.from_sizes(64, 64, 64, "bf16", aligned_a=False, aligned_b=False, batch=3 if op == "bmm" else 1, op=op)
    a, b = make_inputs(p, "cpu", 1, 0)[0]
    assert Problem.from_tensors(a, b).key == p.key
    assert _ptr_mod(a) == 2 and _ptr_mod(b) == 2
    aligned = Problem.from_sizes(64, 64, 64, "bf16", batch=3 if op == "bmm" else 1, op=op)
    a, b = make_inputs(aligned, "cpu", 1, 0)[0]
    assert _ptr_mod(a) == 0 and _ptr_mod(b) == 0 and Problem.from_tensors(a, b).key == aligned.key

