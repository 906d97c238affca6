"""The im2col/col2im walk of the conv kernels (row positions per tap pair, column bounds per
column tap, plain copy loops) against torch over many geometries: strides 1-3, padding wider
than the kernel, dilation, 1-d/2-d/3-d, output rows split over chunks (a wide image), and the
forward, transposed and backward kernels that share the walk."""

from __future__ import annotations

import pytest

from ember._src.ops.nn import conv as nn_conv

from conftest import assert_same, make_pair

torch = pytest.importorskip("torch")

# (input shape, weight shape, stride, padding, dilation)
GEOMETRIES = [
    ((3, 2, 14, 14), (5, 2, 5, 5), [1, 1], [2, 2], [1, 1]),
    ((2, 3, 9, 11), (4, 3, 3, 3), [3, 2], [4, 3], [1, 1]),  # padding wider than the kernel
    ((2, 2, 10, 9), (3, 2, 3, 2), [2, 3], [1, 0], [2, 3]),
    ((1, 3, 5, 4), (2, 3, 5, 4), [1, 1], [0, 0], [1, 1]),  # one output position
    ((2, 1, 40, 300), (2, 1, 3, 3), [1, 2], [1, 1], [1, 1]),  # rows split over column chunks
    ((2, 3, 17), (4, 3, 4), [2], [3], [2]),
    ((1, 2, 4, 5, 6), (3, 2, 2, 3, 2), [2, 1, 2], [1, 2, 0], [1, 1, 2]),
    ((0, 2, 6, 6), (3, 2, 3, 3), [1, 1], [1, 1], [1, 1]),  # empty batch
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("geom", GEOMETRIES, ids=str)
def test_conv_forward_backward_geometries(geom, transposed, dtype):
    xs, ws, stride, padding, dilation = geom
    if transposed:  # the weight of a transposed conv is (Cin, Cout, k...)
        ws = (xs[1], ws[0]) + ws[2:]
    outpad = [0] * len(stride)
    ex, tx = make_pair(xs, dtype, low=-1, high=1)
    ew, tw = make_pair(ws, dtype, low=-1, high=1, seed=1)
    eb, tb = make_pair((ws[1] if transposed else ws[0],), dtype, low=-1, high=1, seed=2)
    ty = torch.ops.aten.convolution(tx, tw, tb, stride, padding, dilation, transposed, outpad, 1)
    got = nn_conv.convolution_op(ex, ew, eb, stride, padding, dilation, transposed, outpad, 1)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "float32" else {}
    assert_same(got, ty, **tol)
    eg, tg = make_pair(tuple(ty.shape), dtype, low=-1, high=1, seed=3)
    expected = torch.ops.aten.convolution_backward(tg, tx, tw, [ty.shape[1]], stride, padding, dilation, transposed,
                                                   outpad, 1, [True, True, True])
    grads = nn_conv.convolution_backward_op(eg, ex, ew, [ty.shape[1]], stride, padding, dilation, transposed, outpad,
                                            1, [True, True, True])
    assert_same(grads, expected, **tol)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_unfold_fold_wide_padding(dtype):
    ex, tx = make_pair((2, 3, 7, 9), dtype, low=-1, high=1)
    kw = dict(kernel_size=(3, 4), padding=(3, 2), stride=(2, 3), dilation=(2, 1))
    import ember.nn.functional as EF

    cols = EF.unfold(ex, **kw)
    tcols = torch.nn.functional.unfold(tx, **kw)
    assert_same(cols, tcols)
    assert_same(EF.fold(cols, (7, 9), **kw), torch.nn.functional.fold(tcols, (7, 9), **kw),
                **(dict(rtol=2e-2, atol=2e-2) if dtype == "bfloat16" else {}))
