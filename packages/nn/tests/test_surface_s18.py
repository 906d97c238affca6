"""Session-18 surface names against torch 2.13: ``_C`` executor switches and ``_C._nn._parse_to``,
``_utils`` rebuild helpers, ``cuda._is_in_bad_fork``, ``utils._pytree._is_leaf``."""

from __future__ import annotations

import collections
import warnings

import pytest
import torch

import ember


def _parse_cases(lib):
    return [((), {}), (("cuda",), {}), ((lib.device("cpu"), lib.float64), {}),
            (("cpu",), {"dtype": lib.int32, "non_blocking": True}), ((lib.float16, False, True), {}),
            ((lib.ones(1, dtype=lib.int8),), {"non_blocking": True}), ((lib.ones(1), True), {}), ((3.5,), {}),
            ((1j,), {}), (("cpu", lib.float32, True, True), {}), ((), {"copy": True}),
            ((), {"memory_format": lib.channels_last}), ((None,), {}), ((0,), {}), (("nope",), {}),
            ((), {"device": "cpu", "dtype": lib.float64}), (("cpu", None, True), {}), ((lib.float64, True), {})]


def _outcome(lib, args, kwargs):
    try:
        return ("ok", str(lib._C._nn._parse_to(*args, **kwargs)).replace(lib.__name__ + ".", ""))
    except Exception as e:  # noqa: BLE001 - compared with torch's
        return (type(e).__name__, str(e).split(",")[0])  # ember lists fewer device types


@pytest.mark.parametrize("index", range(len(_parse_cases(torch))))
def test_parse_to_as_torch(index):
    want = _outcome(torch, *_parse_cases(torch)[index])
    got = _outcome(ember, *_parse_cases(ember)[index])
    assert got == want


