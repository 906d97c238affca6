"""nn.Module, Parameter and the containers, against PyTorch's behaviour."""

import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest
import torch

import ember
import ember.nn as nn


def _tnn():
    return torch.nn


def build(lib):
    """The same small model in either library (ember.nn or torch.nn)."""
    m = lib.nn

    class Block(m.Module):
        def __init__(self):
            super().__init__()
            self.fc = m.Linear(3, 4)
            self.register_buffer("running", lib.zeros(4))
            self.register_buffer("scratch", lib.ones(2), persistent=False)
            self.scale = m.Parameter(lib.ones(1))

        def forward(self, x):
            return self.fc(x) * self.scale + self.running

    class Net(m.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.seq = m.Sequential(m.Linear(4, 5), m.Linear(5, 2, bias=False))
            self.heads = m.ModuleList([m.Linear(2, 2), m.Linear(2, 1)])
            self.table = m.ModuleDict({"b": m.Linear(1, 1), "a": m.Linear(1, 2)})
            self.plist = m.ParameterList([m.Parameter(lib.zeros(2)), lib.ones(3)])
            self.pdict = m.ParameterDict({"w": m.Parameter(lib.zeros(1))})

        def forward(self, x):
            x = self.seq(self.block(x))
            for h in self.heads:
                x = h(x)
            return self.table["a"](self.table["b"](x))

    return Net()


def copy_weights(src_torch, dst_ember):
    with ember.no_grad():
        for (tn, tp), (en, ep) in zip(src_torch.named_parameters(), dst_ember.named_parameters()):
            assert tn == en
            ep.copy_(ember.from_numpy(tp.detach().numpy().copy()))


def test_traversal_names_and_order_match_pytorch():
    t, e = build(torch), build(ember)
    assert [n for n, _ in e.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert [n for n, _ in e.named_buffers()] == [n for n, _ in t.named_buffers()]
    assert [n for n, _ in e.named_modules()] == [n for n, _ in t.named_modules()]
    assert [n for n, _ in e.named_children()] == [n for n, _ in t.named_children()]
    assert [n for n, _ in e.named_parameters(recurse=False)] == []
    assert [n for n, _ in e.block.named_parameters(prefix="p")] == [n for n, _ in t.block.named_parameters(prefix="p")]
    assert len(list(e.parameters())) == len(list(t.parameters()))
    assert len(list(e.modules())) == len(list(t.modules()))


def test_state_dict_keys_shapes_and_round_trip():
    t, e = build(torch), build(ember)
    tsd, esd = t.state_dict(), e.state_dict()
    assert list(esd) == list(tsd)
    assert [tuple(v.shape) for v in esd.values()] == [tuple(v.shape) for v in tsd.values()]
    assert "block.scratch" not in esd
    for v in esd.values():
        assert not v.requires_grad
    e2 = build(ember)
    result = e2.load_state_dict({k: ember.from_numpy(v.numpy().copy()) for k, v in tsd.items()})
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == repr(t.load_state_dict(tsd))
    for k, v in e2.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), tsd[k].numpy())


def test_load_state_dict_errors_match_pytorch():
    t, e = build(torch), build(ember)
    tsd = t.state_dict()
    esd = {k: ember.from_numpy(v.numpy().copy()) for k, v in tsd.items()}
    for mutate in ("missing", "unexpected", "shape"):
        td, ed = dict(tsd), dict(esd)
        if mutate == "missing":
            del td["seq.0.bias"], ed["seq.0.bias"]
        elif mutate == "unexpected":
            td["extra.w"], ed["extra.w"] = torch.zeros(1), ember.zeros(1)
        else:
            td["seq.0.bias"], ed["seq.0.bias"] = torch.zeros(7), ember.zeros(7)
        with pytest.raises(RuntimeError) as tinfo:
            t.load_state_dict(td)
        with pytest.raises(RuntimeError) as einfo:
            e.load_state_dict(ed)
        assert str(einfo.value).replace("ember.", "torch.") == str(tinfo.value)
        if mutate != "shape":
            tr = t.load_state_dict(td, strict=False)
            er = e.load_state_dict(ed, strict=False)
            assert (er.missing_keys, er.unexpected_keys) == (tr.missing_keys, tr.unexpected_keys)


