"""View ops vs PyTorch: shapes, strides, storage offsets, storage sharing, version counters, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from opinfo.core import assert_close

import ember
from ember._src.ops.shape.views import slice_op


def _pair(shape, layout="contiguous"):
    n = int(np.prod(shape)) if shape else 1
    arr = np.arange(n, dtype=np.float32).reshape(shape)
    e, t = ember.tensor(arr), torch.from_numpy(arr.copy())
    if layout == "transposed":
        e, t = e.transpose(0, -1), t.transpose(0, -1)
    elif layout == "sliced":
        e, t = slice_op(e, 0, 1, shape[0], 2), t[1::2]
    return e, t


def _same_view(e, t, e_base, t_base):
    """Same shape, strides, offset and values; a write through the view reaches the base."""
    if isinstance(t, (tuple, list)):
        assert len(e) == len(t)
        for a, b in zip(e, t):
            _same_view(a, b, e_base, t_base)
        return
    assert tuple(e.shape) == tuple(t.shape)
    assert tuple(e.stride()) == tuple(t.stride())
    assert e.storage_offset() == t.storage_offset()
    assert_close(e, t)
    shares = t.untyped_storage().data_ptr() == t_base.untyped_storage().data_ptr()
    assert (e.untyped_storage().data_ptr() == e_base.untyped_storage().data_ptr()) == shares
    assert e._storage is e_base._storage if shares else e._storage is not e_base._storage
    if shares and e.numel() > 0:
        e.fill_(-7.0)
        t.fill_(-7.0)
        assert_close(e_base, t_base)


# (name, shape, layout, fn) with fn applied to both libraries' tensors.
VIEW_CASES = [
    ("view", (2, 3, 4), "contiguous", lambda x: x.view(6, 4)),
    ("view_infer", (2, 3, 4), "contiguous", lambda x: x.view(-1, 2)),
    ("view_0d", (1,), "contiguous", lambda x: x.view(())),
    ("view_sliced_ok", (4, 3), "sliced", lambda x: x.view(2, 1, 3)),
    ("view_transposed_split", (2, 3, 4), "transposed", lambda x: x.view(2, 2, 3, 2)),
    ("reshape_copy", (2, 3, 4), "transposed", lambda x: x.reshape(-1)),
    ("reshape_view", (2, 3, 4), "contiguous", lambda x: x.reshape(4, 6)),
    ("flatten", (2, 3, 4), "contiguous", lambda x: x.flatten()),
    ("flatten_mid", (2, 3, 4), "transposed", lambda x: x.flatten(1)),
    ("flatten_0d", (), "contiguous", lambda x: x.flatten()),
    ("unflatten", (2, 12), "contiguous", lambda x: x.unflatten(1, (3, -1))),
    ("permute", (2, 3, 4), "sliced", lambda x: x.permute(2, 0, 1)),
    ("permute_neg", (2, 3, 4), "contiguous", lambda x: x.permute(-1, 0, -2)),
    ("transpose", (2, 3, 4), "contiguous", lambda x: x.transpose(0, 2)),
    ("t", (3, 4), "contiguous", lambda x: x.t()),
    ("t_1d", (3,), "contiguous", lambda x: x.t()),
    ("T", (3, 4), "contiguous", lambda x: x.T),
    ("mT", (2, 3, 4), "contiguous", lambda x: x.mT),
    ("expand", (3, 1), "contiguous", lambda x: x.expand(2, 3, 4)),
    ("expand_minus1", (3, 1), "contiguous", lambda x: x.expand(-1, 5)),
    ("squeeze", (1, 3, 1), "contiguous", lambda x: x.squeeze()),
    ("squeeze_dim", (1, 3, 1), "contiguous", lambda x: x.squeeze(-1)),
    ("squeeze_dims", (1, 3, 1), "contiguous", lambda x: x.squeeze((0, 1))),
    ("squeeze_noop", (2, 3), "contiguous", lambda x: x.squeeze(0)),
    ("unsqueeze", (2, 3), "transposed", lambda x: x.unsqueeze(1)),
    ("unsqueeze_end", (2, 3), "contiguous", lambda x: x.unsqueeze(-1)),
    ("narrow", (5, 4), "contiguous", lambda x: x.narrow(0, 1, 3)),
    ("narrow_neg", (5, 4), "sliced", lambda x: x.narrow(-1, -3, 2)),
    ("select", (2, 3, 4), "contiguous", lambda x: x.select(1, -1)),
    ("unbind", (2, 3), "contiguous", lambda x: x.unbind(1)),
    ("split", (7, 2), "contiguous", lambda x: x.split(3)),
    ("split_sections", (7, 2), "contiguous", lambda x: x.split([2, 5])),
    ("chunk", (7, 2), "contiguous", lambda x: x.chunk(3)),
    ("chunk_uneven", (5, 2), "contiguous", lambda x: x.chunk(4)),
    ("tensor_split", (7, 2), "contiguous", lambda x: x.tensor_split(3)),
    ("tensor_split_idx", (7, 2), "contiguous", lambda x: x.tensor_split([1, 4, 9])),
    ("movedim", (2, 3, 4), "contiguous", lambda x: x.movedim(0, -1)),
    ("movedim_multi", (2, 3, 4), "contiguous", lambda x: x.movedim((0, 1), (2, 0))),
    ("diagonal", (3, 4), "contiguous", lambda x: x.diagonal()),
    ("diagonal_off", (3, 4), "contiguous", lambda x: x.diagonal(1)),
    ("diagonal_neg", (2, 3, 4), "contiguous", lambda x: x.diagonal(-1, 1, 2)),
    ("diagonal_empty", (3, 4), "contiguous", lambda x: x.diagonal(7)),
    ("unfold", (7, 2), "contiguous", lambda x: x.unfold(0, 3, 2)),
    ("unfold_last", (2, 8), "transposed", lambda x: x.unfold(1, 2, 1)),
    ("as_strided", (4, 4), "contiguous", lambda x: x.as_strided((2, 2), (1, 2), 1)),
    ("as_strided_overlap", (6,), "contiguous", lambda x: x.as_strided((3, 3), (1, 1))),
    ("contiguous_noop", (2, 3), "contiguous", lambda x: x.contiguous()),
    ("contiguous_copy", (2, 3), "transposed", lambda x: x.contiguous()),
    ("clone", (2, 3), "transposed", lambda x: x.clone()),
    ("detach", (2, 3), "contiguous", lambda x: x.detach()),
    ("swapaxes", (2, 3, 4), "contiguous", lambda x: x.swapaxes(0, 1)),
    ("empty_view", (0, 3), "contiguous", lambda x: x.view(3, 0)),
]


@pytest.mark.parametrize("name,shape,layout,fn", VIEW_CASES, ids=[c[0] for c in VIEW_CASES])
def test_view_matches_torch(name, shape, layout, fn):
    e_base, t_base = _pair(shape, layout)
    _same_view(fn(e_base), fn(t_base), e_base, t_base)


CLONE_LAYOUTS = [
    lambda m: m.ones(1, 4).expand(3, 4), lambda m: m.ones(3, 1).expand(3, 4),
    lambda m: m.ones(2, 3, 4).permute(2, 0, 1), lambda m: m.ones(1, 3).t(),
    lambda m: m.ones(2, 1, 3).transpose(0, 2), lambda m: m.ones(2, 3, 4).transpose(0, 1).narrow(2, 0, 2),
    lambda m: m.ones(3, 4, 2).permute(1, 0, 2).expand(2, 4, 3, 2), lambda m: m.ones(4, 1).expand(4, 3).t(),
]


@pytest.mark.parametrize("i", range(len(CLONE_LAYOUTS)))
def test_clone_preserves_layout_like_torch(i):
    """memory_format=preserve: dense inputs keep their strides, others get dense strides in the same order."""
    e, t = CLONE_LAYOUTS[i](ember), CLONE_LAYOUTS[i](torch)
    assert e.clone().stride() == t.clone().stride()
    assert e.clone().storage_offset() == 0


def test_clone_keeps_strides_of_dense_tensors():
    e, t = _pair((2, 3, 4), "transposed")
    assert e.clone().stride() == t.clone().stride()
    assert e.contiguous().stride() == t.contiguous().stride()
    assert e.contiguous().is_contiguous()


ERROR_CASES = [
    ("view_noncontig", (2, 3, 4), "transposed", lambda x: x.view(-1), RuntimeError),
    ("view_bad_numel", (2, 3), "contiguous", lambda x: x.view(5), RuntimeError),
    ("view_two_minus1", (2, 3), "contiguous", lambda x: x.view(-1, -1), RuntimeError),
    ("permute_bad_dim", (2, 3), "contiguous", lambda x: x.permute(0, 2), IndexError),
    ("permute_repeat", (2, 3), "contiguous", lambda x: x.permute(0, 0), RuntimeError),
    ("permute_len", (2, 3), "contiguous", lambda x: x.permute(0,), RuntimeError),
    ("transpose_bad_dim", (2, 3), "contiguous", lambda x: x.transpose(0, 2), IndexError),
    ("t_3d", (2, 3, 4), "contiguous", lambda x: x.t(), RuntimeError),
    ("expand_bad", (3, 2), "contiguous", lambda x: x.expand(3, 3), RuntimeError),
    ("expand_fewer", (3, 2), "contiguous", lambda x: x.expand(2), RuntimeError),
    ("squeeze_bad", (2, 3), "contiguous", lambda x: x.squeeze(2), IndexError),
    ("unsqueeze_bad", (2, 3), "contiguous", lambda x: x.unsqueeze(4), IndexError),
    ("narrow_oob", (5, 4), "contiguous", lambda x: x.narrow(0, 3, 3), RuntimeError),
    ("select_oob", (2, 3), "contiguous", lambda x: x.select(1, 3), IndexError),
    ("select_dim_oob", (2, 3), "contiguous", lambda x: x.select(2, 0), IndexError),
    ("select_0d", (), "contiguous", lambda x: x.select(0, 0), IndexError),
    ("split_sizes_bad", (7, 2), "contiguous", lambda x: x.split([2, 4]), RuntimeError),
    ("chunk_zero", (7, 2), "contiguous", lambda x: x.chunk(0), RuntimeError),
    ("movedim_repeat", (2, 3, 4), "contiguous", lambda x: x.movedim((0, 0), (1, 2)), RuntimeError),
    ("diagonal_same_dims", (3, 4), "contiguous", lambda x: x.diagonal(0, 1, 1), RuntimeError),
    ("unfold_too_big", (3, 2), "contiguous", lambda x: x.unfold(0, 4, 1), RuntimeError),
    ("unfold_step0", (3, 2), "contiguous", lambda x: x.unfold(0, 2, 0), RuntimeError),
    ("as_strided_oob", (4,), "contiguous", lambda x: x.as_strided((3,), (2,)), RuntimeError),
    ("flatten_bad", (2, 3), "contiguous", lambda x: x.flatten(2), IndexError),
    ("flatten_order", (2, 3, 4), "contiguous", lambda x: x.flatten(2, 1), RuntimeError),
    ("unflatten_bad", (2, 12), "contiguous", lambda x: x.unflatten(1, (5, -1)), RuntimeError),
    ("reshape_bad", (2, 3), "contiguous", lambda x: x.reshape(4, -1), RuntimeError),
]


@pytest.mark.parametrize("name,shape,layout,fn,exc", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_view_errors_match_torch(name, shape, layout, fn, exc):
    e, t = _pair(shape, layout)
    with pytest.raises(exc):
        fn(t)
    with pytest.raises(exc):
        fn(e)


def test_version_counter_is_shared_and_bumped():
    base = ember.zeros(4, 3)
    v = base.view(12)
    start = base._version
    v.add_(1)
    assert base._version == v._version > start
    base.select(0, 1).mul_(2)
    assert v._version > start + 1
    before = base._version
    base.t().fill_(3.0)
    assert base._version > before
    before = base._version
    base.clamp_(0, 1)
    assert base._version > before
    before = base._version
    base.copy_(ember.ones(4, 3))
    assert base._version > before
    before = base._version
    base.zero_()
    assert base._version > before
    d = base.detach()
    assert d._storage is base._storage


def test_inplace_through_views_reaches_base():
    e_base, t_base = _pair((4, 6))
    for fn in (lambda x: x.narrow(1, 1, 3).mul_(10), lambda x: x.t().select(0, 2).add_(1),
               lambda x: x.diagonal().neg_(),
               lambda x: x.unfold(1, 2, 2).select(2, 0).sub_(3), lambda x: x.view(-1).narrow(0, 5, 4).zero_()):
        fn(e_base)
        fn(t_base)
        assert_close(e_base, t_base)


@pytest.mark.parametrize("shape", [(), (4,)])
def test_t_of_0d_and_1d_is_an_op_with_a_grad_fn(shape):
    # t() of a 0-D/1-D tensor is the identity view, but still an op: it has TBackward0 (it once
    # was a bare view with no grad_fn, so backward through it raised) and shares storage
    data = np.arange(int(np.prod(shape)) if shape else 1, dtype=np.float32).reshape(shape) + 1
    e = ember.tensor(data, requires_grad=True)
    t = torch.tensor(data, requires_grad=True)
    ye, yt = e.t(), t.t()
    assert type(ye.grad_fn).__name__ == type(yt.grad_fn).__name__ == "TBackward0"
    assert ye._base is e and tuple(ye.shape) == tuple(yt.shape)
    (ye * 3).sum().backward()
    (yt * 3).sum().backward()
    assert_close(e.grad, t.grad)


def test_meta_views():
    e = ember.empty(2, 3, 4, device="meta")
    t = torch.empty(2, 3, 4, device="meta")
    for _, _, _, fn in VIEW_CASES[:45]:
        try:
            expected = fn(t)
        except Exception as exc:  # noqa: BLE001
            with pytest.raises(type(exc)):
                fn(e)
            continue
        got = fn(e)
        if isinstance(expected, torch.Tensor):
            expected, got = [expected], [got]
        for a, b in zip(got, expected):
            assert a.device.type == "meta"
            assert (tuple(a.shape), tuple(a.stride()), a.storage_offset()) == (
                tuple(b.shape), tuple(b.stride()), b.storage_offset())


@pytest.mark.parametrize("call", [
    lambda lib, x: x.flatten(1, 1), lambda lib, x: lib.movedim(x, 1, 0), lambda lib, x: x.split(1, 0),
    lambda lib, x: x.chunk(1, 0), lambda lib, x: lib.ones(1).narrow(1, 0, -1), lambda lib, x: x.flatten(-1, 0),
    lambda lib, x: lib.movedim(x, [0], [-1]),
], ids=["flatten-bad-dim", "movedim-bad-dim", "split-0d", "chunk-0d", "narrow-negative-length-first",
        "flatten-ok", "movedim-ok"])
def test_0d_and_argument_order_errors_match_torch(call):
    # Found by test_fuzz_ops: 0-d tensors skipped dim checks (flatten, movedim) or raised IndexError
    # instead of RuntimeError (split, chunk); narrow checked dim before the negative length.
    outcomes = []
    for lib in (ember, torch):
        try:
            outcomes.append(tuple(call(lib, lib.tensor(1.0)).shape))
        except (IndexError, RuntimeError) as exc:
            outcomes.append((type(exc), str(exc)))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("shape,stride,offset", [
    ((2,), (2**62,), 0),  # (size - 1) * stride * itemsize wraps to 0
    ((3,), (2**62 + 1,), 0),  # the extent overflows int64
    ((4,), (1,), 2**63 - 1),  # offset + extent overflows int64
])
def test_native_bounds_check_is_overflow_safe(shape, stride, offset):
    # Found by test_hostile_inputs: a view whose extent overflowed int64 wrapped around into a
    # "valid" address range and the kernel read outside the storage.
    t = ember.ones(4)
    t._shape, t._stride, t._offset = shape, stride, offset
    with pytest.raises(IndexError, match="exceeds its storage"):
        ember._C.copy_(ember.ones(shape), t)


@pytest.mark.parametrize("call", [
    lambda lib: lib.chunk(lib.ones(0), 3), lambda lib: lib.chunk(lib.ones(2, 0), 2, 1),
    lambda lib: lib.ones(3).narrow(0, -4, 0), lambda lib: lib.ones(1).narrow(0, 2, 0),
    lambda lib: lib.ones(3).narrow(0, 2, 2), lambda lib: lib.ones(3).narrow(0, -1, 1),
], ids=["chunk-empty", "chunk-empty-dim1", "narrow-start-low", "narrow-start-high", "narrow-too-long", "narrow-ok"])
def test_chunk_of_empty_and_narrow_start_errors_match_torch(call):
    # Found by test_fuzz_ops: chunk of an empty dim returned one piece (PyTorch: `chunks` pieces);
    # narrow's out-of-range start raised RuntimeError (PyTorch: IndexError).
    outcomes = []
    for lib in (ember, torch):
        try:
            res = call(lib)
            outcomes.append([tuple(r.shape) for r in res] if isinstance(res, tuple) else tuple(res.shape))
        except (IndexError, RuntimeError) as exc:
            outcomes.append((type(exc), str(exc)))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("call", [
    lambda L, x: L.flatten(input=x),
    lambda L, x: L.reshape(input=x, shape=(3, 2)),
    lambda L, x: L.transpose(input=x, dim0=0, dim1=1),
    lambda L, x: L.permute(input=x, dims=(1, 0)),
    lambda L, x: L.squeeze(input=x[None], dim=0),
    lambda L, x: L.unsqueeze(input=x, dim=0),
    lambda L, x: L.narrow(input=x, dim=1, start=0, length=2),
    lambda L, x: L.split(tensor=x, split_size_or_sections=1, dim=0)[1],
    lambda L, x: x.split(split_size=2, dim=1)[1],
    lambda L, x: L.chunk(input=x, chunks=2, dim=1)[0],
    lambda L, x: L.t(input=x),
    lambda L, x: L.movedim(input=x, source=0, destination=1),
    lambda L, x: L.unflatten(input=x, dim=1, sizes=(3, 1)),
    lambda L, x: L.clone(input=x),
    lambda L, x: L.diagonal(input=x, offset=1),
    lambda L, x: L.select(input=x, dim=1, index=0),
    lambda L, x: L.unbind(input=x, dim=1)[0],
    lambda L, x: L.adjoint(input=x),
    lambda L, x: L.as_strided(input=x, size=(2,), stride=(2,)),
    lambda L, x: L.index_put(input=x, indices=(L.tensor([0]),), values=L.tensor(9.0)),
])
def test_shape_functions_take_torch_keyword_names(call):
    """The functions name their tensor `input` (split: `tensor`; Tensor.split: `split_size`) as
    PyTorch's do, so calls by keyword work; they named it `self`."""
    got, expected = call(ember, ember.arange(6.0).view(2, 3)), call(torch, torch.arange(6.0).view(2, 3))
    assert got.tolist() == expected.tolist()


