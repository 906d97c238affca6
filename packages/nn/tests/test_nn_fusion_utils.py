"""Conv/linear + BatchNorm fusion, ``skip_init`` and ``functional_call`` against PyTorch."""

from __future__ import annotations

import pytest
import torch
from layer_helpers import assert_close, from_torch, input_pair

import ember

TU, EU = torch.nn.utils, ember.nn.utils


def _eval_pair(build, bn_build):
    """(torch layer, torch bn), (ember layer, ember bn) with equal non-trivial weights and statistics."""
    tl, tbn = build(torch), bn_build(torch)
    with torch.no_grad():
        for name, buf in tbn.named_buffers():
            if buf.is_floating_point():
                buf.uniform_(0.5, 1.5) if "var" in name else buf.uniform_(-1, 1)
        for p in tbn.parameters():
            p.uniform_(-1, 1)
    el, ebn = build(ember), bn_build(ember)
    for t, e in ((tl, el), (tbn, ebn)):
        e.load_state_dict({k: from_torch(v) for k, v in t.state_dict().items()})
        t.eval()
        e.eval()
    return (tl, tbn), (el, ebn)


_CONVS = {
    "conv1d": (lambda lib: lib.nn.Conv1d(2, 3, 3), lambda lib: lib.nn.BatchNorm1d(3), (2, 2, 6), False),
    "conv2d": (lambda lib: lib.nn.Conv2d(2, 3, 3), lambda lib: lib.nn.BatchNorm2d(3), (2, 2, 5, 5), False),
    "conv2d_nobias": (lambda lib: lib.nn.Conv2d(2, 3, 3, bias=False), lambda lib: lib.nn.BatchNorm2d(3),
                      (1, 2, 4, 4), False),
    "conv2d_noaffine": (lambda lib: lib.nn.Conv2d(2, 3, 3), lambda lib: lib.nn.BatchNorm2d(3, affine=False),
                        (1, 2, 4, 4), False),
    "convT2d": (lambda lib: lib.nn.ConvTranspose2d(2, 3, 3), lambda lib: lib.nn.BatchNorm2d(3),
                (1, 2, 4, 4), True),
}


@pytest.mark.parametrize("case", sorted(_CONVS))
def test_fuse_conv_bn_eval(case):
    build, bn_build, shape, transpose = _CONVS[case]
    (tc, tbn), (ec, ebn) = _eval_pair(build, bn_build)
    tf, ef = TU.fuse_conv_bn_eval(tc, tbn, transpose=transpose), EU.fuse_conv_bn_eval(ec, ebn, transpose=transpose)
    assert type(ef) is type(ec) and ef is not ec
    assert list(ef.state_dict()) == list(tf.state_dict())
    assert isinstance(ef.weight, ember.nn.Parameter) and isinstance(ef.bias, ember.nn.Parameter)
    xe, xt = input_pair(shape)
    assert_close(ef(xe), tf(xt))
    ember.testing.assert_close(ef(xe), ebn(ec(xe)), rtol=1e-4, atol=1e-5)  # fusion preserves the function
    ef(xe).sum().backward()
    tf(xt).sum().backward()
    assert_close(ef.weight.grad, tf.weight.grad)
    assert ef.bias.requires_grad == tf.bias.requires_grad  # False when conv had no bias
    if tf.bias.grad is None:
        assert ef.bias.grad is None
    else:
        assert_close(ef.bias.grad, tf.bias.grad)


@pytest.mark.parametrize("features", [4, 1])
@pytest.mark.parametrize("bias", [True, False])
def test_fuse_linear_bn_eval(features, bias):
    (tl, tbn), (el, ebn) = _eval_pair(lambda lib: lib.nn.Linear(3, 4, bias=bias),
                                      lambda lib: lib.nn.BatchNorm1d(features))
    tf, ef = TU.fuse_linear_bn_eval(tl, tbn), EU.fuse_linear_bn_eval(el, ebn)
    xe, xt = input_pair((5, 3))
    assert_close(ef(xe), tf(xt))
    assert_close(ef.weight, tf.weight)
    assert_close(ef.bias, tf.bias)


@pytest.mark.parametrize("requires_grad", [True, False])
def test_fuse_weights_functions(requires_grad):
    tw, tb, trm, trv = (torch.randn(3, 2, 2, requires_grad=requires_grad), torch.randn(3), torch.randn(3),
                        torch.rand(3) + 0.5)
    ew, eb, erm, erv = (from_torch(t) for t in (tw, tb, trm, trv))
    ew.requires_grad_(requires_grad)
    for args in ((None, None), (torch.randn(3), torch.randn(3))):
        eargs = tuple(None if a is None else from_torch(a) for a in args)
        tout = TU.fuse_conv_bn_weights(tw, tb, trm, trv, 1e-5, *args)
        eout = EU.fuse_conv_bn_weights(ew, eb, erm, erv, 1e-5, *eargs)
        for e, t in zip(eout, tout):
            assert isinstance(e, ember.nn.Parameter) and e.is_leaf
            assert e.requires_grad == t.requires_grad
            assert_close(e, t)
    tw2, ew2 = torch.randn(3, 2, dtype=torch.float64), None
    ew2 = from_torch(tw2)
    tout = TU.fuse_linear_bn_weights(tw2, None, trm, trv, 1e-3, torch.ones(3), torch.zeros(3))
    eout = EU.fuse_linear_bn_weights(ew2, None, erm, erv, 1e-3, ember.ones(3), ember.zeros(3))
    for e, t in zip(eout, tout):
        assert_close(e, t, rtol=1e-6, atol=1e-6)