def test_load_state_dict_assign_replaces_parameters():
    lin = nn.Linear(2, 3)
    new_w = ember.ones(3, 2)
    lin.load_state_dict({"weight": new_w, "bias": ember.zeros(3)}, assign=True)
    assert isinstance(lin.weight, nn.Parameter) and lin.weight.requires_grad
    assert lin.weight.data_ptr() == new_w.data_ptr()


def test_forward_and_backward_match_pytorch():
    t, e = build(torch), build(ember)
    copy_weights(t, e)
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    tout = t(torch.from_numpy(x))
    eout = e(ember.from_numpy(x))
    np.testing.assert_allclose(eout.detach().numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    tout.sum().backward()
    eout.sum().backward()
    for (n, tp), (_, ep) in zip(t.named_parameters(), e.named_parameters()):
        if tp.grad is None:
            assert ep.grad is None, n
        else:
            np.testing.assert_allclose(ep.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=n)


def test_repr_matches_pytorch():
    t, e = build(torch), build(ember)
    assert repr(e).replace("ember.", "torch.") == repr(t)
    assert repr(nn.ModuleList([nn.Linear(2, 2)] * 3 + [nn.Linear(2, 1)])) == \
        repr(torch.nn.ModuleList([torch.nn.Linear(2, 2)] * 3 + [torch.nn.Linear(2, 1)]))


def test_registration_errors_match_pytorch():
    for lib in (torch, ember):
        m = lib.nn.Module()
        with pytest.raises(KeyError):
            m.register_buffer("a.b", lib.zeros(1))
        with pytest.raises(KeyError):
            m.register_parameter("", None)
        with pytest.raises(TypeError):
            m.register_parameter("w", lib.zeros(1))
        with pytest.raises(TypeError):
            m.register_buffer("b", 3)
        m.w = lib.nn.Parameter(lib.zeros(1))
        with pytest.raises(TypeError):
            m.w = lib.zeros(1)
        m.train_flag = 1
        with pytest.raises(KeyError):
            m.register_buffer("train_flag", lib.zeros(1))
        with pytest.raises(ValueError):
            m.train("yes")
        with pytest.raises(AttributeError):
            _ = m.missing_attribute
        with pytest.raises(NotImplementedError):
            m(lib.zeros(1))


def test_assignment_moves_between_registries():
    m = nn.Module()
    m.x = nn.Parameter(ember.zeros(1))
    assert "x" in m._parameters
    del m.x
    assert "x" not in m._parameters
    m.register_buffer("b", ember.zeros(2))
    m.b = ember.ones(2)
    assert m._buffers["b"].sum().item() == 2
    m.b = None
    assert m._buffers["b"] is None
    m.sub = nn.Linear(1, 1)
    assert "sub" in m._modules
    m.buf = nn.Buffer(ember.ones(1), persistent=False)
    assert "buf" in m._buffers and "buf" in m._non_persistent_buffers_set
    assert "buf" not in m.state_dict()


def test_train_eval_apply_zero_grad_requires_grad():
    e = build(ember)
    e.eval()
    assert not any(mod.training for mod in e.modules())
    e.train()
    assert all(mod.training for mod in e.modules())
    seen = []
    e.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen[-1] == "Net" and seen[0] == "Linear"
    e(ember.randn(2, 3)).sum().backward()
    e.zero_grad(set_to_none=False)
    assert all(p.grad is None or float(p.grad.abs().sum()) == 0 for p in e.parameters())
    e.zero_grad()
    assert all(p.grad is None for p in e.parameters())
    e.requires_grad_(False)
    assert not any(p.requires_grad for p in e.parameters())


def test_dtype_conversion_keeps_parameter_identity():
    e = build(ember)
    w = e.seq[0].weight
    e.double()
    assert e.seq[0].weight is w and w.dtype == ember.float64 and isinstance(w, nn.Parameter)
    assert e.block.running.dtype == ember.float64
    e.to(ember.float32)
    assert w.dtype == ember.float32
    e.half().float()
    with pytest.raises(TypeError):
        e.to(ember.int64)
    assert e.to("cpu") is e


def test_forward_hooks_order_kwargs_and_removal():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: calls.append("pre") or (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append("post") or out + 1)
    lin.register_forward_hook(lambda m, args, kwargs, out: calls.append(("kw", sorted(kwargs))), with_kwargs=True)
    lin.register_forward_hook(lambda m, a, o: calls.append("first"), prepend=True)
    out = lin(ember.ones(1, 2))
    np.testing.assert_allclose(out.detach().numpy(), (lin.bias + 1).detach().numpy()[None])
    assert calls == ["pre", "first", "post", ("kw", [])]
    h1.remove()
    h2.remove()
    calls.clear()
    lin(ember.ones(1, 2))
    assert calls == ["first", ("kw", [])]


def test_full_backward_hooks_match_pytorch():
    def run(lib):
        lin = lib.nn.Linear(3, 2)
        with lib.no_grad():
            lin.weight.copy_(lib.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]]))
        record = []

        def hook(mod, grad_input, grad_output):
            record.append(([None if g is None else g.detach().numpy().copy() for g in grad_input],
                           [g.detach().numpy().copy() for g in grad_output]))
            return (grad_input[0] * 2,)

        pre = []
        lin.register_full_backward_pre_hook(lambda mod, go: pre.append(go[0].shape) or None)
        lin.register_full_backward_hook(hook)
        x = lib.ones(4, 3, requires_grad=True)
        out = lin(x)
        pre.append(type(out.grad_fn).__name__)  # the hooks' identity node (programs print it)
        (out * lib.arange(2.0)).sum().backward()
        return record, x.grad.numpy(), pre

    (trec, tgrad, tpre), (erec, egrad, epre) = run(torch), run(ember)
    assert epre[0] == tpre[0] == "BackwardHookFunctionBackward"
    epre, tpre = epre[1:], tpre[1:]
    assert len(erec) == len(trec) == 1
    np.testing.assert_allclose(erec[0][0][0], trec[0][0][0])
    np.testing.assert_allclose(erec[0][1][0], trec[0][1][0])
    np.testing.assert_allclose(egrad, tgrad)
    assert [tuple(s) for s in epre] == [tuple(s) for s in tpre]


