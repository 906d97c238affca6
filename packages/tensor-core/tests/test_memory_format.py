"""Memory formats (channels_last, channels_last_3d, contiguous_format, preserve_format) against
torch: strides of contiguous/clone/to/empty/*_like, is_contiguous, errors, gradients through the
layout change, and results of ops on channels-last inputs."""

import pickle

import numpy as np
import pytest
import torch

import ember

FORMATS = ["channels_last", "contiguous_format"]


def _pair(shape, seed=0):
    a = np.random.default_rng(seed).normal(size=shape).astype(np.float32)
    return ember.tensor(a), torch.tensor(a)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "size1"])
def test_contiguous_clone_to_strides_match_torch(fmt, layout):
    shape = (2, 3, 4, 5) if layout != "size1" else (2, 1, 4, 1)
    e, t = _pair(shape)
    if layout == "transposed":
        e, t = e.transpose(2, 3), t.transpose(2, 3)
    elif layout == "sliced":
        e, t = e[:, :, 1:, ::2], t[:, :, 1:, ::2]
    ef, tf = getattr(ember, fmt), getattr(torch, fmt)
    for make in (lambda x, f: x.contiguous(memory_format=f), lambda x, f: x.clone(memory_format=f),
                 lambda x, f: x.to(memory_format=f)):
        a, b = make(e, ef), make(t, tf)
        assert a.stride() == b.stride(), (a.stride(), b.stride())
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        for g in FORMATS:
            assert a.is_contiguous(memory_format=getattr(ember, g)) == b.is_contiguous(memory_format=getattr(torch, g))
    c = e.contiguous(memory_format=ef)
    assert c.contiguous(memory_format=ef) is c  # no copy when already laid out
    if layout != "size1":  # (a trivial channel dim suggests the contiguous format: to() copies, as torch)
        assert c.to(memory_format=ef) is c


def test_channels_last_3d_and_factories_match_torch():
    e, t = _pair((2, 3, 2, 4, 5))
    a, b = e.contiguous(memory_format=ember.channels_last_3d), t.contiguous(memory_format=torch.channels_last_3d)
    assert a.stride() == b.stride() and a.is_contiguous(memory_format=ember.channels_last_3d)
    for name in ("empty_like", "zeros_like", "ones_like"):
        x = getattr(ember, name)(e[:, :, 0], memory_format=ember.channels_last)
        y = getattr(torch, name)(t[:, :, 0], memory_format=torch.channels_last)
        assert x.stride() == y.stride()
    x = ember.full_like(e[:, :, 0], 2.0, memory_format=ember.channels_last)
    assert x.stride() == torch.full_like(t[:, :, 0], 2.0, memory_format=torch.channels_last).stride()
    assert ember.empty(2, 3, 4, 5, memory_format=ember.channels_last).stride() == \
        torch.empty(2, 3, 4, 5, memory_format=torch.channels_last).stride()


def test_errors_match_torch():
    e, t = _pair((2, 3))
    for lib, x in ((ember, e), (torch, t)):
        with pytest.raises(RuntimeError, match="required rank 4"):
            x.contiguous(memory_format=lib.channels_last)
        with pytest.raises(RuntimeError, match="required rank 5"):
            x.contiguous(memory_format=lib.channels_last_3d)
        with pytest.raises(RuntimeError, match="preserve memory format"):
            x.t().contiguous(memory_format=lib.preserve_format)
        assert x.contiguous(memory_format=lib.preserve_format) is x
    with pytest.raises(TypeError):
        e.contiguous(memory_format="channels_last")