CONTIGUITY_CASES = {
    "contiguous": lambda lib: lib.zeros(3, 4, 5),
    "transposed": lambda lib: lib.zeros(3, 4, 5).transpose(0, 2),
    "sliced_rows": lambda lib: lib.zeros(6, 4)[::2],
    "sliced_cols": lambda lib: lib.zeros(6, 4)[:, 1:3],
    "leading_slice": lambda lib: lib.zeros(6, 4)[2:],
    "size_one_dims": lambda lib: lib.zeros(4, 1, 5).transpose(0, 1),
    "size_one_odd_stride": lambda lib: lib.zeros(5, 4)[:, 1:2],
    "empty_transposed": lambda lib: lib.zeros(0, 3).t(),
    "expanded": lambda lib: lib.zeros(1, 4).expand(3, 4),
    "scalar": lambda lib: lib.tensor(1.0),
    "permuted_3d": lambda lib: lib.zeros(2, 3, 4).permute(1, 0, 2),
}


@pytest.mark.parametrize("name", sorted(CONTIGUITY_CASES))
def test_is_contiguous_matches_torch(name):
    # Tensor.is_contiguous() reads the C mirrors of sizes and strides (_C._contiguous): the same
    # answer as torch for every layout, and as the explicit-memory-format and Python forms.
    e, t = CONTIGUITY_CASES[name](ember), CONTIGUITY_CASES[name](torch)
    assert e.is_contiguous() == t.is_contiguous()
    assert e.is_contiguous(memory_format=ember.contiguous_format) == t.is_contiguous()
    assert ember._C._contiguous(e) is t.is_contiguous()
    assert ember._C._contiguous(object()) is None


