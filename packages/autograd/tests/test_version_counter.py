"""Per-tensor version counters (Note [Version counters]), compared with PyTorch.

A tensor, its views, its detach() results and its saved aliases share one counter; ``.data`` gets
a fresh one over the same memory; a tensor moved by ``set_`` or ``.data =`` keeps its own. Every
in-place write bumps it once, and autograd's saved-tensor check raises exactly when PyTorch's does,
with its message.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch
import torch.nn.functional as TF

import ember

LIBS = (ember, torch)
# The functional and optimizer cases need ember-nn, a package above this one (absent when ember-autograd is
# tested alone).
needs_nn = pytest.mark.skipif(importlib.util.find_spec("ember.nn") is None, reason="needs ember-nn")


def _fresh(lib):
    return lib.arange(12, dtype=lib.float32).reshape(3, 4).clone()


def _idx(lib):
    return lib.tensor([0, 2])


def _f(lib):
    if lib is ember:
        import ember.nn.functional as EF

        return EF
    return TF


# (name, fn(lib, x)): an in-place write (or a non-write) on x, a fresh 3x4 float tensor.
INPLACE_CASES = [
    ("add_", lambda lib, x: x.add_(1)),
    ("add_tensor", lambda lib, x: x.add_(lib.ones(4))),
    ("iadd", lambda lib, x: x.__iadd__(2)),
    ("mul_", lambda lib, x: x.mul_(2.5)),
    ("sub_alpha", lambda lib, x: x.sub_(lib.ones(3, 4), alpha=2)),
    ("div_", lambda lib, x: x.div_(3)),
    ("div_mode", lambda lib, x: x.div_(3, rounding_mode="floor")),
    ("pow_", lambda lib, x: x.pow_(2)),
    ("neg_", lambda lib, x: x.neg_()),
    ("exp_", lambda lib, x: x.exp_()),
    ("sqrt_", lambda lib, x: x.sqrt_()),
    ("abs_", lambda lib, x: x.abs_()),
    ("clamp_", lambda lib, x: x.clamp_(1, 5)),
    ("clamp_min_", lambda lib, x: x.clamp_min_(2)),
    ("relu_", lambda lib, x: x.relu_()),
    pytest.param("F.relu_inplace", lambda lib, x: _f(lib).relu(x, inplace=True), marks=needs_nn),
    pytest.param("F.dropout_eval", lambda lib, x: _f(lib).dropout(x, 0.5, training=False, inplace=True),
                 marks=needs_nn),
    ("sigmoid_", lambda lib, x: x.sigmoid_()),
    ("lerp_", lambda lib, x: x.lerp_(lib.zeros(3, 4), 0.5)),
    ("addcmul_", lambda lib, x: x.addcmul_(lib.ones(3, 4), lib.ones(3, 4), value=2)),
    ("addmm_", lambda lib, x: x.addmm_(lib.ones(3, 2), lib.ones(2, 4))),
    ("zero_", lambda lib, x: x.zero_()),
    ("fill_", lambda lib, x: x.fill_(3)),
    ("copy_", lambda lib, x: x.copy_(lib.ones(3, 4))),
    ("copy_self", lambda lib, x: x.copy_(x)),
    ("copy_bcast", lambda lib, x: x.copy_(lib.ones(4))),
    ("masked_fill_", lambda lib, x: x.masked_fill_(x > 4, 0.0)),
    ("index_fill_", lambda lib, x: x.index_fill_(0, _idx(lib), -1.0)),
    ("index_add_", lambda lib, x: x.index_add_(0, _idx(lib), lib.ones(2, 4))),
    ("index_copy_", lambda lib, x: x.index_copy_(0, _idx(lib), lib.ones(2, 4))),
    ("index_put_", lambda lib, x: x.index_put_((_idx(lib),), lib.tensor(7.0))),
    ("index_put_acc", lambda lib, x: x.index_put_((_idx(lib),), lib.tensor(7.0), accumulate=True)),
    ("scatter_", lambda lib, x: x.scatter_(1, lib.zeros(3, 1, dtype=lib.int64), 5.0)),
    ("scatter_add_", lambda lib, x: x.scatter_add_(1, lib.zeros(3, 1, dtype=lib.int64), lib.ones(3, 1))),
    ("masked_scatter_", lambda lib, x: x.masked_scatter_(x > 6, lib.zeros(12))),
    ("setitem_int", lambda lib, x: x.__setitem__(0, 1.0)),
    ("setitem_slice", lambda lib, x: x.__setitem__((slice(None), 1), lib.ones(3))),
    ("setitem_mask", lambda lib, x: x.__setitem__(x > 3, 0.0)),
    ("setitem_index", lambda lib, x: x.__setitem__(_idx(lib), 2.0)),
    ("view_iadd", lambda lib, x: x[:, 1:3].add_(1)),
    ("view_of_view_mul_", lambda lib, x: x.t()[1].mul_(2)),
    ("uniform_", lambda lib, x: x.uniform_()),
    ("normal_", lambda lib, x: x.normal_()),
    ("bernoulli_", lambda lib, x: x.bernoulli_(0.5)),
    ("random_", lambda lib, x: x.random_(0, 5)),
    ("exponential_", lambda lib, x: x.exponential_()),
    ("out_add", lambda lib, x: lib.add(lib.ones(3, 4), 1, out=x)),
    ("out_mm", lambda lib, x: lib.mm(lib.ones(3, 2), lib.ones(2, 4), out=x)),
    ("out_sum", lambda lib, x: lib.sum(lib.ones(3, 4, 5), 2, out=x)),
    ("out_resize", lambda lib, x: lib.add(lib.ones(2), 1, out=x)),
    ("resize_", lambda lib, x: x.resize_(2, 2)),
    ("resize_grow", lambda lib, x: x.resize_(5, 5)),
    ("set_tensor", lambda lib, x: x.set_(lib.ones(5))),
    ("set_empty", lambda lib, x: x.set_()),
    ("requires_grad_", lambda lib, x: x.requires_grad_()),
    ("t_", lambda lib, x: x.t_()),
    ("unsqueeze_", lambda lib, x: x.unsqueeze_(0)),
    ("as_strided_", lambda lib, x: x.as_strided_((2, 2), (1, 2))),
    ("detach_", lambda lib, x: x.detach_()),
    ("clone", lambda lib, x: x.clone()),
    ("view", lambda lib, x: x.view(12)),
    ("data_add_", lambda lib, x: x.data.add_(1)),
    ("detach_add_", lambda lib, x: x.detach().add_(1)),
    ("twice", lambda lib, x: (x.add_(1), x[0].mul_(2))),
]


@pytest.mark.parametrize("name, fn", INPLACE_CASES, ids=[getattr(c, "values", c)[0]
                                                          for c in INPLACE_CASES])
def test_inplace_versions_match_torch(name, fn):
    seen = []
    for lib in LIBS:
        lib.manual_seed(0)
        x = _fresh(lib)
        view, detached, data = x[1:], x.detach(), x.data
        fn(lib, x)
        seen.append((x._version, view._version, detached._version, data._version))
    assert seen[0] == seen[1], name


def _sweep_views(lib):
    x = _fresh(lib)
    views = [x[0], x.t(), x.view(4, 3), x.reshape(12), x.unsqueeze(0), x.expand(2, 3, 4), x.transpose(0, 1),
             x.detach(), x.narrow(1, 1, 2), x[..., 1], x.unbind(0)[1], x.split(2, 1)[0], x.diagonal(),
             x.as_strided((2,), (1,)), x.flatten(), x.permute(1, 0), x.select(1, 2), x.view_as(x), x.squeeze(),
             x.real, x.unfold(1, 2, 1), x.movedim(0, 1), x.chunk(2)[0], x[None], x.T, x.mT, x.detach().t()]
    fresh = [x.data, x.clone(), x.contiguous().clone(), x.t().contiguous(), x.data.t()]
    x.add_(1)
    views[3].mul_(2)
    views[7].sub_(1)  # detach() shares the counter
    fresh[0].add_(1)  # .data's own counter
    fresh[4].add_(1)  # a view of .data shares .data's
    return [v._version for v in views], [f._version for f in fresh], x._version


def test_views_share_the_counter_as_torch():
    assert _sweep_views(ember) == _sweep_views(torch)


def _data_and_set(lib):
    out = []
    x = lib.zeros(3)
    v, d = x[:2], x.detach()
    x.add_(1)
    out.append((x._version, v._version, d._version, x.data._version))
    dd = x.data
    dd.add_(1)
    out.append((x._version, dd._version, dd[:1]._version, dd.detach()._version))
    y = lib.ones(4)
    x.set_(y)
    out.append((x._version, v._version, d._version, y._version, x.detach()._version))
    y.add_(1)
    out.append((x._version, y._version, v._version))
    x.add_(1)
    out.append((x._version, y._version, v._version, d._version))
    z, w = lib.zeros(3), lib.ones(3)
    zd = z.detach()
    z.data = w
    out.append((z._version, w._version, zd._version, z.detach()._version))
    w.add_(1)
    out.append((z._version, w._version))
    z.add_(1)
    out.append((z._version, w._version, zd._version, z.detach()._version))
    out.append(z.tolist())
    return out


def test_data_and_set_keep_their_counters_as_torch():
    assert _data_and_set(ember) == _data_and_set(torch)


def _error(lib, fn):
    try:
        fn(lib)
    except RuntimeError as e:
        return str(e)
    return None


def _no_grad_write_after_save(lib):
    a = lib.tensor([1.0, 2.0], requires_grad=True)
    b = a.exp()
    with lib.no_grad():
        b.add_(1)
    b.sum().backward()


def _leaf_write_after_save(lib):
    w = lib.tensor([1.0, 2.0], requires_grad=True)
    y = (w * w).sum()
    with lib.no_grad():
        w.add_(1)
    y.backward()


def _input_write_after_save(lib):
    x = lib.tensor([1.0, 2.0])
    w = lib.tensor([3.0, 4.0], requires_grad=True)
    y = (x * w).sum()
    x.mul_(2)
    y.backward()


def _view_write_after_save(lib):
    x = lib.tensor([1.0, 2.0, 3.0])
    w = lib.tensor([3.0, 4.0, 5.0], requires_grad=True)
    y = (x * w).sum()
    x[1:].zero_()
    y.backward()


def _detach_write_after_save(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    h = x.sin()
    y = h.cos().sum()
    h.detach().add_(1)
    y.backward()


def _data_write_after_save(lib):  # no error: .data has a counter of its own
    w = lib.tensor([1.0, 2.0], requires_grad=True)
    y = (w * w).sum()
    w.data.add_(1)
    y.backward()
    return w.grad


def _data_assign_after_save(lib):  # no error: `.data =` keeps the counter
    w = lib.tensor([1.0, 2.0], requires_grad=True)
    y = (w * w).sum()
    w.data = lib.tensor([5.0, 6.0])
    y.backward()
    return w.grad


def _set_after_save(lib):
    x = lib.tensor([1.0, 2.0])
    w = lib.tensor([3.0, 4.0], requires_grad=True)
    y = (x * w).sum()
    x.set_(lib.tensor([9.0, 9.0]))
    y.backward()


def _mul_self_inplace(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    h.mul_(h)
    h.sum().backward()
    return x.grad


def _optimizer_step_after_save(lib):
    w = lib.tensor([1.0, 2.0], requires_grad=True)
    opt = lib.optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    y = (w * w).sum()
    opt.step()
    y.backward()


def _hooks_write_after_save(lib):  # a pack hook returning the tensor: the check still runs
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        h = x.sin()
        y = h.cos().sum()
    with lib.no_grad():
        h.add_(1)
    y.backward()


def _hooks_clone_after_save(lib):  # a pack hook cloning: the write does not matter
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    with lib.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t):
        h = x.sin()
        y = h.cos().sum()
    with lib.no_grad():
        h.add_(1)
    y.backward()
    return x.grad


ERROR_CASES = [_no_grad_write_after_save, _leaf_write_after_save, _input_write_after_save, _view_write_after_save,
               _detach_write_after_save, _data_write_after_save, _data_assign_after_save, _set_after_save,
               _mul_self_inplace, pytest.param(_optimizer_step_after_save, marks=needs_nn), _hooks_write_after_save,
               _hooks_clone_after_save]


@pytest.mark.parametrize("fn", ERROR_CASES, ids=[getattr(f, "values", [f])[0].__name__.strip("_") for f in ERROR_CASES])
def test_saved_tensor_check_matches_torch(fn):
    got, want = _error(ember, fn), _error(torch, fn)
    assert got == want
    if want is None:
        e, t = fn(ember), fn(torch)
        if t is not None:
            assert e.tolist() == pytest.approx(t.tolist(), rel=1e-6)


def _optim_versions(lib, name, **kw):
    lib.manual_seed(0)
    w = lib.ones(3, requires_grad=True)
    b = lib.zeros(2, requires_grad=True)
    opt = getattr(lib.optim, name)([w, b], lr=0.1, **kw)
    out = []
    for _ in range(2):
        opt.zero_grad()
        ((w * w).sum() + b.sum()).backward()
        opt.step()
        out.append((w._version, b._version))
    return out


@pytest.mark.parametrize("name, kw", [("SGD", {}), ("SGD", {"momentum": 0.9}), ("Adam", {}),
                                      ("Adam", {"foreach": False}), ("AdamW", {}),
                                      ("RMSprop", {}), ("Adagrad", {}), ("SGD", {"fused": True}),
                                      ("Adam", {"fused": True}), ("AdamW", {"fused": True})])
@needs_nn
def test_optimizer_step_bumps_as_torch(name, kw):
    # (fused=True: PyTorch's fused kernels bump nothing, nor do ember's since session 15)
    assert _optim_versions(ember, name, **kw) == _optim_versions(torch, name, **kw)


def _inference(lib):
    with lib.inference_mode():
        t = lib.ones(2)
        v = t[0]
    out = []
    for x in (t, v):
        try:
            out.append(x._version)
        except RuntimeError as e:
            out.append(str(e))
    lib.autograd.graph.increment_version(t)  # no counter: left alone
    n = lib.ones(2)
    lib.autograd.graph.increment_version([n, n[0]])
    out.append(n._version)
    return out


def test_inference_tensors_have_no_counter_as_torch():
    assert _inference(ember) == _inference(torch)


def test_counter_sharing_is_per_tensor():
    x = ember.ones(4)
    assert ember._C._same_version_counter(x, x[1:])
    assert ember._C._same_version_counter(x, x.detach().t())
    assert not ember._C._same_version_counter(x, x.data)
    assert ember._C._same_version_counter(x.data, x.data) is False  # two calls: two fresh counters
