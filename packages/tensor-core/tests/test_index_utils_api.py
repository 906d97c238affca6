"""tril_indices / triu_indices / unravel_index / nonzero_static against PyTorch."""

import pytest

import ember

from conftest import assert_same, make_pair, torch

TRI_ARGS = [(3, 3, 0), (3, 4, -1), (4, 3, 1), (3, 4, 5), (3, 4, -5), (0, 3, 0), (1, 0, 0), (5, 2, -2)]


@pytest.mark.parametrize("row, col, offset", TRI_ARGS)
@pytest.mark.parametrize("name", ["tril_indices", "triu_indices"])
@pytest.mark.parametrize("dtype", [None, "int32"])
def test_triangle_indices(name, row, col, offset, dtype):
    kw_e = {} if dtype is None else {"dtype": getattr(ember, dtype)}
    kw_t = {} if dtype is None else {"dtype": getattr(torch, dtype)}
    e_out = getattr(ember, name)(row, col, offset, **kw_e)
    t_out = getattr(torch, name)(row, col, offset, **kw_t)
    assert_same(e_out, t_out)
    assert e_out.is_contiguous()
    meta = getattr(ember, name)(row, col, offset, device="meta", **kw_e)
    assert meta.is_meta and tuple(meta.shape) == tuple(t_out.shape)


@pytest.mark.parametrize("call, exc", [
    (lambda m: m.tril_indices(-1, 3), RuntimeError),
    (lambda m: m.triu_indices(3, -2), RuntimeError),
    (lambda m: m.tril_indices(3, 3, dtype=m.float32), NotImplementedError),
    (lambda m: m.triu_indices(3, 3, dtype=m.int16), NotImplementedError),
    (lambda m: m.tril_indices(3.0, 3), TypeError),
])
def test_triangle_errors(call, exc):
    with pytest.raises(exc):
        call(torch)
    with pytest.raises(exc):
        call(ember)


@pytest.mark.parametrize("indices, shape", [
    ([1, 2, 5], (2, 3)), ([-1, -7, 6, 11], (2, 3)), (4, (2, 3)), ([[0, 7], [23, 5]], (2, 3, 4)), ([1, 2], 6),
    ([1, 2], ()), ([], (4, 2)), ([3], [1, 4, 1]),
])
@pytest.mark.parametrize("dtype", ["int64", "int32", "int16"])
def test_unravel_index(indices, shape, dtype):
    e_idx = ember.tensor(indices, dtype=getattr(ember, dtype))
    t_idx = torch.tensor(indices, dtype=getattr(torch, dtype))
    e_out, t_out = ember.unravel_index(e_idx, shape), torch.unravel_index(t_idx, shape)
    assert type(e_out) is tuple
    assert_same(e_out, t_out)


def test_unravel_index_uint8():
    e, t = ember.tensor([[0, 7], [23, 5]], dtype=ember.uint8), torch.tensor([[0, 7], [23, 5]], dtype=torch.uint8)
    assert_same(ember.unravel_index(e, (2, 3, 4)), torch.unravel_index(t, (2, 3, 4)))


def test_unravel_index_non_contiguous():
    e, t = make_pair((3, 4), "int64", low=0, high=20, layout="transposed")
    assert_same(ember.unravel_index(e, (4, 5)), torch.unravel_index(t, (4, 5)))


@pytest.mark.parametrize("call, exc", [
    (lambda m: m.unravel_index(m.tensor(1.0), (2, 3)), TypeError),
    (lambda m: m.unravel_index(m.tensor(True), (2, 3)), TypeError),
    (lambda m: m.unravel_index(m.tensor([1, 2]), (2, -3)), ValueError),
    (lambda m: m.unravel_index(m.tensor([1, 2]), (2.0, 3)), TypeError),
    (lambda m: m.unravel_index(m.tensor([1, 2]), "ab"), TypeError),
    (lambda m: m.unravel_index(m.tensor([1, 2]), (2, 0)), RuntimeError),
])
def test_unravel_index_errors(call, exc):
    with pytest.raises(exc):
        call(torch)
    with pytest.raises(exc):
        call(ember)


@pytest.mark.parametrize("size, fill", [(0, -1), (2, -1), (5, -7), (9, 0)])
@pytest.mark.parametrize("shape", [(6,), (3, 4), (2, 3, 2), ()])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_nonzero_static(size, fill, shape, dtype):
    e, t = make_pair(shape, dtype, low=-1, high=2)
    e_out = ember.nonzero_static(e, size=size, fill_value=fill)
    assert_same(e_out, torch.nonzero_static(t, size=size, fill_value=fill))
    assert e_out.is_contiguous()
    assert_same(e.nonzero_static(size=size), t.nonzero_static(size=size))


def test_nonzero_static_layouts_out_and_meta():
    e, t = make_pair((3, 4), "int32", low=-1, high=2, layout="transposed")
    out = ember.empty(0, dtype=ember.int64)
    ember.nonzero_static(e, size=4, out=out)
    assert_same(out, torch.nonzero_static(t, size=4))
    m = ember.nonzero_static(ember.empty(3, 4, device="meta"), size=5)
    assert m.is_meta and tuple(m.shape) == (5, 2)
    with pytest.raises(RuntimeError):
        torch.nonzero_static(t, size=-1)
    with pytest.raises(RuntimeError):
        ember.nonzero_static(e, size=-1)
