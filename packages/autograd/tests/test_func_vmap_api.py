"""vmap's interface against torch.func.vmap: in_dims/out_dims (None, negative, nested pytrees),
chunk_size, nesting, randomness, and the errors (types and messages) PyTorch raises."""

from __future__ import annotations

import pytest
import torch
import torch.func as tf
from func_models import assert_trees_close

import ember
from ember.func import vmap


def _pair(*shape, seed=0):
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return ember.tensor(t.numpy()), t


def test_in_dims_none_negative_and_pytrees():
    ea, ta = _pair(4, 3)
    eb, tb = _pair(3, 5, 4, seed=1)
    ec, tc = _pair(3, seed=2)

    def f(lib):
        return lambda inp, c: (inp["a"] * inp["b"][0].sum(0).unsqueeze(-1)[:3].T + c, inp["b"][1])

    e = vmap(f(ember), in_dims=({"a": 0, "b": (-1, None)}, None))({"a": ea, "b": (eb, ec)}, ec)
    t = tf.vmap(f(torch), in_dims=({"a": 0, "b": (-1, None)}, None))({"a": ta, "b": (tb, tc)}, tc)
    assert_trees_close(e, t)


@pytest.mark.parametrize("out_dims", [0, 1, -1, (1, 0), (None, 2)])
def test_out_dims(out_dims):
    ex, tx = _pair(5, 2, 3)
    ec, tc = _pair(7, seed=3)
    e = vmap(lambda x, c: (c, x * 2) if out_dims == (None, 2) else (x.sum(0), x * 2), out_dims=out_dims,
             in_dims=(0, None))(ex, ec)
    t = tf.vmap(lambda x, c: (c, x * 2) if out_dims == (None, 2) else (x.sum(0), x * 2), out_dims=out_dims,
                in_dims=(0, None))(tx, tc)
    assert_trees_close(e, t)


def test_unbatched_outputs_are_repeated():
    e = vmap(lambda x: (ember.ones(2), x), in_dims=0)(ember.zeros(3, 4))
    assert tuple(e[0].shape) == (3, 2) and ember.equal(e[0], ember.ones(3, 2))


def test_nested_vmap_matches_torch():
    ex, tx = _pair(2, 3, 4)
    ey, ty = _pair(3, 4, seed=4)
    e = vmap(vmap(lambda a, b: ember.dot(a, b), in_dims=(0, 0)), in_dims=(0, None))(ex, ey)
    t = tf.vmap(tf.vmap(lambda a, b: torch.dot(a, b), in_dims=(0, 0)), in_dims=(0, None))(tx, ty)
    assert_trees_close(e, t)
    e = vmap(vmap(lambda a, b: a @ b, in_dims=(None, 0)), in_dims=(0, None))(ex, ey)
    t = tf.vmap(tf.vmap(lambda a, b: a @ b, in_dims=(None, 0)), in_dims=(0, None))(tx, ty)
    assert_trees_close(e, t)


def test_chunk_size():
    ex, _ = _pair(7, 3)
    whole = vmap(lambda a: ember.softmax(a, 0) * a.sum())(ex)
    for chunk in (1, 2, 3, 7, 100):
        assert_trees_close(vmap(lambda a: ember.softmax(a, 0) * a.sum(), chunk_size=chunk)(ex), whole)
    with pytest.raises(ValueError, match="chunk_size should be None or greater than 0"):
        vmap(ember.sin, chunk_size=0)


def test_randomness_error_same_different():
    x = ember.zeros(4, 3)
    with pytest.raises(RuntimeError, match="called random operation while in randomness error mode"):
        vmap(lambda a: a + ember.randn(3))(x)
    with pytest.raises(RuntimeError, match="called random operation while in randomness error mode"):
        vmap(lambda a: ember.dropout(a, 0.5, True))(x)
    same = vmap(lambda a: a + ember.rand(3), randomness="same")(x)
    assert ember.equal(same, same[0].expand(4, 3))
    diff = vmap(lambda a: a + ember.rand(3), randomness="different")(x)
    assert not ember.equal(diff[0], diff[1])
    like = vmap(lambda a: ember.rand_like(a), randomness="different")(x)
    assert tuple(like.shape) == (4, 3) and not ember.equal(like[0], like[1])
    drop = vmap(lambda a: ember.dropout(a + 1, 0.5, True), randomness="different")(ember.zeros(64, 32))
    assert not ember.equal(drop[0], drop[1])
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        vmap(ember.sin, randomness="sometimes")


def test_randomness_nested():
    out = vmap(vmap(lambda a: a + ember.rand(()), randomness="different"), randomness="different")(
        ember.zeros(3, 4))
    assert tuple(out.shape) == (3, 4) and len(set(out.reshape(-1).tolist())) == 12
    out = vmap(vmap(lambda a: a + ember.rand(()), randomness="same"), randomness="different")(ember.zeros(3, 4))
    assert all(len(set(row)) == 1 for row in out.tolist()) and len({row[0] for row in out.tolist()}) == 3