def test_fuse_errors():
    conv, bn = ember.nn.Conv2d(2, 3, 3), ember.nn.BatchNorm2d(3)
    with pytest.raises(AssertionError, match="Fusion only for eval!"):
        EU.fuse_conv_bn_eval(conv, bn.eval())
    lin = ember.nn.Linear(3, 4).eval()
    with pytest.raises(AssertionError, match="linear.out_features == bn.num_features"):
        EU.fuse_linear_bn_eval(lin, ember.nn.BatchNorm1d(3).eval())
    with pytest.raises(AssertionError, match="must not be None"):
        EU.fuse_linear_bn_eval(lin, ember.nn.BatchNorm1d(4, track_running_stats=False).eval())


def test_skip_init():
    m = EU.skip_init(ember.nn.Linear, 3, 4, bias=False)
    t = TU.skip_init(torch.nn.Linear, 3, 4, bias=False)
    assert type(m) is ember.nn.Linear and m.weight.device.type == "cpu"
    assert tuple(m.weight.shape) == tuple(t.weight.shape) and isinstance(m.weight, ember.nn.Parameter)
    assert list(m.state_dict()) == list(t.state_dict())

    class NoDevice(ember.nn.Module):
        pass

    with pytest.raises(RuntimeError, match="Module must support a 'device' arg"):
        EU.skip_init(NoDevice)
    with pytest.raises(RuntimeError, match="Expected a Module"):
        EU.skip_init(int)


class _Tied:
    @staticmethod
    def build(lib):
        class Tied(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = lib.nn.Linear(3, 3)
                self.b = lib.nn.Linear(3, 3)
                self.b.weight = self.a.weight
                self.register_buffer("shift", lib.ones(3))

            def forward(self, x, scale=1.0):
                return self.b(self.a(x)) * scale + self.shift

        return Tied()


def _tied_pair():
    tm, em = _Tied.build(torch), _Tied.build(ember)
    em.load_state_dict({k: from_torch(v) for k, v in tm.state_dict().items()})
    return tm, em


@pytest.mark.parametrize("tie_weights", [True, False])
@pytest.mark.parametrize("which", ["func", "stateless", "func_list"])
def test_functional_call(which, tie_weights):
    tm, em = _tied_pair()
    tw = torch.randn(3, 3, requires_grad=True)
    ew = from_torch(tw).requires_grad_(True)
    tshift, eshift = torch.full((3,), 2.0), ember.full((3,), 2.0)
    xe, xt = input_pair((2, 3))
    tparams, eparams = {"a.weight": tw, "shift": tshift}, {"a.weight": ew, "shift": eshift}
    if which == "func":
        ty = torch.func.functional_call(tm, tparams, (xt,), {"scale": 3.0}, tie_weights=tie_weights)
        ey = ember.func.functional_call(em, eparams, (xe,), {"scale": 3.0}, tie_weights=tie_weights)
    elif which == "func_list":
        ty = torch.func.functional_call(tm, [{"a.weight": tw}, {"shift": tshift}], xt, {"scale": 3.0},
                                        tie_weights=tie_weights)
        ey = ember.func.functional_call(em, [{"a.weight": ew}, {"shift": eshift}], xe, {"scale": 3.0},
                                        tie_weights=tie_weights)
    else:
        with pytest.warns(FutureWarning):
            ty = TU.stateless.functional_call(tm, tparams, xt, {"scale": 3.0}, tie_weights=tie_weights)
        with pytest.warns(FutureWarning, match="deprecated"):
            ey = EU.stateless.functional_call(em, eparams, xe, {"scale": 3.0}, tie_weights=tie_weights)
    assert_close(ey, ty)
    ey.sum().backward()
    ty.sum().backward()
    assert_close(ew.grad, tw.grad)
    assert_close(xe.grad, xt.grad)
    # The module's own tensors are back in place; untied, b.weight stayed the module's own.
    assert em.b.weight is em.a.weight and isinstance(em.a.weight, ember.nn.Parameter)
    assert em.shift.tolist() == [1.0, 1.0, 1.0]
    if tie_weights:
        assert em.a.weight.grad is None and tm.a.weight.grad is None
    else:
        assert_close(em.a.weight.grad, tm.a.weight.grad)
    assert_close(em(xe.detach()), tm(xt.detach()))


def test_functional_call_errors():
    _, em = _tied_pair()
    x = ember.ones(1, 3)
    with pytest.raises(ValueError, match="which are tied"):
        ember.func.functional_call(em, {"a.weight": ember.zeros(3, 3), "b.weight": ember.ones(3, 3)}, x)
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        ember.func.functional_call(em, [{"shift": ember.zeros(3)}, {"shift": ember.zeros(3)}], x)
    with pytest.raises(ValueError, match="Expected parameter_and_buffer_dicts to be a dict"):
        ember.func.functional_call(em, 3, x)
    with pytest.raises(RuntimeError, match=r"Error\(s\) in reparametrizing for Tied:\n\tUnexpected key\(s\): 'nope'"):
        ember.func.functional_call(em, {"nope": ember.zeros(3)}, x, strict=True)
    with pytest.raises(RuntimeError, match="Missing key"):
        ember.func.functional_call(em, {"shift": ember.zeros(3)}, x, strict=True)
