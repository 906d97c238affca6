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