def test_jit_executor_switches_return_the_previous_value_as_torch():
    for lib in (torch, ember):
        c = lib._C
        seen = [c._jit_set_profiling_mode(False), c._jit_set_profiling_mode(True), c._jit_set_profiling_mode(True),
                c._jit_set_profiling_executor(False), c._jit_set_profiling_executor(True)]
        assert seen == [True, False, True, True, False]
        assert c._log_api_usage_once("ember.test") is None and c._GLIBCXX_USE_CXX11_ABI is True
    with pytest.warns(UserWarning, match="bailout depth is deprecated"):
        old = ember._C._jit_set_bailout_depth(5)
    with pytest.warns(UserWarning):
        assert ember._C._jit_set_bailout_depth(old) == 5


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_rebuild_helpers_share_the_storage(lib):
    x = lib.arange(12.0).reshape(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        storage = x.storage()
    hooks = collections.OrderedDict()
    t = lib._utils._rebuild_tensor_v2(storage, 2, (2, 3), (4, 1), True, hooks)
    assert t.tolist() == [[2.0, 3.0, 4.0], [6.0, 7.0, 8.0]] and t.requires_grad and t.is_leaf
    assert t._backward_hooks is hooks and t.data_ptr() == x.data_ptr() + 8
    p = lib._utils._rebuild_parameter(lib.ones(2), False, hooks)
    assert type(p) is lib.nn.Parameter and not p.requires_grad and p._backward_hooks is hooks
    sizes = [lib._utils._element_size(getattr(lib, d)) for d in
             ("float16", "bfloat16", "complex64", "bool", "int64", "uint8", "complex128", "float64")]
    assert sizes == [2, 2, 8, 1, 8, 1, 16, 8]
    with pytest.raises(RuntimeError, match="^expected torch.dtype, but got <class 'str'>$"):
        lib._utils._element_size("x")
    with pytest.warns(UserWarning, match="is deprecated. Use `torch.compiler.is_compiling` instead"):
        assert lib._utils.is_compiling() is False


def test_cuda_bad_fork_and_pytree_is_leaf_as_torch():
    assert ember.cuda._is_in_bad_fork() is torch.cuda._is_in_bad_fork() is False
    import torch.utils._pytree as tp

    import ember.utils._pytree as ep

    for tree, is_leaf in (([1, 2], None), (3, None), ({"a": 1}, lambda x: isinstance(x, dict)), ((), None)):
        with pytest.warns(FutureWarning, match="_is_leaf is private"):
            want = tp._is_leaf(tree, is_leaf)
        with pytest.warns(FutureWarning, match="_is_leaf is private"):
            assert ep._is_leaf(tree, is_leaf) is want


def test_jit_fuser_switches_as_torch():
    for lib in (torch, ember):
        c = lib._C
        assert c._jit_can_fuse_on_gpu() is False and c._get_privateuse1_backend_name() == "privateuseone"
        before = c._jit_can_fuse_on_cpu()
        assert c._jit_override_can_fuse_on_cpu(not before) is None and c._jit_can_fuse_on_cpu() is (not before)
        c._jit_override_can_fuse_on_cpu(before)
        texpr = c._jit_texpr_fuser_enabled()
        assert c._jit_set_texpr_fuser_enabled(not texpr) is None and c._jit_texpr_fuser_enabled() is (not texpr)
        c._jit_set_texpr_fuser_enabled(texpr)
        assert c._jit_override_can_fuse_on_gpu(False) is None
        with pytest.raises(TypeError, match="incompatible function arguments"):
            c._jit_override_can_fuse_on_cpu("x")
    with pytest.warns(UserWarning, match="is deprecated and a no-op"):
        assert ember._C._jit_set_nvfuser_enabled(False) is None
    with pytest.warns(UserWarning, match="is deprecated and a no-op"):
        assert ember._C._jit_set_nvfuser_guard_mode(True) is None


def test_optimizer_module_helpers_as_torch():
    import torch.optim.optimizer as to

    import ember.optim.optimizer as eo

    assert eo._get_capturable_supported_devices() == to._get_capturable_supported_devices()
    assert eo._get_capturable_supported_devices(False) == to._get_capturable_supported_devices(False)
    assert eo._get_fused_kernels_supported_devices() == to._get_fused_kernels_supported_devices()
    assert eo._get_foreach_kernels_supported_devices() == to._get_foreach_kernels_supported_devices()
    def picks(lib, mod):
        floats, ints = [lib.ones(2), lib.nn.Parameter(lib.ones(1)), None], [lib.ones(2, dtype=lib.int64)]
        return [mod._default_to_fused_or_foreach(p, d, f) for p in (floats, ints) for d in (False, True)
                for f in (False, True)]

    assert picks(ember, eo) == picks(torch, to)
    assert str(eo.ParamsT).replace("ember.Tensor", "torch.Tensor") == str(to.ParamsT)


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_use_grad_for_differentiable_sets_grad_mode_from_defaults(lib):
    import importlib

    mod = importlib.import_module(lib.__name__ + ".optim.optimizer")
    seen = []

    class Opt:
        def __init__(self, differentiable):
            self.defaults = {"differentiable": differentiable}

        @mod._use_grad_for_differentiable
        def step(self, value):
            """docstring kept"""
            seen.append(lib.is_grad_enabled())
            return value

    assert Opt(False).step(3) == 3 and Opt(True).step(4) == 4
    with lib.no_grad():
        Opt(True).step(0)
    assert seen == [False, True, True] and lib.is_grad_enabled()
    assert Opt.step.__doc__ == "docstring kept" and Opt.step.__name__ == "step"
    with pytest.raises(KeyError):
        Opt.step(type("NoDefaults", (), {"defaults": {}})(), 1)


def test_transformer_activation_and_mps_version_check_as_torch():
    import torch.nn.modules.transformer as tt

    import ember.nn.modules.transformer as et

    assert et._get_activation_fn("relu") is ember.nn.functional.relu
    assert et._get_activation_fn("gelu") is ember.nn.functional.gelu
    for mod in (tt, et):
        with pytest.raises(RuntimeError, match="^activation should be relu/gelu, not tanh$"):
            mod._get_activation_fn("tanh")
    for lib in (torch, ember):
        with pytest.raises(RuntimeError, match="^Cannot execute isOnMacOSorNewer\\(\\) without MPS backend.$"):
            lib.backends.mps.is_macos_or_newer(13, 0)


@pytest.mark.parametrize("name, args", [("_record_memory_history", ()), ("_record_memory_history", (None,)),
                                        ("_snapshot", ()), ("_dump_snapshot", ("x.pickle",))])
def test_cuda_memory_history_raises_as_torch_without_cuda(name, args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AttributeError) as want:
        getattr(torch.cuda.memory, name)(*args)
    with pytest.raises(AttributeError) as got:
        getattr(ember.cuda.memory, name)(*args)
    assert str(got.value) == str(want.value).replace("torch", "ember")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("lib", [torch, ember], ids=["torch", "ember"])
def test_rebuild_from_type_v2_restores_subclass_and_state(lib):
    import importlib

    tensor_mod = importlib.import_module(lib.__name__ + "._tensor")
    from_c = importlib.import_module(lib.__name__ + "._C")

    class Tagged(lib.Tensor):
        pass

    class WithSetstate(lib.Tensor):
        def __setstate__(self, state):
            self.seen = state

    assert tensor_mod.Tensor is lib.Tensor and isinstance(lib.Tensor, from_c._TensorMeta)
    t = tensor_mod._rebuild_from_type_v2(lambda: lib.ones(2), Tagged, (), {"tag": 3})
    assert type(t) is Tagged and t.tag == 3 and t.tolist() == [1.0, 1.0]
    t = tensor_mod._rebuild_from_type_v2(lib.zeros, lib.Tensor, (3,), ({"a": 1}, {"b": 2}))
    assert type(t) is lib.Tensor and (t.a, t.b) == (1, 2)
    t = tensor_mod._rebuild_from_type_v2(lib.zeros, WithSetstate, (1,), "raw")
    assert type(t) is WithSetstate and t.seen == "raw"
    with pytest.raises(RuntimeError, match="^Invalid serialized state: \\(1, 2, 3\\)$"):
        tensor_mod._rebuild_from_type_v2(lib.zeros, lib.Tensor, (1,), (1, 2, 3))