def test_state_dict_and_load_hooks():
    lin = nn.Linear(2, 2)
    seen = []
    lin.register_state_dict_pre_hook(lambda m, prefix, keep_vars: seen.append("pre"))
    lin.register_state_dict_post_hook(lambda m, sd, prefix, meta: seen.append(sorted(sd)))
    lin.register_load_state_dict_post_hook(lambda m, keys: seen.append(("loaded", list(keys.missing_keys))))
    sd = lin.state_dict()
    lin.load_state_dict(sd)
    assert seen == ["pre", ["bias", "weight"], ("loaded", [])]


def test_sequential_container_api():
    s = nn.Sequential(nn.Linear(1, 2), nn.ReLU() if hasattr(nn, "ReLU") else nn.Identity(), nn.Linear(2, 3))
    assert len(s) == 3 and isinstance(s[0], nn.Linear) and isinstance(s[-1], nn.Linear)
    assert isinstance(s[1:], nn.Sequential) and len(s[1:]) == 2
    s.append(nn.Identity())
    assert len(s) == 4
    del s[1]
    assert list(s._modules) == ["0", "1", "2"]
    s.insert(0, nn.Identity())
    assert isinstance(s[0], nn.Identity)
    with pytest.raises(IndexError):
        s[10]
    od = nn.Sequential(OrderedDict([("a", nn.Linear(1, 1)), ("b", nn.Identity())]))
    assert [n for n, _ in od.named_children()] == ["a", "b"]
    assert od(ember.ones(2, 1)).shape == (2, 1)


