"""Forward-mode AD (dual_level / make_dual / unpack_dual) against torch's forward AD."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.autograd.forward_ad as tfwAD
from ag_helpers import make_arrays

import ember
import ember.autograd.forward_ad as fwAD
from ember.autograd.formulas import FORMULAS

CASES = [
    ("unary_chain", lambda m, x, y: (m.exp(x) * m.sin(y) + m.tanh(x)).sqrt(), [(2, 3), (2, 3)]),
    ("binary_broadcast", lambda m, x, y: m.pow(x, y) / (y + 2) - m.maximum(x, y), [(2, 3), (3,)]),
    ("scalar_ops", lambda m, x, y: 2 * x - y / 3 + x ** 2, [(2, 3), (2, 3)]),
    ("where", lambda m, x, y: m.where(x > 0.5, x, y * 2), [(2, 3), (2, 3)]),
    ("activations", lambda m, x, y: m.sigmoid(x) + m.relu(y - 0.5) + m.erf(x), [(2, 3), (2, 3)]),
    ("mm", lambda m, x, y: m.mm(x, y.t()), [(2, 3), (4, 3)]),
    ("matmul_batched", lambda m, x, y: m.matmul(x, y), [(2, 2, 3), (3, 2)]),
    ("addmm", lambda m, c, x, y: m.addmm(c, x, y, beta=0.5, alpha=2.0), [(2,), (2, 3), (3, 2)]),
    ("mv_dot", lambda m, x, y: m.mv(x, y) * m.dot(y, y), [(2, 3), (3,)]),
    ("sum_mean", lambda m, x, y: x.sum(1) + y.mean(0), [(2, 3), (2, 2)]),
    ("prod_amax", lambda m, x, y: x.prod(1) + m.amax(y, 0), [(2, 3), (3, 2)]),
    ("var_std_norm", lambda m, x, y: x.var(1) + x.std(1) + y.norm(), [(2, 3), (2, 2)]),
    ("softmax", lambda m, x, y: m.softmax(x, 1) + m.log_softmax(x, 0) * 2, [(2, 3), (2, 3)]),
    ("logsumexp_cumsum", lambda m, x, y: m.logsumexp(x, 1) + m.cumsum(y, 0).sum(1), [(2, 3), (2, 3)]),
    ("max_dim", lambda m, x, y: x.max(1)[0] * y.min(0)[0][:2], [(2, 3), (3, 2)]),
    ("views", lambda m, x, y: x.t().reshape(6)[1:5].view(2, 2) + y.expand(2, 2), [(2, 3), (2,)]),
    ("cat_index", lambda m, x, y: m.cat([x, y], 0)[m.tensor([0, 2, 2])], [(2, 3), (1, 3)]),
]


def _run(fn, arrays, tangents, module, fw):
    with fw.dual_level():
        duals = [fw.make_dual(module.tensor(a), module.tensor(t)) for a, t in zip(arrays, tangents)]
        out = fn(module, *duals)
        primal, tangent = fw.unpack_dual(out)
        return primal.detach().numpy().copy(), tangent.detach().numpy().copy()


@pytest.mark.parametrize("name, fn, shapes", CASES, ids=[c[0] for c in CASES])
def test_tangents_match_torch(name, fn, shapes):
    arrays = make_arrays(shapes, 0, 0.1, 1.0)
    tangents = make_arrays(shapes, 1)
    ep, et = _run(fn, arrays, tangents, ember, fwAD)
    tp, tt = _run(fn, arrays, tangents, torch, tfwAD)
    np.testing.assert_allclose(ep, tp, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose(et, tt, rtol=1e-6, atol=1e-9)


def test_rules_registered_for_elementwise_reduction_matmul():
    for name in ("mul", "exp", "sigmoid", "pow", "sum", "mean", "softmax", "log_softmax", "mm", "bmm", "addmm"):
        assert FORMULAS[name].jvp is not None, name


def test_inplace_op_propagates():
    a, t = np.array([1.0, 2.0]), np.array([1.0, -1.0])
    with fwAD.dual_level():
        x = fwAD.make_dual(ember.tensor(a), ember.tensor(t))
        y = x * 1
        y.mul_(x)
        tangent = fwAD.unpack_dual(y).tangent
    np.testing.assert_allclose(tangent.numpy(), 2 * a * t)


def test_unpack_outside_level_and_without_tangent():
    x = ember.ones(2)
    assert fwAD.unpack_dual(x).tangent is None
    with fwAD.dual_level():
        assert fwAD.unpack_dual(x).tangent is None
        d = fwAD.make_dual(x, ember.ones(2))
        primal = fwAD.unpack_dual(d).primal
        assert fwAD.unpack_dual(primal).tangent is None
    assert fwAD.unpack_dual(d).tangent is None  # tangents end with their level


def test_errors():
    with pytest.raises(RuntimeError):
        fwAD.make_dual(ember.ones(2), ember.ones(2))
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="different size"):
            fwAD.make_dual(ember.ones(2), ember.ones(3))
        with pytest.raises(RuntimeError, match="Nested"):
            with fwAD.dual_level():
                pass


def test_forward_and_reverse_agree():
    # J v from forward mode equals the jvp of ember.autograd.functional (double backward).
    from ember.autograd.functional import jvp

    a, v = make_arrays([(2, 3)], 3), make_arrays([(2, 3)], 4)
    fn = lambda x: (x.exp() * x).softmax(1)  # noqa: E731
    _, expected = jvp(fn, ember.tensor(a[0]), ember.tensor(v[0]))
    with fwAD.dual_level():
        out = fn(fwAD.make_dual(ember.tensor(a[0]), ember.tensor(v[0])))
        np.testing.assert_allclose(fwAD.unpack_dual(out).tangent.numpy(), expected.numpy(), rtol=1e-10)


def test_tangent_from_double_backward_has_no_history_of_its_own():
    # neural_tangent_kernels tutorial: vmap(jvp(conv2d)) over detached parameters. convolution's
    # tangent comes from its backward formula (the double-backward trick), whose seeds require
    # grad; the tangent kept their history and came out requiring grad (ConvolutionBackward0).
    # It must have a history only when a primal or a tangent has one (jacrev over jacfwd).
    import numpy as np

    rng = np.random.default_rng(0)
    shapes = ((2, 2, 3, 3), (1, 2, 4, 4), (3, 2, 2, 3, 3))
    w_np, x_np, t_np = (rng.standard_normal(s).astype("float32") for s in shapes)
    results = []
    for lib in (torch, ember):
        w, x, t = lib.tensor(w_np), lib.tensor(x_np), lib.tensor(t_np)

        def f(w, x=x, lib=lib):
            return lib.nn.functional.conv2d(x, w)

        out = lib.func.vmap(lambda tw, f=f, w=w, lib=lib: lib.func.jvp(f, (w,), (tw,))[1])(t)
        hess = lib.func.jacrev(lib.func.jacfwd(lambda w, f=f: f(w).sin().sum()))(w)
        results.append((out.requires_grad, lib.func.jacfwd(f)(w).requires_grad, out.detach().numpy(),
                        hess.detach().numpy()))
    assert results[0][:2] == results[1][:2] == (False, False)
    np.testing.assert_allclose(results[1][2], results[0][2], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(results[1][3], results[0][3], rtol=1e-4, atol=1e-5)


def test_inplace_on_a_view_gives_the_base_a_tangent():
    # `out = zeros(3); out[0] = dual` (and in-place ops on views of a plain tensor) set the base's
    # tangent in PyTorch; ember kept it on the view only, and unpack_dual(out).tangent was None.
    results = []
    for lib, fw in ((torch, tfwAD), (ember, fwAD)):
        with fw.dual_level():
            d = fw.make_dual(lib.tensor([0.5, 1.0, 2.0]), lib.tensor([1.0, -1.0, 3.0]))
            out = lib.zeros(3)
            out[0] = d[1] * 2
            out[1:] = d[:2].sin()
            base = lib.ones(2, 3)
            base.t()[1].mul_(d[0])
            base[0].add_(d)
            results.append([fw.unpack_dual(t).tangent.numpy() for t in (out, base)])
        # under jacfwd the tangent is batched by vmap and the zeros are not
        results[-1].append(lib.func.jacfwd(lambda x, lib=lib: _setitem(lib, x))(lib.tensor([0.5, 1.0])).numpy())
    for theirs, ours in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)


def _setitem(lib, x):
    out = lib.zeros(3)
    out[2] = x[0] * x[1]
    out[:2] = x.exp()
    return out
