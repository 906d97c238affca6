"""Embedding and EmbeddingBag against torch.nn with identical weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from layer_helpers import assert_close, check_state_dict

import ember
import ember.nn as nn
import ember.nn.functional as F


def _tables(shape=(10, 4), dtype="float64", seed=0, scale=1.0):
    w = np.random.default_rng(seed).normal(0, scale, shape).astype(dtype)
    return ember.tensor(w.copy()), torch.tensor(w.copy())


def _pair(cls_name, dtype="float64", scale=1.0, freeze=False, **kwargs):
    we, wt = _tables(dtype=dtype, scale=scale)
    em = getattr(nn, cls_name).from_pretrained(we, freeze=freeze, **kwargs)
    tm = getattr(torch.nn, cls_name).from_pretrained(wt, freeze=freeze, **kwargs)
    return em, tm


def _run(em, tm, indices, *extra_e, extra_t=(), dtype="float64"):
    """Forward, backward with a random upstream grad; outputs, weights and weight grads agree."""
    ye = em(ember.tensor(np.array(indices, dtype=np.int64)), *extra_e)
    yt = tm(torch.tensor(np.array(indices, dtype=np.int64)), *extra_t)
    assert_close(ye, yt)
    g = np.random.default_rng(7).uniform(-1, 1, tuple(yt.shape)).astype(dtype)
    ye.backward(ember.tensor(g.copy()))
    yt.backward(torch.tensor(g.copy()))
    assert_close(em.weight.detach(), tm.weight.detach())
    assert_close(em.weight.grad, tm.weight.grad)


@pytest.mark.parametrize("indices", [3, [1, 2, 2, 9], [[0, 5, 5], [9, 1, 0]], [[[1], [2]], [[3], [1]]], []],
                         ids=["0d", "1d", "2d", "3d", "empty"])
@pytest.mark.parametrize("kwargs", [{}, {"padding_idx": 2}, {"padding_idx": -1}, {"scale_grad_by_freq": True},
                                    {"padding_idx": 0, "scale_grad_by_freq": True}])
def test_embedding_matches_torch(indices, kwargs):
    em, tm = _pair("Embedding", **kwargs)
    _run(em, tm, indices)
    assert em.padding_idx == tm.padding_idx
    assert repr(em) == repr(tm)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5, float("inf")])
def test_max_norm_renormalizes_looked_up_rows_in_place(norm_type):
    em, tm = _pair("Embedding", scale=2.0, max_norm=1.5, norm_type=norm_type)
    _run(em, tm, [[0, 3, 3], [7, 0, 1]])
    # Rows never looked up keep their norm.
    assert em.weight.detach()[9].norm().item() == pytest.approx(tm.weight.detach()[9].norm().item())


def test_int32_indices_and_float32_table():
    em, tm = _pair("Embedding", dtype="float32")
    ye = em(ember.tensor([[1, 4], [4, 0]], dtype=ember.int32))
    yt = tm(torch.tensor([[1, 4], [4, 0]], dtype=torch.int32))
    assert_close(ye, yt)


def test_default_init_is_standard_normal_with_zero_padding_row():
    ember.manual_seed(0)
    em = nn.Embedding(200, 50, padding_idx=3)
    w = em.weight.detach().numpy()
    assert np.all(w[3] == 0) and em.weight.requires_grad
    rest = np.delete(w, 3, axis=0)
    assert abs(rest.mean()) < 0.02 and abs(rest.std() - 1) < 0.02
    em.reset_parameters()
    assert np.all(em.weight.detach().numpy()[3] == 0)
    check_state_dict(torch.nn.Embedding(200, 50, padding_idx=3), em)


def test_from_pretrained_shares_and_freezes():
    we, wt = _tables()
    em, tm = nn.Embedding.from_pretrained(we), torch.nn.Embedding.from_pretrained(wt)
    assert em.weight.requires_grad is tm.weight.requires_grad is False
    with ember.no_grad():
        we[0, 0] = 123.0
    assert em.weight[0, 0].item() == 123.0  # the same storage, as in PyTorch
    assert nn.Embedding.from_pretrained(we, freeze=False).weight.requires_grad
    assert repr(nn.Embedding.from_pretrained(we, padding_idx=1)) == repr(torch.nn.Embedding.from_pretrained(
        wt, padding_idx=1))


def test_padding_row_gets_no_gradient_through_module():
    em = nn.Embedding(5, 3, padding_idx=0)
    em(ember.tensor([0, 0, 2])).sum().backward()
    g = em.weight.grad.numpy()
    assert np.all(g[0] == 0) and np.all(g[2] == 1)


# Messages are compared too, except where PyTorch's carry a tensor dump, an internal check or a class path.
@pytest.mark.parametrize("call,exc", [
    (lambda m, lib: m.Embedding(5, 2, padding_idx=5), AssertionError),
    (lambda m, lib: m.Embedding(5, 2, padding_idx=-6), AssertionError),
    (lambda m, lib: m.Embedding(5, 2, _weight=lib.zeros(4, 2)), AssertionError),
    (lambda m, lib: m.Embedding.from_pretrained(lib.zeros(4)), AssertionError),
    (lambda m, lib: m.Embedding(5, 2)(lib.tensor([5])), IndexError),
    (lambda m, lib: m.Embedding(5, 2)(lib.tensor([-1])), IndexError),
    (lambda m, lib: m.Embedding(5, 2)(lib.tensor([1.0])), RuntimeError),
    (lambda m, lib: m.EmbeddingBag(5, 2, padding_idx=7), AssertionError),
    (lambda m, lib: m.EmbeddingBag(5, 2)(lib.tensor([1, 2])), ValueError),  # 1-d without offsets
    (lambda m, lib: m.EmbeddingBag(5, 2)(lib.tensor([[1, 2]]), lib.tensor([0])), ValueError),
    (lambda m, lib: m.EmbeddingBag(5, 2)(lib.tensor([[[1]]])), ValueError),
    (lambda m, lib: m.EmbeddingBag(5, 2, mode="median"), None),
    (lambda m, lib: m.EmbeddingBag(5, 2, mode="max")(lib.tensor([[1]]), None, lib.ones(1, 1)),
     NotImplementedError),
    (lambda m, lib: m.EmbeddingBag(5, 2, mode="sum")(lib.tensor([[1]]), None, lib.ones(2)), ValueError),
    (lambda m, lib: m.EmbeddingBag(5, 2, mode="max", scale_grad_by_freq=True)(lib.tensor([[1]])), ValueError),
    (lambda m, lib: m.EmbeddingBag(5, 2)(lib.tensor([1, 2]), lib.tensor([1])), RuntimeError),
    (lambda m, lib: m.EmbeddingBag(5, 2)(lib.tensor([1, 2]), lib.tensor([0, 3])), RuntimeError),
    (lambda m, lib: m.EmbeddingBag(5, 2)(lib.tensor([1, 7]), lib.tensor([0, 1])), RuntimeError),
])
def test_errors(call, exc):
    if exc is None:  # an unknown mode only fails at forward time
        for m, lib in ((torch.nn, torch), (nn, ember)):
            with pytest.raises(ValueError, match="mode has to be one of sum, mean or max"):
                call(m, lib)(lib.tensor([[1]]))
        return
    with pytest.raises(exc) as t_err:
        call(torch.nn, torch)
    with pytest.raises(exc) as e_err:
        call(nn, ember)
    # PyTorch words the out-of-range index check differently by kernel path (thread count, earlier
    # tests' settings): only the type is compared there.
    if not str(t_err.value).startswith(("offsets[0]", "Expected i < index_size", "if input is 2D", "Index ")):
        assert str(e_err.value).replace("ember", "torch") == str(t_err.value).replace("ember", "torch")


def test_functional_embedding_padding_idx_and_max_norm():
    we, wt = _tables(scale=3.0)
    we.requires_grad_()
    wt.requires_grad_()
    ye = F.embedding(ember.tensor([[1, 2], [2, 8]]), we, padding_idx=-2, max_norm=2.0)
    yt = torch.nn.functional.embedding(torch.tensor([[1, 2], [2, 8]]), wt, padding_idx=-2, max_norm=2.0)
    assert_close(ye, yt)
    ye.sum().backward()
    yt.sum().backward()
    assert_close(we.grad, wt.grad)


# -- EmbeddingBag ---------------------------------------------------------------------------

BAG_INPUTS = [
    ([1, 3, 3, 5, 9, 0, 3, 7], [0, 2, 2, 5]),  # an empty bag in the middle
    ([4, 4, 1, 0], [0, 1, 3]),
    ([[1, 2, 3], [3, 3, 0], [9, 8, 7]], None),  # 2-d: fixed-length bags
]


@pytest.mark.parametrize("inputs", BAG_INPUTS, ids=["offsets", "offsets2", "2d"])
@pytest.mark.parametrize("kwargs", [{"mode": "sum"}, {"mode": "mean"}, {"mode": "max"},
                                    {"mode": "mean", "padding_idx": 3}, {"mode": "max", "padding_idx": 3},
                                    {"mode": "sum", "padding_idx": -7},
                                    {"mode": "mean", "max_norm": 1.0}])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_embedding_bag_matches_torch(inputs, kwargs, dtype):
    indices, offsets = inputs
    em, tm = _pair("EmbeddingBag", dtype=dtype, **kwargs)
    extra_e = (ember.tensor(offsets),) if offsets is not None else ()
    extra_t = (torch.tensor(offsets),) if offsets is not None else ()
    _run(em, tm, indices, *extra_e, extra_t=extra_t, dtype=dtype)
    assert repr(em) == repr(tm)


@pytest.mark.parametrize("include_last_offset", [False, True])
def test_embedding_bag_per_sample_weights(include_last_offset):
    em, tm = _pair("EmbeddingBag", mode="sum", include_last_offset=include_last_offset)
    indices, offsets = [1, 3, 3, 5, 9, 0], [0, 2, 2, 6]
    pw = np.random.default_rng(3).uniform(-1, 1, len(indices))
    pe, pt = ember.tensor(pw.copy(), requires_grad=True), torch.tensor(pw.copy(), requires_grad=True)
    _run(em, tm, indices, ember.tensor(offsets), pe, extra_t=(torch.tensor(offsets), pt))
    assert_close(pe.grad, pt.grad)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_scale_grad_by_freq(mode):
    # PyTorch 2.13's CPU embedding_bag scales some rows by another row's count (row 5 of [5, 3, 3, 3] gets
    # 1/3), so the reference is F.embedding with scale_grad_by_freq reduced per bag, which is what it documents.
    we, wt = _tables()
    we.requires_grad_()
    wt.requires_grad_()
    indices = [[1, 3, 3], [5, 9, 3], [7, 7, 0]]
    ye = F.embedding_bag(ember.tensor(indices), we, mode=mode, scale_grad_by_freq=True)
    looked_up = torch.nn.functional.embedding(torch.tensor(indices), wt, scale_grad_by_freq=True)
    yt = looked_up.sum(1) if mode == "sum" else looked_up.mean(1)
    assert_close(ye, yt)
    g = np.random.default_rng(1).uniform(-1, 1, (3, 4))
    ye.backward(ember.tensor(g.copy()))
    yt.backward(torch.tensor(g.copy()))
    assert_close(we.grad, wt.grad)


def test_embedding_bag_default_init_and_state_dict():
    em, tm = nn.EmbeddingBag(30, 6, padding_idx=2), torch.nn.EmbeddingBag(30, 6, padding_idx=2)
    check_state_dict(tm, em)
    assert np.all(em.weight.detach().numpy()[2] == 0)
    frozen = nn.EmbeddingBag.from_pretrained(ember.zeros(3, 2))
    assert not frozen.weight.requires_grad


def _bag_outcome(lib, call):
    try:
        out = call(lib)
        return ("ok", tuple(out.shape), out.requires_grad)
    except Exception as e:  # noqa: BLE001 - the outcome is compared
        return (type(e).__name__, str(e))


@pytest.mark.parametrize("call", [
    # an index out of range: PyTorch's kernel names its position (with more than one bag its text is
    # an internal check's, "Expected i < index_size to be true")
    lambda lib: lib.nn.functional.embedding_bag(lib.tensor([0, 2, 5, 1]), lib.ones(5, 2), lib.tensor([0])),
    lambda lib: lib.nn.functional.embedding_bag(lib.tensor([-1]), lib.ones(5, 2), lib.tensor([0])),
    # float offsets or input: the dtype check's text (it says 'indices' for either)
    lambda lib: lib.nn.functional.embedding_bag(lib.tensor([0, 1]), lib.ones(5, 2), lib.tensor([0.0])),
    lambda lib: lib.nn.functional.embedding_bag(lib.tensor([0.0, 1.0]), lib.ones(5, 2), lib.tensor([0])),
    # include_last_offset with a single offset: no bags (ember indexed bag -1)
    lambda lib: lib.nn.functional.embedding_bag(lib.tensor([0, 1]), lib.ones(5, 2, requires_grad=True),
                                                lib.tensor([0]), include_last_offset=True),
], ids=["index past end", "negative index", "float offsets", "float input", "last offset only"])
def test_embedding_bag_bad_inputs_as_pytorch(call):
    assert _bag_outcome(ember, call) == _bag_outcome(torch, call)
