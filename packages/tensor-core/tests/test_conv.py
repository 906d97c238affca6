"""Convolutions (forward and the convolution_backward op) and im2col/col2im against torch."""

from __future__ import annotations

import pytest

import ember
from ember._src.ops.nn import conv as nn_conv

from conftest import assert_same, from_torch, make_pair

torch = pytest.importorskip("torch")
F = torch.nn.functional

# (input shape, weight shape, kwargs): 1-d, 2-d, 3-d with stride, padding, dilation, groups.
CONV_CASES = [
    ((2, 4, 11), (6, 2, 3), dict(stride=2, padding=1, groups=2)),
    ((2, 3, 9, 8), (4, 3, 3, 2), dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1))),
    ((1, 4, 7, 7), (4, 1, 3, 3), dict(padding=1, groups=4)),
    ((2, 3, 6, 6), (5, 3, 1, 1), {}),
    ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), dict(stride=(1, 2, 1), padding=1)),
]
_FN = {3: "conv1d", 4: "conv2d", 5: "conv3d"}


def _weights(shape, dtype, seed):
    return make_pair(shape, dtype, low=-1, high=1, seed=seed)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_forward(case, dtype):
    xs, ws, kw = case
    ex, tx = make_pair(xs, dtype, low=-1, high=1)
    ew, tw = _weights(ws, dtype, 1)
    eb, tb = _weights((ws[0],), dtype, 2)
    fn = _FN[len(xs)]
    tol = dict(rtol=2e-2, atol=5e-2) if dtype in ("float16", "bfloat16") else {}
    assert_same(getattr(ember, fn)(ex, ew, eb, **kw), getattr(F, fn)(tx, tw, tb, **kw), **tol)
    assert_same(getattr(ember, fn)(ex, ew, None, **kw), getattr(F, fn)(tx, tw, None, **kw), **tol)