def test_module_list_dict_parameter_containers():
    ml = nn.ModuleList([nn.Linear(1, 1)])
    ml.append(nn.Linear(1, 2)).extend([nn.Identity()])
    assert len(ml) == 3 and isinstance(ml[-1], nn.Identity)
    with pytest.raises(TypeError):
        ml.extend(nn.Linear(1, 1))
    md = nn.ModuleDict([("x", nn.Linear(1, 1))])
    md["y"] = nn.Identity()
    assert list(md.keys()) == ["x", "y"] and "x" in md
    assert isinstance(md.pop("x"), nn.Linear) and len(md) == 1
    pl = nn.ParameterList([ember.zeros(2)])
    assert isinstance(pl[0], nn.Parameter)
    pd = nn.ParameterDict({"b": ember.ones(1), "a": ember.zeros(1)})
    assert list(pd.keys()) == ["a", "b"] and isinstance(pd["a"], nn.Parameter)
    with pytest.raises(RuntimeError):
        pl(1)


def test_parameter_semantics():
    p = nn.Parameter(ember.ones(2))
    assert p.requires_grad and p.is_leaf and isinstance(p, ember.Tensor)
    assert type(p * 2) is ember.Tensor and type(p.detach()) is ember.Tensor
    assert repr(p).startswith("Parameter containing:\ntensor(")
    q = copy.deepcopy(p)
    assert isinstance(q, nn.Parameter) and q.data_ptr() != p.data_ptr()
    r = pickle.loads(pickle.dumps(p))
    assert isinstance(r, nn.Parameter) and r.requires_grad
    assert not nn.Parameter(ember.ones(1), requires_grad=False).requires_grad
    with pytest.raises(TypeError):
        nn.Parameter([1.0])


def test_deepcopy_module_is_independent():
    e = build(ember)
    c = copy.deepcopy(e)
    with ember.no_grad():
        c.seq[0].weight.fill_(3.0)
    assert float(e.seq[0].weight.sum()) != float(c.seq[0].weight.sum())
    assert [n for n, _ in c.named_parameters()] == [n for n, _ in e.named_parameters()]


def test_shared_parameters_are_listed_once():
    for lib in (torch, ember):
        a = lib.nn.Linear(2, 2)
        s = lib.nn.Sequential(a, a)
        assert len(list(s.parameters())) == 2
        assert len(list(s.named_parameters(remove_duplicate=False))) == 4


def test_get_submodule_parameter_buffer():
    e = build(ember)
    assert e.get_submodule("seq.0") is e.seq[0]
    assert e.get_parameter("block.fc.weight") is e.block.fc.weight
    assert e.get_buffer("block.running") is e.block.running
    with pytest.raises(AttributeError):
        e.get_submodule("nope")
    with pytest.raises(AttributeError):
        e.get_parameter("block.running")


def test_lazy_linear_materializes_on_first_call():
    lazy = nn.LazyLinear(3)
    assert lazy.has_uninitialized_params()
    out = lazy(ember.ones(2, 5))
    assert out.shape == (2, 3) and type(lazy) is nn.Linear and lazy.in_features == 5
    assert lazy.weight.shape == (3, 5)


@pytest.mark.parametrize("assign", [
    lambda lib, m: m.register_buffer("c", [1]),
    lambda lib, m: m.register_parameter("p", lib.ones(1)),
    lambda lib, m: setattr(m, "weight", lib.ones(2, 2)),
    lambda lib, m: m.add_module("x", 3),
    lambda lib, m: (setattr(m, "child", lib.nn.Linear(1, 1)), setattr(m, "child", lib.ones(1, dtype=lib.int64))),
])
def test_wrong_assignment_messages_name_the_type_as_torch(assign):
    # torch.typename: 'torch.FloatTensor', not the class name 'Tensor'
    messages = []
    for lib in (torch, ember):
        with pytest.raises(TypeError) as info:
            assign(lib, lib.nn.Linear(2, 2))
        messages.append(str(info.value))
    assert messages[1] == messages[0]


