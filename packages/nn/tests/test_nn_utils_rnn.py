"""ember.nn.utils.rnn (packing, padding, PackedSequence) against torch.nn.utils.rnn."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.utils.rnn as trnn

import ember
import ember.nn.utils.rnn as ernn
from ember.nn import utils as eutils


def _pair(shape, rng, dtype=np.float64, grad=False):
    x = rng.standard_normal(shape).astype(dtype)
    t, e = torch.from_numpy(x.copy()), ember.from_numpy(x.copy())
    if grad:
        t.requires_grad_()
        e.requires_grad_()
    return t, e


def _close(e, t):
    assert tuple(e.shape) == tuple(t.shape)
    assert str(e.dtype).split(".")[1] == str(t.dtype).split(".")[1]
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=0, atol=0)


def _same_packed(e, t):
    assert isinstance(e, ernn.PackedSequence)
    _close(e.data, t.data)
    assert e.batch_sizes.tolist() == t.batch_sizes.tolist()
    assert e.batch_sizes.dtype == ember.int64
    for ei, ti in ((e.sorted_indices, t.sorted_indices), (e.unsorted_indices, t.unsorted_indices)):
        assert (ei is None) == (ti is None)
        if ei is not None:
            assert ei.tolist() == ti.tolist()


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize(("lengths", "enforce_sorted"), [([4, 3, 1], True), ([2, 4, 1], False), ([3, 3, 3], True),
                                                          ([1, 4, 4], False)])
@pytest.mark.parametrize("lengths_as", ["list", "tensor"])
@pytest.mark.parametrize("trailing", [(), (2,), (2, 3)])
def test_pack_pad_round_trip(batch_first, lengths, enforce_sorted, lengths_as, trailing):
    rng = np.random.default_rng(0)
    shape = ((3, 4) if batch_first else (4, 3)) + trailing
    tx, ex = _pair(shape, rng, grad=True)
    t_len = lengths if lengths_as == "list" else torch.tensor(lengths)
    e_len = lengths if lengths_as == "list" else ember.tensor(lengths)
    tp = trnn.pack_padded_sequence(tx, t_len, batch_first=batch_first, enforce_sorted=enforce_sorted)
    ep = ernn.pack_padded_sequence(ex, e_len, batch_first=batch_first, enforce_sorted=enforce_sorted)
    _same_packed(ep, tp)
    for total_length in (None, 6):
        t_pad, t_lengths = trnn.pad_packed_sequence(tp, batch_first=batch_first, padding_value=-2.5,
                                                    total_length=total_length)
        e_pad, e_lengths = ernn.pad_packed_sequence(ep, batch_first=batch_first, padding_value=-2.5,
                                                    total_length=total_length)
        _close(e_pad, t_pad)
        assert e_lengths.tolist() == t_lengths.tolist()
        assert e_lengths.dtype == ember.int64
    # gradients flow through pack and pad back to the padded input
    w = rng.standard_normal(tuple(t_pad.shape))
    (t_pad * torch.from_numpy(w)).sum().backward()
    (e_pad * ember.from_numpy(w)).sum().backward()
    _close(ex.grad, tx.grad)


@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_sequence_and_unpack(enforce_sorted):
    rng = np.random.default_rng(0)
    lens = [5, 3, 2] if enforce_sorted else [2, 5, 3]
    pairs = [_pair((n, 2), rng, dtype=np.float32) for n in lens]
    tp = trnn.pack_sequence([t for t, _ in pairs], enforce_sorted=enforce_sorted)
    ep = ernn.pack_sequence([e for _, e in pairs], enforce_sorted=enforce_sorted)
    _same_packed(ep, tp)
    for e, t in zip(ernn.unpack_sequence(ep), trnn.unpack_sequence(tp), strict=True):
        _close(e, t)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("padding_value", [0.0, -1.5])
@pytest.mark.parametrize("trailing", [(), (3,)])
def test_pad_sequence(batch_first, padding_side, padding_value, trailing):
    rng = np.random.default_rng(0)
    pairs = [_pair((n,) + trailing, rng, grad=True) for n in (2, 4, 1)]
    t = trnn.pad_sequence([p[0] for p in pairs], batch_first=batch_first, padding_value=padding_value,
                          padding_side=padding_side)
    e = ernn.pad_sequence([p[1] for p in pairs], batch_first=batch_first, padding_value=padding_value,
                          padding_side=padding_side)
    _close(e, t)
    w = rng.standard_normal(tuple(t.shape))
    (t * torch.from_numpy(w)).sum().backward()
    (e * ember.from_numpy(w)).sum().backward()
    for tp, ep in pairs:
        _close(ep.grad, tp.grad)


def test_pad_sequence_dtypes_and_tensor_input():
    t = trnn.pad_sequence([torch.ones(2, dtype=torch.int64), torch.ones(3, dtype=torch.int64)], padding_value=0.5)
    e = ernn.pad_sequence([ember.ones(2, dtype=ember.int64), ember.ones(3, dtype=ember.int64)], padding_value=0.5)
    _close(e, t)
    # a tensor is an iterable of its rows
    rng = np.random.default_rng(0)
    tx, ex = _pair((2, 3), rng)
    _close(ernn.pad_sequence(ex), trnn.pad_sequence(tx))


@pytest.mark.parametrize("batch_first", [False, True])
def test_unpad_sequence(batch_first):
    rng = np.random.default_rng(0)
    tx, ex = _pair((3, 4, 2) if batch_first else (4, 3, 2), rng)
    lengths = [4, 1, 3]
    t_out = trnn.unpad_sequence(tx.clone(), torch.tensor(lengths), batch_first=batch_first)
    e_out = ernn.unpad_sequence(ex, ember.tensor(lengths), batch_first=batch_first)
    assert len(e_out) == len(t_out)
    for e, t in zip(e_out, t_out, strict=True):
        _close(e, t)


def test_packed_sequence_tuple_and_conversion():
    p = ernn.pack_sequence([ember.ones(3), ember.ones(2)])
    data, batch_sizes, sorted_indices, unsorted_indices = p
    assert p._fields == ("data", "batch_sizes", "sorted_indices", "unsorted_indices")
    assert sorted_indices is None and unsorted_indices is None
    assert p.to(ember.float32) is p
    d = p.to(ember.float64)
    assert d.data.dtype == ember.float64 and d.batch_sizes is p.batch_sizes
    assert p.double().data.dtype == ember.float64
    assert p.long().data.dtype == ember.int64
    assert not p.is_cuda
    # unsorted_indices is derived from sorted_indices when not given
    q = ernn.PackedSequence(data, batch_sizes, ember.tensor([1, 0]))
    assert q.unsorted_indices.tolist() == [1, 0]
    r = ernn.PackedSequence((data, batch_sizes))
    assert r.batch_sizes is batch_sizes
    assert ernn.invert_permutation(ember.tensor([2, 0, 1])).tolist() == [1, 2, 0]
    assert ernn.invert_permutation(None) is None


def test_exported_from_nn_utils():
    for name in ("PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence", "pack_sequence",
                 "unpad_sequence", "unpack_sequence"):
        assert getattr(eutils, name) is getattr(ernn, name)
    assert eutils.rnn is ernn


def _same_error(t_fn, e_fn):
    with pytest.raises(Exception) as t_err:
        t_fn()
    with pytest.raises(t_err.type) as e_err:
        e_fn()
    assert str(e_err.value) == str(t_err.value)


@pytest.mark.parametrize("lengths", [[3, 4, 2], [4, 3], [4, 3, 0], [4, 0, 2]])
def test_pack_errors(lengths):
    x = np.zeros((4, 3, 2))
    _same_error(lambda: trnn.pack_padded_sequence(torch.from_numpy(x), lengths),
                lambda: ernn.pack_padded_sequence(ember.from_numpy(x), lengths))


def test_pad_errors():
    p_t = trnn.pack_sequence([torch.ones(3), torch.ones(2)])
    p_e = ernn.pack_sequence([ember.ones(3), ember.ones(2)])
    _same_error(lambda: trnn.pad_packed_sequence(p_t, total_length=2),
                lambda: ernn.pad_packed_sequence(p_e, total_length=2))
    _same_error(lambda: trnn.pad_sequence([]), lambda: ernn.pad_sequence([]))
    _same_error(lambda: trnn.pad_sequence(5), lambda: ernn.pad_sequence(5))
    _same_error(lambda: trnn.pad_sequence([torch.ones(2)], padding_side="up"),
                lambda: ernn.pad_sequence([ember.ones(2)], padding_side="up"))


def test_pack_length_beyond_input_is_an_error():
    with pytest.raises(RuntimeError, match="exceeds the 4 time steps"):
        ernn.pack_padded_sequence(ember.zeros((4, 2)), [5, 3])
