"""Follows docs/adding-an-op.md step by step, so the guide stays true."""

import ember
from ember._src.device import META
from ember._src.dispatch import OPS, DispatchMode, define
from ember._src.tensor import new_empty_tensor

from conftest import assert_same, make_pair, torch


def test_the_guide_adds_a_working_op():
    name = "softsign2_guide"
    if name in OPS:  # the test may run twice in one process
        del OPS[name]
    op = define(f"{name}(Tensor self) -> Tensor", ("pointwise",))

    def meta(x):
        dtype = x.dtype if x.dtype.is_floating_point else ember.get_default_dtype()
        return new_empty_tensor(x._shape, dtype, META)

    op.meta = meta
    op.kernels["meta"] = meta

    @op.kernel("cpu")
    def cpu(x):
        return x / (1 + x.abs())

    # The op runs, matches the reference, and is reachable by name.
    x, tx = make_pair((3, 4), "float32", layout="transposed")
    assert_same(ember.ops[name](x), torch.nn.functional.softsign(tx))
    # The meta device runs it without data.
    m = ember.ops[name](ember.empty(2, 5, device="meta"))
    assert m.device.type == "meta" and m.shape == (2, 5)

    # A dispatch mode sees the call, and so would every upper layer.
    seen = []

    class Record(DispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.name)
            return func(*args, **(kwargs or {}))

    with Record():
        ember.ops[name](x)
    assert seen[0] == name
    del OPS[name]