def _global_hook_log(lib):
    nn, hooks = lib.nn, lib.nn.modules.module
    log = []
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    handles = [
        hooks.register_module_forward_pre_hook(lambda mod, a: log.append(("pre", type(mod).__name__))),
        hooks.register_module_forward_hook(lambda mod, a, o: log.append(("fwd", type(mod).__name__))),
        hooks.register_module_forward_hook(lambda mod, a, k, o: log.append(("kw", type(mod).__name__, sorted(k))),
                                           with_kwargs=True),
        hooks.register_module_full_backward_hook(lambda mod, gi, go: log.append(("bwd", type(mod).__name__, len(gi)))),
        hooks.register_module_full_backward_pre_hook(lambda mod, go: log.append(("bwdpre", type(mod).__name__))),
    ]
    model[0].register_forward_hook(lambda mod, a, o: log.append(("local", type(mod).__name__)))
    try:
        model(lib.ones(1, 2, requires_grad=True)).sum().backward()
    finally:
        for h in handles:
            h.remove()
    model(lib.ones(1, 2))  # removed: only the module's own hook runs
    with hooks.register_module_forward_hook(lambda mod, a, o: o * 0 if isinstance(mod, nn.ReLU) else None):
        log.append(model(lib.ones(1, 2)).abs().sum().item())

    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    with hooks.register_module_forward_hook(lambda mod, a, o: log.append(("always", o)), always_call=True):
        with pytest.raises(ValueError):
            Boom()(1)
    registration = [
        hooks.register_module_buffer_registration_hook(lambda mod, n, b: log.append(("buf", n))),
        hooks.register_module_parameter_registration_hook(lambda mod, n, p: log.append(("param", n))),
        hooks.register_module_module_registration_hook(lambda mod, n, s: log.append(("mod", n))),
        hooks.register_module_buffer_registration_hook(lambda mod, n, b: b * 3 if n == "mine" else None),
    ]
    try:
        norm = nn.BatchNorm1d(2)
        seq = nn.Sequential(nn.Linear(1, 1))
        seq.extra = nn.ReLU()
        seq.register_buffer("mine", lib.ones(2))  # a hook's return value replaces the buffer
        log.append(seq.mine.tolist())
    finally:
        for h in registration:
            h.remove()
    log.append(sorted(norm.state_dict()))
    return log


def test_global_module_hooks_match_torch():
    # torch.nn.modules.module.register_module_*: hooks every module runs (profilers, FLOP counters).
    assert _global_hook_log(ember) == _global_hook_log(torch)


@pytest.mark.parametrize("target,strict,replace", [
    ("1.0", False, True), ("", False, True), ("2", False, True), ("3", True, True), ("0.weight", False, True),
    ("0.weight.x", False, True), ("9.x", False, True), ("1.0", False, False), ("1.0", True, True),
])
def test_set_submodule_matches_torch(target, strict, replace):
    def run(lib):
        nn = lib.nn
        model = nn.Sequential(nn.Linear(1, 1), nn.Sequential(nn.ReLU()))
        try:
            model.set_submodule(target, nn.Tanh() if replace else 5, strict=strict)
        except (AttributeError, ValueError) as e:
            return type(e).__name__, str(e)
        return repr(model).replace("ember", "torch")

    assert run(ember) == run(torch)


def test_global_forward_hook_always_call_sees_the_failing_forward():
    def run(lib):
        from importlib import import_module

        module_mod = import_module(f"{lib.__name__}.nn.modules.module")
        seen = []
        handle = module_mod.register_module_forward_hook(lambda m, a, out: seen.append(out), always_call=True)
        try:
            with pytest.raises(RuntimeError):
                lib.nn.Linear(2, 2)(lib.ones(1, 3))
        finally:
            handle.remove()
        return seen

    assert run(ember) == run(torch) == [None]



@pytest.mark.parametrize("register", ["add_module", "register_buffer", "register_parameter"])
@pytest.mark.parametrize("name", ["a.b", ""])
def test_bad_names_raise_torchs_key_errors(register, name):
    def run(lib):
        value = lib.nn.ReLU() if register == "add_module" else None
        with pytest.raises(KeyError) as info:
            getattr(lib.nn.Module(), register)(name, value)
        return str(info.value)

    assert run(ember) == run(torch)


def test_moduledict_update_with_non_pairs_says_what_pytorch_says():
    import torch

    texts = []
    for lib in (torch, ember):
        with pytest.raises(TypeError) as info:
            lib.nn.ModuleDict().update([lib.nn.ReLU()])
        texts.append(str(info.value))
    assert texts[1] == texts[0] == "ModuleDict update sequence element #0 should be Iterable; isReLU"