def test_data_dependent_python_raises():
    x = ember.ones(3)
    with pytest.raises(RuntimeError, match="calling .item\\(\\) on a Tensor"):
        vmap(lambda a: a.sum().item())(ember.ones(2, 3))
    with pytest.raises(RuntimeError, match="data-dependent control flow"):
        vmap(lambda a: a * 2 if a.sum() > 0 else a)(ember.ones(2, 3))
    with pytest.raises(RuntimeError, match="data-dependent control flow"):
        vmap(lambda a: float(a))(x)


def test_inplace_on_unbatched_raises():
    y = ember.ones(3)
    with pytest.raises(RuntimeError, match="vmap: add_\\(self, \\*extra_args\\) is not possible"):
        vmap(lambda a: y.add_(a))(ember.ones(2, 3))
    assert ember.equal(y, ember.ones(3))
    # in place on the batched argument is fine, and writes through to the caller's tensor
    x = ember.zeros(2, 3)
    vmap(lambda a: a.add_(1.0))(x)
    assert ember.equal(x, ember.ones(2, 3))


@pytest.mark.parametrize("case, match", [
    (lambda: vmap(ember.sin, in_dims=(0, 0))(ember.ones(2)), "in_dims is not compatible with the structure"),
    (lambda: vmap(ember.sin, in_dims=2)(ember.ones(2, 3)), "Got in_dim=2 for some input"),
    (lambda: vmap(ember.add)(ember.ones(2), 3.0), "We cannot vmap over non-Tensor arguments"),
    (lambda: vmap(ember.add)(ember.ones(2), ember.ones(3)), "Expected all tensors to have the same size"),
    # torch 2.13 refuses a bare None in_dims before looking for a mapped tensor
    (lambda: vmap(ember.sin, in_dims=None)(ember.ones(2)), "expected `in_dims` to be int or a"),
    (lambda: vmap(ember.add, in_dims=(None, None))(ember.ones(2), ember.ones(2)),
     "Expected at least one Tensor to vmap over"),
    (lambda: vmap(ember.sin)(), "got no inputs"),
    (lambda: vmap(lambda a: 3)(ember.ones(2)), "must only return Tensors"),
    (lambda: vmap(ember.sin, out_dims=None)(ember.ones(2)), "can not return a BatchedTensor when out_dim is None"),
    (lambda: vmap(ember.sin, in_dims=[0])(ember.ones(2)), "expected `in_dims` to be int or a"),
    (lambda: vmap(ember.sin, out_dims="x"), "`out_dims` must be an int, None or a python collection"),
])
def test_errors_match_torch(case, match):
    with pytest.raises(ValueError, match=match):
        case()


def test_errors_are_what_torch_raises():
    for fn in (lambda v: v(torch.sin, in_dims=2)(torch.ones(2, 3)),
               lambda v: v(torch.add)(torch.ones(2), torch.ones(3))):
        with pytest.raises(ValueError):
            fn(tf.vmap)


def test_closure_over_tensors_and_kwargs():
    ex, tx = _pair(4, 3)
    ew, tw = _pair(3, 2, seed=5)
    e = vmap(lambda a, scale=1.0: (a @ ew) * scale)(ex, scale=2.0)
    t = tf.vmap(lambda a, scale=1.0: (a @ tw) * scale)(tx, scale=2.0)
    assert_trees_close(e, t)


def test_zero_dim_samples_keep_their_promotion_priority():
    cases = [(ember.float32, ember.float64), (ember.int64, ember.float64), (ember.float16, ember.float32)]
    for big, small in cases:
        tbig, tsmall = getattr(torch, str(big).split(".")[-1]), getattr(torch, str(small).split(".")[-1])
        e = vmap(lambda a, b: a * b)(ember.ones(2, 3, dtype=big), ember.ones(2, dtype=small))
        t = tf.vmap(lambda a, b: a * b)(torch.ones(2, 3, dtype=tbig), torch.ones(2, dtype=tsmall))
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]


def test_buffers_made_inside_vmap_take_batched_writes():
    """A deliberate deviation (docs/deviations.md): PyTorch raises here, ember batches the buffer."""
    x = ember.arange(6.0).reshape(2, 3)
    out = vmap(lambda a: ember.zeros(3).copy_(a) * 2)(x)
    assert ember.equal(out, x * 2)
    out = vmap(lambda a: ember.zeros(4).index_put_((ember.tensor([1, 2, 3]),), a))(x)
    assert ember.equal(out[:, 1:], x) and ember.equal(out[:, 0], ember.zeros(2))


def test_a_batched_tensor_that_escapes_its_vmap_raises():
    leaked = []
    vmap(lambda a: leaked.append(a) or a)(ember.ones(2, 3))
    with pytest.raises(RuntimeError, match="escaped the vmap that created it"):
        leaked[0] + 1
