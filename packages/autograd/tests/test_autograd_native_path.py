"""The native fast path with autograd (issue 18): nodes recorded in C (csrc/common/autograd_record.cpp),
the native engine loop (autograd_engine.cpp), nn.Parameter on the fast path, grad modes, and the
native in-place binary ops. Every case is checked against PyTorch."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import ember
from ember.autograd.graph import SavedTensor

FAST_BINARY = ["add", "sub", "mul", "div", "maximum", "minimum"]
FAST_UNARY = ["exp", "tanh", "sigmoid", "relu", "neg", "sin", "sqrt", "abs", "log"]


def _pair(data, requires_grad=True, dtype=np.float32):
    data = np.asarray(data, dtype=dtype)
    return (ember.tensor(data, requires_grad=requires_grad), torch.tensor(data, requires_grad=requires_grad))


def _close(e, t, tol=1e-5):
    assert e is not None and t is not None
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", FAST_BINARY)
def test_binary_nodes_match_torch(name):
    rng = np.random.default_rng(0)
    a, ta = _pair(rng.random((3, 4)) + 0.5)
    b, tb = _pair(rng.random((4,)) + 0.5)
    e = getattr(ember, name)(a, b) * 2.0
    t = getattr(torch, name)(ta, tb) * 2.0
    assert type(e.grad_fn).__name__ == type(t.grad_fn).__name__
    assert type(e.grad_fn.next_functions[0][0]).__name__ == type(t.grad_fn.next_functions[0][0]).__name__
    e.sum().backward()
    t.sum().backward()
    _close(a.grad, ta.grad)
    _close(b.grad, tb.grad)


@pytest.mark.parametrize("name", FAST_UNARY)
def test_unary_nodes_match_torch(name):
    rng = np.random.default_rng(1)
    a, ta = _pair(rng.random((5,)) + 0.1, dtype=np.float64)
    e = getattr(ember, name)(a * 1.5)
    t = getattr(torch, name)(ta * 1.5)
    assert type(e.grad_fn).__name__ == type(t.grad_fn).__name__
    e.backward(ember.ones_like(e))
    t.backward(torch.ones_like(t))
    _close(a.grad, ta.grad, 1e-10)


def test_scalar_operands_and_non_leaf_inputs():
    a, ta = _pair([1.0, -2.0, 3.0])
    e = 3.0 - (2 * a) / 4
    t = 3.0 - (2 * ta) / 4
    y = e * e
    u = t * t
    y.sum().backward()
    u.sum().backward()
    _close(a.grad, ta.grad)


def test_parameter_takes_the_fast_path_and_matches_torch():
    nn = pytest.importorskip("ember.nn")  # ember-nn: absent when autograd is tested alone
    rng = np.random.default_rng(2)
    w = rng.random((3,)).astype(np.float32)
    p, tp = nn.Parameter(ember.tensor(w)), torch.nn.Parameter(torch.tensor(w))
    x, tx = _pair(rng.random((2, 3)), requires_grad=False)
    e = (x * p + p).tanh()
    t = (tx * tp + tp).tanh()
    assert type(e) is ember.Tensor and type(t) is torch.Tensor
    assert type(e.grad_fn).__name__ == "TanhBackward0"
    acc = e.grad_fn.next_functions[0][0].next_functions[1][0]
    assert type(acc).__name__ == "AccumulateGrad" and acc.variable is p
    e.sum().backward()
    t.sum().backward()
    _close(p.grad, tp.grad)
    # The accumulator is shared while alive (the same leaf, the same node), as in PyTorch.
    y1, y2 = p * 2.0, p * 3.0
    assert y1.grad_fn.next_functions[0][0] is y2.grad_fn.next_functions[0][0]


def test_subclass_with_hooks_is_not_plain():
    calls = []

    class Logged(ember.Tensor):
        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            calls.append(func.name)
            unwrap = [a.as_subclass(ember.Tensor) if isinstance(a, Logged) else a for a in args]
            return func(*unwrap, **(kwargs or {}))

    x = ember.ones(2).as_subclass(Logged)
    x * 2.0
    assert "mul" in calls


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode", "enable_inside_no_grad", "set_grad_enabled_false"])
def test_grad_modes(mode):
    nn = pytest.importorskip("ember.nn")
    a, ta = _pair([1.0, 2.0])
    p, tp = nn.Parameter(ember.ones(2)), torch.nn.Parameter(torch.ones(2))

    def run(lib, x, w):
        if mode == "no_grad":
            with lib.no_grad():
                return x * w
        if mode == "inference_mode":
            with lib.inference_mode():
                return x * w
        if mode == "set_grad_enabled_false":
            with lib.set_grad_enabled(False):
                return (x * w).exp()
        with lib.no_grad():
            with lib.enable_grad():
                return x * w

    e, t = run(ember, a, p), run(torch, ta, tp)
    assert e.requires_grad == t.requires_grad
    assert (e.grad_fn is None) == (t.grad_fn is None)
    if mode == "inference_mode":
        assert e.is_inference() and t.is_inference()
    if t.requires_grad:
        e.sum().backward()
        t.sum().backward()
        _close(p.grad, tp.grad)


def _modify_error(lib, x, w):
    y = x * w
    with lib.no_grad():
        x.add_(1.0)  # x is saved by mul: its version moves on
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as info:
        y.sum().backward()
    return info


def test_version_counter_error_after_native_inplace():
    a, ta = _pair([1.0, 2.0], requires_grad=False)
    w, tw = _pair([3.0, 4.0])
    v = a._version
    _modify_error(ember, a, w)
    _modify_error(torch, ta, tw)
    assert a._version == v + 1 == ta._version


def test_inplace_on_leaf_errors_and_no_grad_updates():
    w, tw = _pair([1.0, 2.0])
    for lib, x in ((ember, w), (torch, tw)):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            x.mul_(2.0)
        with lib.no_grad():
            x.mul_(2.0)
            x.add_(lib.ones(2))
    _close(w, tw)
    assert w.requires_grad and w.grad_fn is None


def test_inplace_native_matches_python_errors():
    x, tx = ember.ones(2, 2), torch.ones(2, 2)
    for lib, t in ((ember, x), (torch, tx)):
        with pytest.raises(RuntimeError):
            t.add_(lib.ones(3))
        with pytest.raises(RuntimeError):
            t.mul_(lib.ones(2, 2, 2))
    i, ti = ember.ones(3, dtype=ember.int64), torch.ones(3, dtype=torch.int64)
    for t in (i, ti):
        with pytest.raises(RuntimeError):
            t.mul_(1.5)
    # Overlapping and broadcast writes stay on the Python kernel and agree with PyTorch.
    e = ember.arange(4.0)
    t = torch.arange(4.0)
    e.add_(e)
    t.add_(t)
    _close(e, t)
    e = ember.ones(3, 1).expand(3, 2)
    t = torch.ones(3, 1).expand(3, 2)
    with pytest.raises(RuntimeError):
        t.add_(1.0)
    with pytest.raises(RuntimeError):
        e.add_(1.0)


def test_inplace_with_grad_records_through_python():
    a, ta = _pair([1.0, 2.0, 3.0])
    e = a * 2.0
    t = ta * 2.0
    e.mul_(a)
    t.mul_(ta)
    assert type(e.grad_fn).__name__ == type(t.grad_fn).__name__
    e.sum().backward()
    t.sum().backward()
    _close(a.grad, ta.grad)


def test_double_backward_through_fast_path_ops():
    a, ta = _pair([0.5, -1.0, 2.0])
    w, tw = _pair([1.5, 0.5, -0.5])
    grads = []
    for lib, x, y in ((ember, a, w), (torch, ta, tw)):
        out = ((x * y).sigmoid() * x - y.exp()).sum()
        gx, gy = lib.autograd.grad(out, (x, y), create_graph=True)
        assert gx.requires_grad
        (gx * gy).sum().backward()
        grads.append((gx, gy, x.grad, y.grad))
    for e, t in zip(*grads):
        _close(e, t)


def test_hooks_retain_grad_and_retain_graph():
    a, ta = _pair([1.0, 2.0])
    results = []
    for x in (a, ta):
        seen = []
        mid = x * 3.0
        mid.retain_grad()
        mid.register_hook(lambda g: g * 2)
        out = (mid * mid).sum()
        out.grad_fn.register_prehook(lambda go, seen=seen: seen.append("pre") or None)
        out.grad_fn.register_hook(lambda gi, go, seen=seen: seen.append("post") or None)
        out.backward(retain_graph=True)
        out.backward()
        with pytest.raises(RuntimeError, match="second time"):
            out.backward()
        results.append((x.grad, mid.grad, seen))
    (eg, em, es), (tg, tm, ts) = results
    _close(eg, tg)
    _close(em, tm)
    assert es == ts


def test_multi_grad_hook_and_grad_of_inputs():
    a, ta = _pair([1.0, 2.0])
    b, tb = _pair([3.0, 4.0])
    got = []
    for lib, x, y in ((ember, a, b), (torch, ta, tb)):
        seen = []
        lib.autograd.graph.register_multi_grad_hook((x, y), lambda gs, seen=seen: seen.append([g.tolist() for g in gs]))
        (x * y + x).sum().backward()
        got.append(seen)
    assert got[0] == got[1]
    a, ta = _pair([1.0, 2.0])
    b, tb = _pair([3.0, 4.0])
    ga = ember.autograd.grad((a * b).sum(), a)[0]
    gt = torch.autograd.grad((ta * tb).sum(), ta)[0]
    _close(ga, gt)


def test_anomaly_mode_and_saved_tensor_hooks_still_apply():
    a = ember.ones(2, requires_grad=True)
    with ember.autograd.detect_anomaly():
        y = a * 2.0
    assert "traceback_" in y.grad_fn.metadata
    packed = []

    def pack(t):
        packed.append(t)
        return t

    with ember.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        z = a * a
    assert len(packed) == 2
    z.sum().backward()
    _close(a.grad, torch.full((2,), 2.0))


def test_saved_inputs_are_saved_tensors_and_freed():
    a = ember.ones(2, requires_grad=True)
    b = ember.full((2,), 3.0)
    y = a * b
    saved = y.grad_fn._saved_args
    assert all(type(s) is SavedTensor for s in tuple.__iter__(saved))
    assert saved[1] is not b and tuple.__getitem__(saved, 0).data is a  # b aliased, the leaf kept
    y.sum().backward()
    assert tuple.__getitem__(saved, 0).data is None and y.grad_fn._released


def test_native_nodes_share_their_input_metadata_and_leave_the_gc():
    # A natively recorded node's input metadata is shared between nodes ((shape, dtype) pairs and a
    # one-input node's tuple of one pair) and its layout is a tuple of ints/None that the collector stops
    # tracking: the graph of a step adds fewer containers to each collection. Gradients as PyTorch's.
    import gc

    rng = np.random.default_rng(1)
    a, ta = _pair(rng.random((3, 4)) + 0.5)
    b, tb = _pair(rng.random((3, 4)) + 0.5)
    e1, e2 = ember.exp(a), ember.tanh(a)
    t1, t2 = torch.exp(ta), torch.tanh(ta)
    n1, n2 = e1.grad_fn, e2.grad_fn
    assert type(n1).__name__ == "ExpBackward0" and type(n2).__name__ == "TanhBackward0"
    assert n1._input_meta is n2._input_meta  # one input of one shape and dtype: one shared tuple
    m1, m2 = ember.mul(a, b), ember.mul(b, a)
    assert m1.grad_fn._input_meta[0] is m2.grad_fn._input_meta[1]  # the pair for a
    assert m1.grad_fn._input_meta[0] == (a._shape, a.dtype)
    gc.collect()
    assert not gc.is_tracked(n1._layout) and not gc.is_tracked(m1.grad_fn._layout)
    e, t = (e1 * e2 + m1 - m2 * 3.0).sum(), (t1 * t2 + ta * tb - tb * ta * 3.0).sum()
    e.backward()
    t.backward()
    _close(a.grad, ta.grad)
    _close(b.grad, tb.grad)


def test_stand_ins_keep_their_source_device_in_a_field_and_leave_the_gc():
    # A node whose formula reads only metadata (a view's, a cast's) keeps a data-less meta stand-in for its
    # input: the source device lives in a field (no __dict__ per stand-in) and the stand-in, which refers to
    # nothing that can lead back to it, is not tracked by the collector (Note [Untracked stand-ins]), nor is
    # the node's tuple of such args.
    # Ordinary tensors have no _src_device; gradients (dtype casts back, views) as PyTorch's.
    import gc

    rng = np.random.default_rng(2)
    x, tx = _pair(rng.random((3, 4)) + 0.5)
    y, ty = (x * 2.0).to(ember.float64), (tx * 2.0).to(torch.float64)
    v, tv = y.view(4, 3), ty.view(4, 3)
    assert type(y.grad_fn).__name__ == type(ty.grad_fn).__name__ == "ToCopyBackward0"
    for node in (y.grad_fn, v.grad_fn):
        s = tuple.__getitem__(node._saved_args, 0)
        assert type(s) is ember.Tensor and s.device.type == "meta"
        assert s._src_device is x._device and vars(s) == {}
        assert not gc.is_tracked(s)
    # and the natively recorded view's args (the stand-in, its ints): an immutable tuple of untracked things
    assert not gc.is_tracked(v.grad_fn._saved_args)
    m = x * 2.0  # a tensor saved for its data: its args stay tracked (a SavedTensor may lead to a cycle)
    mm = (m * m).grad_fn
    assert gc.is_tracked(mm._saved_args)
    # a node's tuple of (shape, dtype) pairs leads nowhere either (CPython would keep it tracked: dtypes are)
    assert len(mm._input_meta) == 2 and not gc.is_tracked(mm._input_meta)
    assert getattr(x, "_src_device", None) is None
    with pytest.raises(AttributeError, match="_src_device"):
        _ = x._src_device
    x._src_device = x._device  # (writable, as the Python recorder's stand-ins need; a field, not __dict__)
    assert x._src_device is x._device and "_src_device" not in vars(x)
    del x._src_device
    assert not hasattr(x, "_src_device")
    (v.sin() * 3.0).sum().backward()
    (tv.sin() * 3.0).sum().backward()
    assert x.grad.dtype == ember.float32
    _close(x.grad, tx.grad)


def test_backward_in_threads():
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            x, tx = _pair(rng.random((4,)))
            for _ in range(20):
                e = (x * 2.0).tanh().sum()
                e.backward()
                t = (tx * 2.0).tanh().sum()
                t.backward()
            _close(x.grad, tx.grad)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors



def _python_applies(fn):
    """The node classes whose OpNode.apply ran in Python during fn() (the engine runs the common node natively)."""
    from ember.autograd._recording import OpNode

    code = OpNode.apply.__code__
    return _profiled_calls(fn, lambda frame: type(frame.f_locals["self"]).__name__ if frame.f_code is code else None)


def test_nodes_with_plain_kwargs_apply_natively():
    # addmm's node keeps alpha/beta and a dtype cast's node dtype/device as kwargs: plain values, passed to the
    # formula as they are, so these nodes need no Python apply (an autocast step has one per cast and linear).
    rng = np.random.default_rng(2)
    bias, tbias = _pair(rng.random((3,)))
    m1, tm1 = _pair(rng.random((2, 4)))
    m2, tm2 = _pair(rng.random((4, 3)))
    y = ember.addmm(bias, m1, m2, beta=0.5, alpha=2.0).to(ember.float64)
    ty = torch.addmm(tbias, tm1, tm2, beta=0.5, alpha=2.0).to(torch.float64)
    assert type(y.grad_fn).__name__ == "ToCopyBackward0" and y.grad_fn._kwargs
    assert type(y.grad_fn.next_functions[0][0]).__name__ == "AddmmBackward0"
    g = np.arange(6.0).reshape(2, 3)
    assert _python_applies(lambda: y.backward(ember.tensor(g))) == []
    ty.backward(torch.tensor(g))
    for a, t in ((bias, tbias), (m1, tm1), (m2, tm2)):
        assert a.grad.dtype is ember.float32
        _close(a.grad, t.grad)


def _python_frames(fn, codes):
    """The names of the given code objects that ran as Python frames during fn()."""
    return _profiled_calls(fn, lambda frame: frame.f_code.co_name if frame.f_code in codes else None)


def _profiled_calls(fn, name_of):
    """``name_of(frame)`` of each Python call during fn() for which it is not None."""
    import sys

    seen = []

    def prof(frame, event, arg):
        if event == "call":
            name = name_of(frame)
            if name is not None:
                seen.append(name)

    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return seen


def test_accumulate_grad_views_transposes_and_casts_run_natively():
    # AccumulateGrad's first gradient taken without a copy, views' reshape, transpose and _to_copy's backward
    # run in the native engine loop (no Python frame); the gradients, their strides and dtypes are torch's.
    from ember.autograd import _engine, graph
    from ember.autograd.formulas import views

    codes = {graph.AccumulateGrad.apply.__code__, graph.Node._release.__code__, _engine.accumulate_grad.__code__,
             views._reshape_back.__code__, views._transpose.__code__, views._to_copy.__code__}
    rng = np.random.default_rng(3)
    w, tw = _pair(rng.random((4, 6)))
    b, tb = _pair(rng.random((6,)))
    x, tx = _pair(rng.random((3, 4)), requires_grad=False)

    def run(lib, a, wt, bt):
        h = (a.to(lib.float64) @ wt.to(lib.float64)).view(3, 2, 3).transpose(0, 2)
        return (h * bt.to(lib.float64).view(2, 3, 1).transpose(0, 1)).sum()

    loss = run(ember, x, w, b)
    assert _python_frames(lambda: loss.backward(), codes) == []
    run(torch, tx, tw, tb).backward()
    for a, t in ((w, tw), (b, tb)):
        assert a.grad.dtype is ember.float32 and a.grad.stride() == t.grad.stride() and a.grad._base is None
        _close(a.grad, t.grad)
    # a second backward adds into .grad (AccumulateGrad.apply in Python), as a post-accumulate hook needs it
    seen = []
    b.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.clone()))
    loss = run(ember, x, w, b)
    assert sorted(set(_python_frames(lambda: loss.backward(), codes))) == ["accumulate_grad", "apply"]
    run(torch, tx, tw, tb).backward()
    _close(w.grad, tw.grad)
    _close(b.grad, tb.grad)
    _close(seen[0], tb.grad)

def _first_grad_kept(lib, path, keep=False):
    """Whether a leaf's first gradient is the tensor its producer made (no copy), on ``path``: "native"
    (the engine loop's AccumulateGrad), "hook" (AccumulateGrad.apply in Python, for a post-accumulate
    hook) or "view" (the Python path with a gradient that is a view of a base it covers). ``keep``: the
    producer also keeps a reference, which forbids keeping it."""
    ptrs, kept = [], []

    class Triple(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            r = (g * 3).reshape(2, 3).reshape(6) if path == "view" else g * 3
            ptrs.append(r.data_ptr())
            if keep:
                kept.append(r)
            return r

    w = lib.ones(6, requires_grad=True)
    if path != "native":
        w.register_post_accumulate_grad_hook(lambda p: None)
    Triple.apply(w).sum().backward()
    np.testing.assert_allclose(w.grad.detach().numpy(), np.full(6, 3.0))
    return w.grad.data_ptr() == ptrs[0]


def test_first_gradient_kept_without_copy_under_a_frame_evaluator():
    # AccumulateGrad keeps a gradient that nobody else holds (torch: use_count 1). Whether anyone else holds it
    # must not depend on the interpreter: with a PEP 523 frame evaluator installed (torch.compile's, here in
    # its run-only mode) calls are no longer inlined and each call level holds one more reference.
    import sys

    from torch._C._dynamo import eval_frame

    def refs(x):
        return sys.getrefcount(x)

    probe = object()
    inlined = refs(probe)
    cases = [(path, keep) for path in ("native", "hook", "view") for keep in (False, True)]
    expected = [_first_grad_kept(torch, path, keep) for path, keep in cases]
    assert expected == [True, False, True, False, True, False]
    assert [_first_grad_kept(ember, path, keep) for path, keep in cases] == expected
    prev = eval_frame.set_eval_frame(False)
    try:
        assert refs(probe) == inlined + 1  # the evaluator is in effect: the caller's reference stays
        got = [_first_grad_kept(ember, path, keep) for path, keep in cases]
        with pytest.warns(UserWarning, match="Anomaly Detection"), ember.autograd.detect_anomaly():
            got_anomaly = [_first_grad_kept(ember, path, keep) for path, keep in cases]
    finally:
        eval_frame.set_eval_frame(prev)
    assert refs(probe) == inlined
    assert got == expected
    assert got_anomaly == expected


def test_native_recording_resumes_once_a_missing_formula_is_back(monkeypatch):
    # An op recorded while FORMULAS had no formula for it goes through the Python recording; the
    # native recorder's cached answer must not outlive that (it once did, so that every later exp
    # was recorded in Python: test_autograd_engine's monkeypatch.delitem leaked into this file).
    from ember.autograd.formulas import FORMULAS

    x = ember.tensor([0.5, 1.0], requires_grad=True)
    assert type(x.exp().grad_fn._input_meta) is tuple  # the native recorder's
    formula = FORMULAS["sinh"]
    monkeypatch.delitem(FORMULAS, "sinh")
    y = x.sinh()  # recorded in Python, with no formula to run
    with pytest.raises(RuntimeError, match="derivative for sinh is not implemented"):
        y.sum().backward()
    monkeypatch.setitem(FORMULAS, "sinh", formula)
    z = x.sinh()
    assert type(z.grad_fn._input_meta) is tuple
    tx = torch.tensor([0.5, 1.0], requires_grad=True)
    z.sum().backward()
    tx.sinh().sum().backward()
    _close(x.grad, tx.grad)


def _logging_subclass(lib):
    """A Tensor subclass whose __torch_dispatch__ logs each call it sees and runs it on the plain tensors its
    instances keep as ``_plain`` (defining it switches the process-wide subclass dispatch on)."""
    seen = []

    class Logged(lib.Tensor):
        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            seen.append(func)

            def plain(x):
                return x._plain if isinstance(x, cls) else x  # (ember's as_subclass would dispatch again)

            args = [[plain(b) for b in a] if isinstance(a, (list, tuple)) else plain(a) for a in args]
            return func(*args, **{k: plain(v) for k, v in (kwargs or {}).items()})

    return Logged, seen


def test_dispatch_subclass_sends_only_its_own_calls_off_the_native_path():
    # Once a Tensor subclass defines __torch_dispatch__, only the calls that involve one of its instances
    # (an argument, an item of a list argument, a keyword value) reach it and the Python dispatcher; calls on
    # plain tensors (and nn.Parameter) stay native, recording included. Results and calls seen as torch's.
    from ember._src import dispatch

    def program(lib, logged_cls, seen, frames=None):
        a = lib.arange(6.0).reshape(2, 3)
        w = lib.nn.Parameter(lib.ones(2, 3))
        base = lib.arange(6.0).reshape(2, 3)
        sub = base.as_subclass(logged_cls)
        sub._plain = base
        plain = []

        def run_plain():
            plain.extend([a + a, lib.mul(a, 2.0), (a * w).sum(), a.relu(), a.view(3, 2), a.t(), a > 2])

        n = len(seen)
        python = frames(run_plain) if frames else run_plain()
        involved = [a + sub, lib.cat([a, sub]), lib.where(a > 2, a, other=sub)]
        return plain, len(seen) - n, python, involved

    elogged, eseen = _logging_subclass(ember)
    tlogged, tseen = _logging_subclass(torch)
    assert dispatch._SUBCLASS_DISPATCH[0]
    codes = {dispatch.Op._dispatch.__code__}
    eplain, eseen_n, python, einvolved = program(ember, elogged, eseen, lambda f: _python_frames(f, codes))
    tplain, tseen_n, _, tinvolved = program(torch, tlogged, tseen)
    assert python == []  # the plain calls ran natively
    assert eseen_n == tseen_n == 3 and len(eseen) == len(tseen) == 3
    for e, t in zip(eplain + einvolved, tplain + tinvolved):
        _close(e, t)
    assert type(eplain[2].grad_fn).__name__ == type(tplain[2].grad_fn).__name__ == "SumBackward0"
