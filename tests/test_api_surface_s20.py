"""Session 20's API-surface additions and signature fixes, each against PyTorch 2.13: the behaviour
behind a parameter that now matches (ci/api_signatures.py checks the signatures themselves) and the
names added to the task's namespaces."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ember  # noqa: E402


def _both(fn):
    return fn(torch), fn(ember)


# -- serialization defaults --------------------------------------------------------------------------


@pytest.mark.parametrize("lib_name", ["torch", "ember"])
def test_load_weights_only_unset_follows_pickle_module(tmp_path, lib_name, monkeypatch):
    lib = torch if lib_name == "torch" else ember
    path = tmp_path / "obj.pt"
    lib.save({"a": lib.ones(2), "b": np.arange(3)}, path)  # a NumPy array needs weights_only=False
    monkeypatch.delenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", raising=False)
    monkeypatch.delenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", raising=False)
    with pytest.raises(pickle.UnpicklingError):
        lib.load(path)  # unset: weights_only
    out = lib.load(path, pickle_module=pickle)  # unset with a pickle_module: not weights_only
    assert out["b"].tolist() == [0, 1, 2]
    with pytest.raises(RuntimeError, match="explicit pickle_module"):
        lib.load(path, pickle_module=pickle, weights_only=True)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with pytest.warns(UserWarning, match="TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"):
        assert lib.load(path)["b"].tolist() == [0, 1, 2]
    with pytest.raises(pickle.UnpicklingError):
        lib.load(path, weights_only=True)  # an explicit value wins over the NO variable
    monkeypatch.setenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(RuntimeError, match="Only one of"):
        lib.load(path)
    monkeypatch.delenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
    with pytest.raises(pickle.UnpicklingError):
        lib.load(path, weights_only=False)  # forced on: an explicit False loses
    with pytest.raises(RuntimeError, match="explicit pickle_module"):
        lib.load(path, pickle_module=pickle, weights_only=False)


# -- grad mode, autograd ---------------------------------------------------------------------------


def test_no_grad_forms():
    for lib in (torch, ember):
        @lib.no_grad
        def bare(x):
            return x * 2

        @lib.no_grad()
        def called(x):
            return x * 2

        x = lib.ones(2, requires_grad=True)
        assert not bare(x).requires_grad and not called(x).requires_grad
        with pytest.raises(TypeError):
            lib.no_grad(1, 2)


def test_backward_grad_variables_and_dict_inputs():
    def run(lib):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0], requires_grad=True)
        y = a * b
        with pytest.warns(FutureWarning, match="grad_variables"):
            lib.autograd.backward(y, grad_variables=lib.tensor([1.0, 10.0]), retain_graph=True)
        first = (a.grad.tolist(), b.grad.tolist())
        a.grad = b.grad = None
        lib.autograd.backward(y.sum(), inputs={"x": a}, retain_graph=True)
        second = (a.grad.tolist(), b.grad)
        with pytest.raises(RuntimeError, match="grad_variables"):
            lib.autograd.backward(y, grad_tensors=lib.ones(2), grad_variables=lib.ones(2))
        return first, second

    t, e = _both(run)
    assert t == e


def test_removable_handle_extra_dict_and_gradient_edge():
    from ember.autograd.graph import RemovableHandle, _HookDict

    hooks, extra, more = _HookDict(), _HookDict(), _HookDict()
    handle = RemovableHandle(hooks, extra_dict=[extra, more])
    hooks[handle.id] = extra[handle.id] = more[handle.id] = "hook"
    handle.remove()
    assert not hooks and not extra and not more
    x = ember.ones(2, requires_grad=True)
    edge = ember.autograd.graph.get_gradient_edge(tensor=x * 2)
    assert edge.node is not None and edge.output_nr == 0


def test_autograd_variable_is_the_removed_factory():
    for lib in (torch, ember):
        with pytest.raises(RuntimeError, match="deprecated"):
            lib.autograd.variable(1)
    from ember.autograd.variable import Variable  # the submodule stays importable

    assert isinstance(ember.ones(1), Variable)


# -- nn ----------------------------------------------------------------------------------------------


def test_modules_remove_duplicate():
    def count(lib, remove):
        lin = lib.nn.Linear(2, 2)
        return len(list(lib.nn.Sequential(lin, lin).modules(remove_duplicate=remove)))

    for remove in (True, False):
        assert count(torch, remove) == count(ember, remove)


def test_to_empty_requires_device():
    for lib in (torch, ember):
        with pytest.raises(TypeError):
            lib.nn.Linear(2, 2).to_empty()


def test_sync_batchnorm_bias_false():
    t, e = _both(lambda lib: lib.nn.SyncBatchNorm(3, bias=False))
    assert t.bias is None and e.bias is None and e.weight.shape == (3,)
    x = np.random.randn(2, 3, 4).astype(np.float32)
    e.weight.data.copy_(ember.tensor([1.0, 2.0, 3.0]))
    t.weight.data.copy_(torch.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(e(ember.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_transformer_default_activation_is_relu():
    layer = ember.nn.TransformerEncoderLayer(8, 2)
    assert layer.activation is ember.nn.functional.relu


@pytest.mark.parametrize("dims", [1, 2])
def test_max_pool_with_indices_ignores_return_indices(dims):
    x = np.random.randn(1, 2, 6, 6)[..., 0] if dims == 1 else np.random.randn(1, 2, 6, 6)
    name = f"max_pool{dims}d_with_indices"
    t = getattr(torch.nn.functional, name)(torch.tensor(x), 2)
    e = getattr(ember.nn.functional, name)(ember.tensor(x), 2)
    assert isinstance(e, tuple) and len(e) == len(t) == 2
    np.testing.assert_array_equal(e[0].numpy(), t[0].numpy())
    np.testing.assert_array_equal(e[1].numpy(), t[1].numpy())


@pytest.mark.parametrize("dims", [2, 3])
def test_convert_conv_weight_memory_format(dims):
    def build(lib):
        lib.manual_seed(0)
        conv, convt = (lib.nn.Conv2d, lib.nn.ConvTranspose2d) if dims == 2 else (lib.nn.Conv3d, lib.nn.ConvTranspose3d)
        return lib.nn.Sequential(conv(3, 4, 3), lib.nn.Sequential(convt(4, 2, 3)), lib.nn.Linear(2, 2))

    fmt = "channels_last" if dims == 2 else "channels_last_3d"
    convert = f"convert_conv{dims}d_weight_memory_format"
    for lib in (torch, ember):
        model = build(lib)
        weight = model[0].weight
        before = weight.detach().clone()
        assert getattr(lib.nn.utils, convert)(model, getattr(lib, fmt)) is model
        assert model[0].weight is weight  # the same Parameter, re-laid out
        assert model[0].weight.is_contiguous(memory_format=getattr(lib, fmt))
        assert model[1][0].weight.is_contiguous(memory_format=getattr(lib, fmt))
        assert not model[0].weight.is_contiguous()
        assert lib.equal(model[0].weight, before)
    other = 3 if dims == 2 else 2  # the other converter leaves these convolutions alone
    model = build(ember)
    getattr(ember.nn.utils, f"convert_conv{other}d_weight_memory_format")(
        model, ember.channels_last if other == 2 else ember.channels_last_3d)
    assert model[0].weight.is_contiguous()


# -- func --------------------------------------------------------------------------------------------


def test_debug_unwrap_under_vmap():
    def shapes(lib):
        seen = []

        def f(t):
            seen.append((tuple(lib.func.debug_unwrap(t).shape),
                         tuple(lib.func.debug_unwrap(t, recurse=False).shape)))
            return t * 2

        lib.func.vmap(lib.func.vmap(f))(lib.ones(3, 4, 2))
        plain = lib.ones(2)
        assert lib.func.debug_unwrap(plain) is plain
        return seen

    t, e = _both(shapes)
    assert t == e


def test_functionalize_keeps_values_and_input_mutations():
    def run(lib, remove):
        x = lib.arange(6.0).reshape(2, 3)

        def f(a):
            b = a.view(-1)
            b.add_(1)
            c = a.clone()
            c.mul_(2)
            return c.sum(0), b * 3

        out = lib.func.functionalize(f, remove=remove)(x)
        return [o.tolist() for o in out], x.tolist()

    for remove in ("mutations", "mutations_and_views"):
        assert run(torch, remove) == run(ember, remove)
    for lib in (torch, ember):
        with pytest.raises(RuntimeError, match="invalid argument for remove=bad"):
            lib.func.functionalize(lambda a: a, remove="bad")


# -- random, testing, overrides -------------------------------------------------------------------------


def test_thread_safe_generator():
    assert ember.random.thread_safe_generator() is None and torch.random.thread_safe_generator() is None
    assert ember.thread_safe_generator is ember.random.thread_safe_generator
    from ember.utils.data._utils import worker

    class _Rng:
        torch_generator = ember.Generator().manual_seed(3)

    previous = worker._worker_info
    try:
        worker._worker_info = worker.WorkerInfo(id=0, num_workers=1, seed=0, dataset=None, rng=_Rng(),
                                                worker_method="thread")
        assert ember.random.thread_safe_generator() is _Rng.torch_generator
        worker._worker_info = worker.WorkerInfo(id=0, num_workers=1, seed=0, dataset=None, rng=_Rng())
        assert ember.random.thread_safe_generator() is None  # a process worker: the default generator
    finally:
        worker._worker_info = previous


def test_fork_rng_meta_forks_nothing():
    for lib in (torch, ember):
        lib.manual_seed(0)
        with lib.random.fork_rng(device_type="meta"):
            lib.rand(3)
        after_meta = lib.rand(1).item()
        lib.manual_seed(0)
        with lib.random.fork_rng():
            lib.rand(3)
        after_fork = lib.rand(1).item()
        lib.manual_seed(0)
        lib.rand(3)
        assert after_meta == lib.rand(1).item()
        lib.manual_seed(0)
        assert after_fork == lib.rand(1).item()


def test_make_tensor_memory_format_and_device():
    for lib in (torch, ember):
        t = lib.testing.make_tensor(2, 3, 4, 5, dtype=lib.float32, device="cpu", memory_format=lib.channels_last)
        assert t.is_contiguous(memory_format=lib.channels_last) and not t.is_contiguous()
        with pytest.raises(ValueError, match="mutually exclusive"):
            lib.testing.make_tensor(2, 3, 4, 5, dtype=lib.float32, device="cpu", noncontiguous=True,
                                    memory_format=lib.channels_last)
        with pytest.raises(TypeError):
            lib.testing.make_tensor(2, dtype=lib.float32)


def test_torch_function_mode_init_and_resolve_name():
    import ember.overrides as ov

    class Mode(ov.TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.calls.append(ov.resolve_name(func))
            return func(*args, **(kwargs or {}))

    x = ember.ones(1)
    with Mode() as mode:
        ember.add(x, 1)
    assert mode.calls == ["ember.add"]
    for f in (ember.add, ember.Tensor.add, ember.nn.functional.relu, ember.linalg.norm, ember.special.erf):
        name = ov.resolve_name(f)
        assert name is not None and eval(name, {"ember": ember}) is f  # noqa: S307 - the documented contract
    assert ov.resolve_name(len) is None
    with pytest.raises(TypeError):
        ov.handle_torch_function(public=ember.add, relevant_args=())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ov.handle_torch_function.__code__.co_varnames[0] == "public_api"


# -- torch.embedding_bag (ATen's form, from ember-nn) ------------------------------------------------------


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("variant", ["plain", "padding", "last_offset", "int32"])
@pytest.mark.parametrize("requires_grad", [True, False])
def test_aten_embedding_bag_matches_cpu_kernel(mode, variant, requires_grad):
    rng = np.random.default_rng(0)
    w = np.round(rng.standard_normal((10, 3)), 1).astype(np.float32)
    w[5, 0] = w[4, 0]  # a tie inside a bag: the first index wins max_indices
    idx, off = np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 4, 4])
    args = {"plain": (off, False, None), "padding": (off, False, 4),
            "last_offset": (np.array([0, 4, 4, 8]), True, None), "int32": (off, False, None)}[variant]
    itype = np.int32 if variant == "int32" else np.int64

    def run(lib):
        weight = lib.tensor(w, requires_grad=requires_grad)
        out = lib.embedding_bag(weight, lib.tensor(idx.astype(itype)), lib.tensor(args[0].astype(itype)), False, mode,
                                False, None, args[1], args[2])
        if requires_grad:
            out[0].sum().backward()
        grad = weight.grad.numpy() if requires_grad else np.zeros(1)
        return [out[0].detach().numpy(), grad] + [t.numpy() for t in out[1:]] + \
            [str(t.dtype).split(".")[-1] for t in out]

    e, t = run(ember), run(torch)
    for a, b in zip(e[:5], t[:5], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
        assert a.shape == b.shape
    assert e[5:] == t[5:]


def test_aten_embedding_bag_errors():
    for lib in (torch, ember):
        w, idx, off = lib.ones(5, 2), lib.tensor([0, 1]), lib.tensor([0])
        with pytest.raises(RuntimeError, match="must be sum, mean, or max"):
            lib.embedding_bag(w, idx, off, False, 3)
        with pytest.raises(TypeError, match="must be int, not bool"):
            lib.embedding_bag(w, idx, off, False, True)