def test_ops_and_gradients_on_channels_last_inputs_match_torch():
    e, t = _pair((2, 3, 6, 6))
    w = np.random.default_rng(1).normal(size=(4, 3, 3, 3)).astype(np.float32)
    ec = e.contiguous(memory_format=ember.channels_last).requires_grad_()
    tc = t.contiguous(memory_format=torch.channels_last).requires_grad_()
    em = ember.nn.Conv2d(3, 4, 3).to(memory_format=ember.channels_last)
    tm = torch.nn.Conv2d(3, 4, 3).to(memory_format=torch.channels_last)
    with ember.no_grad():
        em.weight.copy_(ember.tensor(w))
        em.bias.zero_()
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(w))
        tm.bias.zero_()
    assert em.weight.stride() == tm.weight.stride()
    ye, yt = em(ec).relu().sum(), tm(tc).relu().sum()
    np.testing.assert_allclose(ye.item(), yt.item(), rtol=1e-5)
    ye.backward()
    yt.backward()
    np.testing.assert_allclose(ec.grad.numpy(), tc.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(em.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-4, atol=1e-4)
    # The layout change itself is differentiable.
    x = ember.tensor(e.numpy(), requires_grad=True)
    (x.contiguous(memory_format=ember.channels_last) * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(x.shape, 2.0, np.float32))


def test_constants_are_singletons_and_pickle():
    assert repr(ember.channels_last) == "ember.channels_last"
    assert isinstance(ember.preserve_format, ember.memory_format)
    for name in ("channels_last", "channels_last_3d", "contiguous_format", "preserve_format",
                 "legacy_contiguous_format"):
        assert pickle.loads(pickle.dumps(getattr(ember, name))) is getattr(ember, name)


# Layout propagation: *_like (preserve_format), pointwise ops (Note [Pointwise result layout]),
# convolution, batch norm, pooling, resampling and cat lay their results out as PyTorch's.
def _cl(m, x):
    return x.contiguous(memory_format=m.channels_last)


PROPAGATION = {
    "empty_like": lambda m, x: m.empty_like(_cl(m, x)).zero_(),
    "zeros_like": lambda m, x: m.zeros_like(_cl(m, x)),
    "ones_like_transposed": lambda m, x: m.ones_like(x[0].transpose(0, 2)),
    "full_like_sliced": lambda m, x: m.full_like(x[:, :, ::2], 2.0),
    "rand_like": lambda m, x: m.rand_like(_cl(m, x)) * 0,
    "relu": lambda m, x: m.relu(_cl(m, x)),
    "add_number": lambda m, x: _cl(m, x) + 1,
    "mul_contiguous": lambda m, x: _cl(m, x) * x,
    "contiguous_mul_cl": lambda m, x: x * _cl(m, x),
    "bias_broadcast": lambda m, x: _cl(m, x) + m.ones(1, 3, 1, 1),
    "exp": lambda m, x: _cl(m, x).exp(),
    "sigmoid": lambda m, x: _cl(m, x).sigmoid(),
    "gelu": lambda m, x: m.nn.functional.gelu(_cl(m, x)),
    "where": lambda m, x: m.where(_cl(m, x) > 0, _cl(m, x), 0.0),
    "transposed_2d": lambda m, x: x[0, 0].t() * 2,
    "conv": lambda m, x: m.nn.functional.conv2d(_cl(m, x), m.ones(4, 3, 3, 3), padding=1),
    "conv_cl_weight": lambda m, x: m.nn.functional.conv2d(x, _cl(m, m.ones(4, 3, 3, 3))),
    "batch_norm": lambda m, x: m.nn.functional.batch_norm(_cl(m, x), None, None, training=True),
    "max_pool": lambda m, x: m.nn.functional.max_pool2d(_cl(m, x), 2),
    "max_pool_indices": lambda m, x: m.nn.functional.max_pool2d(_cl(m, x), 2, return_indices=True)[1],
    "avg_pool": lambda m, x: m.nn.functional.avg_pool2d(_cl(m, x), 2),
    "adaptive_avg_pool": lambda m, x: m.nn.functional.adaptive_avg_pool2d(_cl(m, x), 1),
    "cat": lambda m, x: m.cat([_cl(m, x), _cl(m, x)], 1),
    "cat_mixed": lambda m, x: m.cat([_cl(m, x), x], 1),
    "interpolate": lambda m, x: m.nn.functional.interpolate(_cl(m, x), scale_factor=2),
    "group_norm": lambda m, x: m.nn.functional.group_norm(_cl(m, x), 3),
    "pad": lambda m, x: m.nn.functional.pad(_cl(m, x), (1, 2, 0, 1)),
    "lerp": lambda m, x: m.lerp(_cl(m, x), x, 0.3),
    "addcmul": lambda m, x: m.addcmul(_cl(m, x), _cl(m, x), x),
    "masked_fill": lambda m, x: _cl(m, x).masked_fill(x > 0, 0.0),  # a contiguous copy in PyTorch
    "mean_keepdim": lambda m, x: _cl(m, x).mean((2, 3), keepdim=True),
}


@pytest.mark.parametrize("name", list(PROPAGATION))
def test_layout_propagates_as_in_torch(name):
    e, t = _pair((2, 3, 6, 6))
    got, expected = PROPAGATION[name](ember, e), PROPAGATION[name](torch, t)
    assert got.stride() == expected.stride()
    for fmt in FORMATS:
        assert got.is_contiguous(memory_format=getattr(ember, fmt)) == \
            expected.is_contiguous(memory_format=getattr(torch, fmt))
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)


def test_channels_last_cnn_training_strides_match_torch():
    def run(m):
        m.manual_seed(0)
        model = m.nn.Sequential(m.nn.Conv2d(3, 4, 3), m.nn.BatchNorm2d(4), m.nn.ReLU(), m.nn.MaxPool2d(2),
                                m.nn.Conv2d(4, 2, 1))
        model = model.to(memory_format=m.channels_last)
        x = _cl(m, m.ones(2, 3, 8, 8)).requires_grad_()
        out = model(x)
        out.sum().backward()
        return out.stride(), x.grad.stride(), [p.grad.stride() for p in model.parameters()]

    assert run(ember) == run(torch)