@pytest.mark.parametrize("layout", ["transposed", "sliced"])
def test_conv_noncontiguous(layout):
    ex, tx = make_pair((2, 3, 6, 7), "float32", layout=layout)
    ew, tw = _weights((4, 3, 3, 3), "float32", 1)
    assert_same(ember.conv2d(ex, ew, padding=1), F.conv2d(tx, tw, padding=1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kernel,dilation", [((3, 3), 1), ((2, 4), 1), ((2, 3), 2)])
def test_conv_same_valid_unbatched(kernel, dilation):
    ex, tx = make_pair((3, 7, 6), "float64")
    ew, tw = _weights((2, 3) + kernel, "float64", 1)
    with _maybe_warns(kernel, dilation):
        got = ember.conv2d(ex, ew, padding="same", dilation=dilation)
    with _maybe_warns(kernel, dilation):
        expected = F.conv2d(tx, tw, padding="same", dilation=dilation)
    assert_same(got, expected)
    assert_same(ember.conv2d(ex, ew, padding="valid"), F.conv2d(tx, tw, padding="valid"))


def _maybe_warns(kernel, dilation):
    import contextlib

    even = any(dilation * (k - 1) % 2 for k in kernel)
    return pytest.warns(UserWarning) if even else contextlib.nullcontext()


TRANSPOSE_CASES = [
    ((2, 4, 5), (4, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((2, 4, 5, 4), (4, 2, 3, 2), dict(stride=(2, 1), padding=(1, 0), groups=2)),
    ((1, 2, 4, 4), (2, 3, 3, 3), dict(dilation=2, output_padding=1, stride=1)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("case", TRANSPOSE_CASES)
def test_conv_transpose(case, dtype):
    xs, ws, kw = case
    ex, tx = make_pair(xs, dtype, low=-1, high=1)
    ew, tw = _weights(ws, dtype, 1)
    eb, tb = _weights((ws[1] * kw.get("groups", 1),), dtype, 2)
    fn = "conv_transpose1d" if len(xs) == 3 else "conv_transpose2d"
    tol = dict(rtol=2e-2, atol=5e-2) if dtype == "bfloat16" else {}
    assert_same(getattr(ember, fn)(ex, ew, eb, **kw), getattr(F, fn)(tx, tw, tb, **kw), **tol)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_convolution_backward(transposed, dtype):
    xs, ws = ((2, 4, 6, 5), (4, 2, 3, 3))
    stride, padding, dilation, groups = [2, 1], [1, 1], [1, 2], 2
    outpad = [1, 0] if transposed else [0, 0]
    ex, tx = make_pair(xs, dtype, low=-1, high=1)
    ew, tw = _weights(ws, dtype, 1)
    ty = torch.ops.aten.convolution(tx, tw, None, stride, padding, dilation, transposed, outpad, groups)
    eg, tg = make_pair(tuple(ty.shape), dtype, low=-1, high=1, seed=3)
    bias = [ty.shape[1]]
    expected = torch.ops.aten.convolution_backward(tg, tx, tw, bias, stride, padding, dilation, transposed, outpad,
                                                   groups, [True, True, True])
    got = nn_conv.convolution_backward_op(eg, ex, ew, bias, stride, padding, dilation, transposed, outpad, groups,
                                          [True, True, True])
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == "float32" else {}
    assert_same(got, expected, **tol)
    partial = nn_conv.convolution_backward_op(eg, ex, ew, None, stride, padding, dilation, transposed, outpad, groups,
                                              [False, True, False])
    assert partial[0] is None and partial[2] is None
    assert_same(partial[1], expected[1], **tol)


@pytest.mark.parametrize("xs,ws,stride,padding", [
    ((3, 5, 13, 11), (7, 5, 3, 3), (2, 2), (2, 1)),  # small image: direct kernels, uneven borders
    ((3, 64, 40, 40), (64, 64, 3, 3), (2, 2), (1, 1)),  # padded image past L2: the row-band path
    ((4, 6, 14, 14), (16, 6, 5, 5), (1, 1), (0, 3)),  # row tiles (16-pixel rows), border on one side only
    ((3, 6, 14, 14), (16, 6, 5, 5), (1, 1), (0, 0)),  # LeNet's 6->16: row tiles of 10 pixels
    ((2, 3, 11, 12), (9, 3, 3, 5), (1, 1), (1, 0)),  # 9 channels on 8-pixel rows
    ((2, 4, 14, 16), (12, 4, 3, 3), (2, 1), (1, 0)),  # 14-pixel rows two image rows apart
    ((2, 1, 28, 28), (6, 1, 5, 5), (1, 1), (2, 2)),  # LeNet's 1->6: by-rows kernels
    ((2, 16, 12, 12), (112, 16, 3, 3), (1, 1), (1, 1)),  # channel tiles of 4, 2 and 1 vectors
    ((2, 16, 9, 10), (80, 16, 3, 3), (2, 1), (1, 1)),  # (AVX2: 8-float vectors, other splits)
], ids=str)
def test_direct_conv_padded_borders_across_images(xs, ws, stride, padding):
    # The direct float32 kernels copy each image into a padded buffer reused by the next image,
    # zeroing only its border: forward, input and weight gradients over a batch of distinct
    # images against torch.
    ex, tx = make_pair(xs, "float32", low=-1, high=1, seed=4)
    ew, tw = _weights(ws, "float32", 5)
    ty = torch.ops.aten.convolution(tx, tw, None, stride, padding, [1, 1], False, [0, 0], 1)
    eg, tg = make_pair(tuple(ty.shape), "float32", low=-1, high=1, seed=6)
    expected = torch.ops.aten.convolution_backward(tg, tx, tw, [ws[0]], stride, padding, [1, 1], False, [0, 0], 1,
                                                   [True, True, True])
    got = nn_conv.convolution_backward_op(eg, ex, ew, [ws[0]], stride, padding, [1, 1], False, [0, 0], 1,
                                          [True, True, True])
    assert_same(ember.conv2d(ex, ew, None, stride, padding), ty, rtol=1e-4, atol=1e-4)
    assert_same(got, expected, rtol=1e-4, atol=2e-4)


@pytest.mark.parametrize("xs,ws,stride,padding", [
    ((2, 8, 15, 15), (6, 8, 3, 3), (2, 2), (1, 1)),
    ((2, 6, 17, 12), (5, 6, 5, 5), (2, 2), (2, 0)),  # rows the last window leaves out
    ((3, 4, 10, 11), (7, 4, 2, 3), (2, 3), (1, 2)),  # uneven strides and borders
    ((2, 5, 9, 9), (4, 5, 3, 3), (3, 3), (0, 0)),
    ((2, 6, 8, 8), (8, 6, 1, 1), (2, 2), (0, 0)),  # phases no tap reaches: zeros
    ((1, 64, 30, 30), (64, 64, 3, 3), (2, 2), (1, 1)),
], ids=str)
def test_direct_conv_strided_input_gradient_by_phases(xs, ws, stride, padding):
    # The float32 input gradient at a stride above 1 runs the direct forward kernel once per
    # output phase (conv_direct.cpp backward_input_phases); conv_transpose2d's forward is the
    # same kernel, with a bias and output_padding.
    ex, tx = make_pair(xs, "float32", low=-1, high=1, seed=7)
    ew, tw = _weights(ws, "float32", 8)
    ty = torch.ops.aten.convolution(tx, tw, None, stride, padding, [1, 1], False, [0, 0], 1)
    eg, tg = make_pair(tuple(ty.shape), "float32", low=-1, high=1, seed=9)
    expected = torch.ops.aten.convolution_backward(tg, tx, tw, None, stride, padding, [1, 1], False, [0, 0], 1,
                                                   [True, True, False])
    got = nn_conv.convolution_backward_op(eg, ex, ew, None, stride, padding, [1, 1], False, [0, 0], 1,
                                          [True, True, False])
    assert_same(got[0], expected[0], rtol=1e-4, atol=2e-4)
    assert_same(got[1], expected[1], rtol=1e-4, atol=2e-4)
    eb, tb = make_pair((ws[1],), "float32", low=-1, high=1, seed=10)
    outpad = tuple(s - 1 for s in stride)
    want = F.conv_transpose2d(tg, tw, tb, stride, padding, outpad)
    assert_same(ember.nn.functional.conv_transpose2d(eg, ew, eb, stride, padding, outpad), want, rtol=1e-4,
                atol=2e-4)


@pytest.mark.parametrize("xs,ws,stride,padding,dilation", [
    ((3, 6, 14, 14), (16, 6, 5, 5), (1, 1), (2, 2), (1, 1)),  # LeNet's padded 6->16: 14-pixel rows
    ((2, 3, 8, 8), (9, 3, 5, 5), (1, 1), (2, 2), (1, 1)),  # 8-pixel rows, 9 channels
    ((2, 4, 11, 10), (12, 4, 5, 5), (2, 1), (2, 2), (1, 1)),  # rows two image rows apart, odd height
    ((2, 4, 12, 12), (16, 4, 5, 5), (1, 1), (0, 2), (1, 1)),  # border on the columns only
    ((2, 4, 7, 16), (13, 4, 5, 5), (1, 1), (5, 2), (1, 1)),  # first / last rows all border: bias only
    ((2, 4, 16, 16), (16, 4, 5, 5), (1, 1), (4, 2), (2, 1)),  # dilated rows
    ((2, 5, 10, 10), (16, 5, 3, 3), (1, 1), (1, 1), (1, 1)),  # 3x3, padding 1
    ((2, 5, 9, 12), (11, 5, 3, 3), (1, 1), (2, 1), (1, 1)),
    ((2, 12, 10, 10), (16, 12, 5, 5), (1, 1), (2, 2), (1, 1)),  # the input gradient takes them too
], ids=str)
def test_direct_conv_same_padding_row_tiles(xs, ws, stride, padding, dilation):
    # Row tiles for a "same" column padding (conv_direct.cpp forward_row_tiles_same) leave out the
    # multiply-adds that would read the border: forward with a bias on a non-contiguous input, and
    # the input, weight and bias gradients, against torch.
    ex, tx = make_pair((xs[0], xs[1], xs[3], xs[2]), "float32", low=-1, high=1, seed=11)
    ex, tx = ex.transpose(2, 3), tx.transpose(2, 3)
    ew, tw = _weights(ws, "float32", 12)
    eb, tb = make_pair((ws[0],), "float32", low=-1, high=1, seed=13)
    ty = F.conv2d(tx, tw, tb, stride, padding, dilation)
    assert_same(ember.nn.functional.conv2d(ex, ew, eb, stride, padding, dilation), ty, rtol=1e-4, atol=1e-4)
    eg, tg = make_pair(tuple(ty.shape), "float32", low=-1, high=1, seed=14)
    expected = torch.ops.aten.convolution_backward(tg, tx.contiguous(), tw, [ws[0]], stride, padding, dilation, False,
                                                   [0, 0], 1, [True, True, True])
    got = nn_conv.convolution_backward_op(eg, ex.contiguous(), ew, [ws[0]], stride, padding, dilation, False, [0, 0],
                                          1, [True, True, True])
    assert_same(got, expected, rtol=1e-4, atol=2e-4)


@pytest.mark.parametrize("ws,padding", [((16, 6, 5, 5), 2), ((12, 3, 3, 3), 1)])
def test_direct_conv_same_padding_nonfinite_like_torch(ws, padding):
    # An infinite weight meets only image values: the border adds nothing (not 0 * inf = NaN), as
    # in torch; a NaN or inf pixel reaches the outputs whose windows hold it.
    ex, tx = make_pair((2, ws[1], 12, 12), "float32", low=0.5, high=1, seed=15)
    ew, tw = _weights(ws, "float32", 16)
    tw[3, 1, 0, 0] = float("inf")
    tw[5, 0, -1, -1] = float("-inf")
    tx[0, 0, 4, 7] = float("nan")
    tx[1, 1, 0, 11] = float("inf")
    ex, ew = from_torch(tx), from_torch(tw)
    ty = F.conv2d(tx, tw, None, 1, padding)
    got = ember.nn.functional.conv2d(ex, ew, None, 1, padding)
    assert_same(got, ty, rtol=1e-4, atol=1e-4)
    assert int(torch.isnan(ty).sum()) > 0 and int(torch.isinf(ty).sum()) > 0


def test_convolution_meta():
    x = ember.empty((2, 3, 8, 8), device="meta")
    w = ember.empty((4, 3, 3, 3), device="meta")
    out = nn_conv.convolution_op(x, w, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 1)
    assert tuple(out.shape) == (2, 4, 4, 4) and out.device.type == "meta"


ERRORS = [
    (lambda m, x, w: m.conv2d(x[:, :2], w)),                          # channel count
    (lambda m, x, w: m.conv2d(x[0, 0], w)),                           # rank
    (lambda m, x, w: m.conv2d(x[..., :2, :2], w)),                    # kernel larger than input
    (lambda m, x, w: m.conv2d(x, w, padding=-1)),
    (lambda m, x, w: m.conv2d(x, w, stride=0)),
    (lambda m, x, w: m.conv2d(x, w, stride=(1, 1, 1))),
    (lambda m, x, w: m.conv2d(x, w, groups=2)),
    (lambda m, x, w: m.conv2d(x, w, padding="same", stride=2)),
    (lambda m, x, w: m.conv2d(x, w, padding="full")),
    (lambda m, x, w: m.conv2d(x.double(), w)),
    (lambda m, x, w: m.conv2d(x, w, w[0, 0, 0])),                     # bias size
    (lambda m, x, w: m.conv_transpose2d(x, w, output_padding=2)),
]


@pytest.mark.parametrize("fn", ERRORS)
def test_conv_errors(fn):
    tx = torch.randn(2, 4, 6, 6)
    tw = torch.randn(4, 4, 3, 3)
    ex, ew = from_torch(tx), from_torch(tw)
    with pytest.raises(RuntimeError) as expected:
        fn(F, tx, tw)
    with pytest.raises(RuntimeError) as got:
        fn(ember, ex, ew)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("kw", [dict(kernel_size=2),
                                dict(kernel_size=(2, 3), padding=1, stride=(2, 1), dilation=(1, 2))])
def test_im2col_col2im(kw, dtype):
    ex, tx = make_pair((2, 3, 6, 7), dtype)
    cols = nn_conv.im2col(ex, **kw)
    assert_same(cols, F.unfold(tx, **kw))
    assert_same(nn_conv.col2im(cols, (6, 7), **kw), F.fold(F.unfold(tx, **kw), (6, 7), **kw))
    assert_same(nn_conv.im2col(ex[0], **kw), F.unfold(tx[0], **kw))


def test_im2col_errors():
    with pytest.raises(RuntimeError, match="sliding blocks"):
        nn_conv.im2col(ember.zeros(2, 3, 4, 4), 5)
    with pytest.raises(RuntimeError, match="divisible by the product of kernel_size"):
        nn_conv.col2im(ember.zeros(2, 13, 9), (4, 4), 2)


def test_native_kernels_reject_bad_arguments():
    from ember import _C

    x, w = ember.zeros(1, 2, 4, 4, 4), ember.zeros(3, 2, 1, 1, 1)
    with pytest.raises(RuntimeError):  # output too small for the channel count of the weight
        _C.conv_forward(ember.zeros(1, 2, 4, 4, 4), x, w, None, [1, 1, 1], [0, 0, 0], [1, 1, 1], 1)
    with pytest.raises(RuntimeError):  # groups that do not divide the channels
        _C.conv_forward(ember.zeros(1, 3, 4, 4, 4), x, w, None, [1, 1, 1], [0, 0, 0], [1, 1, 1], 3)
    with pytest.raises(RuntimeError):  # wrong bias length
        _C.conv_forward(ember.zeros(1, 3, 4, 4, 4), x, w, ember.zeros(2), [1, 1, 1], [0, 0, 0], [1, 1, 1], 1)
    with pytest.raises(RuntimeError):  # im2col with a column tensor of the wrong size
        _C.im2col(x, ember.zeros(1, 2, 5), [1, 1, 1], [1, 1, 1], [0, 0, 0], [1, 1, 1], [4, 4, 4])
    with pytest.raises(RuntimeError):  # max-pool backward with an index outside the plane
        params = [2, 2, 1, 1, 0, 0, 1, 1, 0, 0]
        _C.pool_backward(ember.zeros(1, 2, 2), ember.ones(1, 1, 1), ember.tensor([[[7]]]), params, 0)


def _conv_outcome(lib, fn, x, w, b, kwargs):
    try:
        out = getattr(lib.nn.functional, fn)(lib.from_numpy(x), lib.from_numpy(w), lib.from_numpy(b), **kwargs)
    except Exception as exc:  # noqa: BLE001 - the exception is what is compared
        return type(exc).__name__, str(exc)
    return str(out.dtype).split(".")[1], tuple(out.shape), out.tolist()


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64", "bool"])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("geometry", [(1, 1, 0, 1), (2, 2, 1, 1), (1, 1, 2, 2), (2, 3, 0, 2)])
def test_integer_conv(dtype, transposed, dims, geometry):
    """Integer convolutions compute in their own dtype (wrapping) as PyTorch's CPU build does;
    bool, and dilated or transposed ones of dtypes but int64, raise its NotImplementedError."""
    import numpy as np

    groups, stride, padding, dilation = geometry
    rng = np.random.default_rng(dims * 7 + groups)
    out_channels = 6 if transposed else 4
    x = rng.integers(0, 50, (2, 4) + (5,) * dims).astype(dtype)
    w = rng.integers(0, 50, (4, (out_channels if transposed else 4) // groups) + (2,) * dims).astype(dtype)
    b = rng.integers(0, 50, (out_channels,)).astype(dtype)
    kwargs = dict(groups=groups, stride=stride, padding=padding, dilation=dilation)
    if transposed and stride > 1:
        kwargs["output_padding"] = 1
    fn = f"conv_transpose{dims}d" if transposed else f"conv{dims}d"
    assert _conv_outcome(ember, fn, x, w, b, kwargs) == _conv_outcome(torch, fn, x, w, b, kwargs)


def test_integer_conv_mixed_dtypes():
    x = torch.ones(1, 1, 3, 3, dtype=torch.int64)
    for weight, bias in ((torch.ones(1, 1, 2, 2), None),
                         (torch.ones(1, 1, 2, 2, dtype=torch.int64), torch.ones(1))):
        with pytest.raises(RuntimeError) as expected:
            F.conv2d(x, weight, bias)
        with pytest.raises(RuntimeError) as got:
            ember.nn.functional.conv2d(from_torch(x), from_torch(weight),
                                       None if bias is None else from_torch(bias))
        assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("kw", [{"stride": 0}, {"dilation": 0}, {"padding": -1}, {"kernel_size": 0}])
@pytest.mark.parametrize("fn", ["unfold", "fold"])
def test_unfold_fold_bad_geometry_raises_like_torch(fn, kw):
    # a zero stride once reached a Python division (ZeroDivisionError)
    def run(lib):
        args = dict({"kernel_size": 2}, **kw)
        with pytest.raises(RuntimeError) as err:
            if fn == "unfold":
                lib.nn.functional.unfold(lib.ones(1, 1, 3, 3), **args)
            else:
                lib.nn.functional.fold(lib.ones(1, 4, 4), (3, 3), **args)
        return str(err.value)

    assert run(ember) == run(torch)


def test_unfold_of_2d_input_is_torch_index_error():
    for lib in (ember, torch):
        with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but "
                                             r"got 2\)"):
            lib.nn.functional.unfold(lib.ones(4, 4), 2)


# (dims, cx, cy, size, k, stride, padding, dilation, groups): the direct kernels by rows
# (cy <= 8), by row tiles (8 < cy <= 16), by channel blocks (cy 32 / 64), the direct input
# gradient (cx >= 4), im2col + gemm (1-d, 3-d, dilated, grouped, float64) and padding wider than
# the kernel's reach.
NONFINITE_CASES = [
    (2, 1, 6, 14, 5, 1, 2, 1, 1),
    (2, 6, 16, 14, 5, 1, 2, 1, 1),
    (2, 6, 12, 10, 3, 1, 1, 1, 1),
    (2, 16, 6, 14, 5, 1, 2, 1, 1),
    (2, 8, 32, 14, 3, 1, 1, 1, 1),
    (2, 32, 64, 9, 3, 2, 1, 1, 1),
    (2, 4, 4, 14, 3, 2, 2, 2, 1),
    (2, 2, 40, 12, 3, 1, 2, 1, 1),
    (2, 4, 6, 11, 3, 1, 1, 1, 2),
    (1, 3, 12, 20, 5, 1, 2, 1, 1),
    (1, 6, 16, 20, 3, 2, 1, 2, 1),
    (3, 4, 4, 6, 3, 1, 1, 1, 1),
    (3, 2, 6, 6, 3, 2, 2, 2, 1),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("mode", ["inf_weight", "inf_input", "inf_grad", "inf_meets_inf", "nan_input"])
@pytest.mark.parametrize("case", NONFINITE_CASES)
def test_conv_nonfinite_next_to_padding(case, mode, transposed, dtype):
    # The padding adds nothing: an infinite weight (forward, input gradient) or output gradient
    # (weight gradient) next to it is not multiplied by a padded zero (0 * inf = NaN). Values are
    # positive and the infinities +inf, so no NaN can arise but from a NaN input. torch's own
    # im2col paths (dilated, 3-d, transposed) do give such NaNs, so for the infinite modes the
    # oracle is torch in float64 with each inf replaced by 1e150: a result beyond +-1e100 is +-inf,
    # any other is the finite value. For nan_input: torch's NaNs exactly, its values elsewhere.
    dims, cx, cy, size, k, s, p, d, groups = case
    tdt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(sum(case))
    xs = (2, cx) + (size,) * dims
    ws = ((cx, cy // groups) if transposed else (cy, cx // groups)) + (k,) * dims
    x = (torch.rand(xs, generator=g, dtype=tdt) + 0.5)
    w = torch.rand(ws, generator=g, dtype=tdt) - 0.5
    corner0, corner1 = (0,) * dims, (k - 1,) * dims
    if mode == "inf_weight":
        w[(0, 0) + corner0] = float("inf")
        w[(-1, -1) + corner1] = float("inf")
    elif mode == "inf_input":
        x[(0, 0) + corner0] = float("inf")
        x[(1, -1) + (size - 1,) * dims] = float("inf")
    elif mode == "inf_meets_inf":
        # Positive weights; an infinite weight, pixels and an output gradient that meet in one
        # window (the diagonal), so a zeroed infinity would give 0 * inf = NaN in a fast path.
        w = w.abs() + 0.1
        w[(0, 0) + corner0] = float("inf")
        for j in range(size):
            x[(0, 0) + (j,) * dims] = float("inf")
    elif mode == "nan_input":
        x[(0, 0) + (size // 2,) * dims] = float("nan")
        x[(1, 0) + corner0] = float("nan")
    name = f"conv_transpose{dims}d" if transposed else f"conv{dims}d"
    kw = dict(stride=s, padding=p, dilation=d, groups=groups)
    tx, tw = x.clone().requires_grad_(), w.clone().requires_grad_()
    ty = getattr(F, name)(tx, tw, None, **kw)
    gy = torch.rand(ty.shape, generator=g, dtype=tdt) + 0.5
    if mode in ("inf_grad", "inf_meets_inf"):
        gy[(0, 0) + (0,) * dims] = float("inf")
        gy[(1, -1) + (-1,) * dims] = float("inf")
    ty.backward(gy)
    ex, ew = from_torch(x).requires_grad_(), from_torch(w).requires_grad_()
    ey = getattr(ember.nn.functional, name)(ex, ew, None, **kw)
    ey.backward(from_torch(gy))
    if mode != "nan_input":
        def big(t):
            return t.detach().double().nan_to_num(posinf=1e150)
        rx, rw = big(x).requires_grad_(), big(w).requires_grad_()
        ry = getattr(F, name)(rx, rw, None, **kw)
        ry.backward(big(gy))
        refs = (ry, rx.grad, rw.grad)
    else:
        refs = (ty, tx.grad, tw.grad)
    for what, got, want in zip(("forward", "grad_input", "grad_weight"), (ey, ex.grad, ew.grad), refs):
        got = torch.from_numpy(got.detach().numpy().copy()).double()
        want = want.detach().double()
        if mode != "nan_input":
            assert not got.isnan().any(), what
            assert torch.equal(got.isinf(), want.abs() > 1e100), what
            assert torch.equal(got[got.isinf()].sign(), want[got.isinf()].sign()), what
        else:
            assert torch.equal(got.isnan(), want.isnan()), what
        fin = want.isfinite() & (want.abs() < 1e100)
        torch.testing.assert_close(got[fin], want[fin], rtol=1e-4, atol=1e-4)
