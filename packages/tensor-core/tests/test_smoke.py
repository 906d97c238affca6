import ember

from conftest import assert_same, make_pair, torch


def test_add_broadcast_matches_torch():
    a, ta = make_pair((3, 4), "float32")
    b, tb = make_pair((4,), "float32", seed=1)
    assert_same(a + b, ta + tb)


def test_views_share_storage_and_version():
    x = ember.zeros(2, 3)
    v = x.t()
    v.add_(1)
    assert x._version == 1 and v._version == 1
    assert float(x.numpy().sum()) == 6.0
    assert torch.equal(torch.from_numpy(x.numpy()), torch.ones(2, 3))


def test_hash_is_id_and_native():
    """hash(t) == id(t) as PyTorch's Tensor.__hash__, for tensors, views and Parameters, served by
    _C.TensorBase's slot (no Python frame per hash; benchmarks/bench_tensor_hash.py)."""
    import types

    import torch

    import ember

    for lib in (torch, ember):
        t = lib.zeros(3)
        for x in (t, t[1:], lib.nn.Parameter(lib.ones(2))):
            assert hash(x) == id(x)
        assert {t: 1}[t] == 1
    assert not isinstance(ember.Tensor.__hash__, types.FunctionType)