@pytest.mark.parametrize("call", [
    lambda L, x: x.to(L.float64, L.float64), lambda L, x: x.to(L.float64, L.int32),
    lambda L, x: x.to(L.float32, False, False, True), lambda L, x: x.to(x, L.float64),
    lambda L, x: x.to(L.float64, "cpu"), lambda L, x: x.to("cpu", "cpu"), lambda L, x: x.to(L.float32, 1),
    lambda L, x: x.to(L.float64, device="cpu"), lambda L, x: x.to(x, dtype=L.float64),
])
def test_to_refuses_argument_combinations_torch_refuses(call):
    for L in (ember, torch):
        with pytest.raises(TypeError, match="to\\(\\) received an invalid combination of arguments"):
            call(L, L.ones(2))


@pytest.mark.parametrize("call", [
    lambda L, x: x.to("cpu", L.float64), lambda L, x: x.to(L.float64, False, True), lambda L, x: x.to(L.float64, True),
    lambda L, x: x.to(L.float32, False, True), lambda L, x: x.to(L.float32, False, False), lambda L, x: x.to(None),
    lambda L, x: x.to(None, None), lambda L, x: x.to("cpu", L.float32, False, True),
    lambda L, x: x.to(L.float32, copy=True), lambda L, x: x.to(x, True, True), lambda L, x: x.to(float),
    lambda L, x: x.to("cpu", dtype=L.float64), lambda L, x: x.to(dtype=L.float64, device="cpu"),
    lambda L, x: x.to(L.float64, non_blocking=True), lambda L, x: x.to(L.ones(1, dtype=L.int64)),
])
def test_to_positional_overloads_match_torch(call):
    def run(L):
        x = L.ones(2)
        out = call(L, x)
        return str(out.dtype).split(".")[1], out.device.type, out is x
    assert run(ember) == run(torch)


def test_infer_minus_one_on_no_elements_is_ambiguous():
    for lib in (torch, ember):
        with pytest.raises(RuntimeError, match=r"cannot reshape tensor of 0 elements into shape \[0, -1\] because "
                                               "the unspecified dimension size -1 can be any value and is ambiguous"):
            lib.empty(0, 3).view(0, -1)
        with pytest.raises(RuntimeError, match=r"cannot reshape tensor of 0 elements into shape \[-1, 0\]"):
            lib.empty(0, 3).reshape(-1, 0)
        with pytest.raises(RuntimeError, match=r"shape '\[0, -1\]' is invalid for input of size 6"):
            lib.empty(2, 3).view(0, -1)
        assert tuple(lib.empty(0, 3).view(-1, 3).shape) == (0, 3)
