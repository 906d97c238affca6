"""What ``torch.cuda``, ``torch.backends`` and ``torch.__config__`` answer in PyTorch's CPU build,
and ember's answers beside them (session 17's surface additions). CUDA-only answers skip where a
GPU is present."""

from __future__ import annotations

import warnings

import pytest

import ember

torch = pytest.importorskip("torch")

no_gpu = pytest.mark.skipif(ember.cuda.is_available() or torch.cuda.is_available(), reason="CPU-build answers")


def _outcome(fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "ok", fn()
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return "raise", type(e)


@no_gpu
@pytest.mark.parametrize("name,args", [
    ("get_rng_state", ()), ("get_rng_state_all", ()), ("set_rng_state_all", ([],)), ("ipc_collect", ()),
    ("memory_reserved", ()), ("max_memory_reserved", ()), ("memory_cached", ()), ("max_memory_cached", ()),
    ("memory_stats", ()), ("memory_stats_as_nested_dict", ()), ("get_arch_list", ()), ("get_gencode_flags", ()),
    ("is_tf32_supported", ()), ("can_device_access_peer", (0, 1)), ("get_sync_debug_mode", ()),
    ("set_sync_debug_mode", (0,)), ("set_per_process_memory_fraction", (0.5,)),
    ("get_per_process_memory_fraction", ()), ("current_blas_handle", ()), ("initial_seed", ()), ("seed", ()),
    ("seed_all", ()), ("mem_get_info", ()),
])
def test_cuda_cpu_build_answers(name, args):
    got = _outcome(lambda: getattr(ember.cuda, name)(*args))
    want = _outcome(lambda: getattr(torch.cuda, name)(*args))
    assert got[0] == want[0], (got, want)
    if got[0] == "raise":
        assert got[1] is want[1]
    else:
        assert got[1] == want[1]


@no_gpu
def test_cuda_set_rng_state_is_accepted_and_constants():
    ember.cuda.set_rng_state(ember.ByteTensor(5))
    assert (ember.cuda.has_half, ember.cuda.has_magma) == (torch.cuda.has_half, torch.cuda.has_magma)
    assert tuple(ember.cuda.default_generators) == tuple(torch.cuda.default_generators)
    with ember.cuda.device_of(ember.ones(1)):
        pass


@no_gpu
def test_cuda_legacy_tensor_types():
    for name in ("FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor", "CharTensor",
                 "ShortTensor", "IntTensor", "LongTensor", "BoolTensor"):
        e, t = getattr(ember.cuda, name), getattr(torch.cuda, name)
        assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        assert e.is_cuda is t.is_cuda is True
        assert not isinstance(ember.ones(2, dtype=e.dtype), e)
        with pytest.raises(TypeError) as t_err:
            t(2)
        with pytest.raises(TypeError) as e_err:
            e(2)
        assert str(e_err.value) == str(t_err.value)


@no_gpu
def test_cuda_submodules():
    import ember.cuda.memory
    import ember.cuda.nvtx
    import ember.cuda.random

    assert ember.cuda.memory.memory_allocated() == torch.cuda.memory.memory_allocated() == 0
    assert set(torch.cuda.random.__all__) <= set(dir(ember.cuda.random))
    with pytest.raises(RuntimeError, match="NVTX functions not installed"):
        torch.cuda.nvtx.range_push("a")
    with pytest.raises(RuntimeError, match="NVTX functions not installed"):
        ember.cuda.nvtx.range_push("a")
    with pytest.raises(RuntimeError, match="NVTX functions not installed"):
        with ember.cuda.nvtx.range("a"):
            pass


@pytest.mark.parametrize("name", ["cudnn", "mkldnn", "nnpack", "miopen", "opt_einsum"])
def test_backend_flags_restore_and_set_flags_returns_previous(name):
    import importlib

    e = importlib.import_module(f"ember.backends.{name}")
    t = importlib.import_module(f"torch.backends.{name}")
    field = {"cudnn": "deterministic", "mkldnn": "deterministic", "nnpack": "enabled", "miopen": "immediate",
             "opt_einsum": "strategy"}[name]
    value = "greedy" if name == "opt_einsum" else True
    for mod in (e, t):
        if name in ("nnpack", "miopen"):  # PyTorch keeps these in C; read through set_flags' return
            continue
        before = getattr(mod, field)
        if name == "opt_einsum" and not mod.is_available():
            continue
        with mod.flags(**{field: value}):
            assert getattr(mod, field) == value
        assert getattr(mod, field) == before
    args = (True,) if name == "nnpack" else ()  # torch.backends.nnpack.set_flags(_enabled) has no default
    e_prev, t_prev = e.set_flags(*args), t.set_flags(*args)
    assert len(e_prev) == len(t_prev)
    e.set_flags(*e_prev)
    t.set_flags(*t_prev)


def test_backend_modules_answers():
    import torch.backends.cpu
    import torch.backends.mha
    import torch.backends.opt_einsum
    import torch.backends.quantized

    import ember.backends.cpu
    import ember.backends.mha
    import ember.backends.opt_einsum
    import ember.backends.quantized

    assert ember.backends.cpu.get_cpu_capability() == torch.backends.cpu.get_cpu_capability()
    assert ember.backends.opt_einsum.is_available() == torch.backends.opt_einsum.is_available()
    assert ember.backends.opt_einsum.enabled == torch.backends.opt_einsum.enabled
    assert ember.backends.opt_einsum.strategy == torch.backends.opt_einsum.strategy
    assert ember.backends.quantized.engine == torch.backends.quantized.engine
    assert ember.backends.mha.get_fastpath_enabled() == torch.backends.mha.get_fastpath_enabled()
    ember.backends.mha.set_fastpath_enabled(False)
    try:
        assert ember.backends.mha.get_fastpath_enabled() is False
    finally:
        ember.backends.mha.set_fastpath_enabled(True)
    assert (ember.backends.mkldnn.VERBOSE_OFF, ember.backends.mkldnn.VERBOSE_ON,
            ember.backends.mkldnn.VERBOSE_ON_CREATION) == (torch.backends.mkldnn.VERBOSE_OFF,
                                                           torch.backends.mkldnn.VERBOSE_ON,
                                                           torch.backends.mkldnn.VERBOSE_ON_CREATION)
    with ember.backends.mkl.verbose(ember.backends.mkl.VERBOSE_ON), ember.backends.mkldnn.verbose(2):
        pass
    assert repr(ember.backends.cuda.preferred_linalg_library()) == repr(torch.backends.cuda.preferred_linalg_library())
    assert repr(ember.backends.cuda.preferred_blas_library()) == repr(torch.backends.cuda.preferred_blas_library())
    with pytest.raises(RuntimeError):
        ember.backends.cuda.preferred_linalg_library("nope")
    assert ember.backends.cuda.cufft_plan_cache.size == 0


def test_sdp_kernel_is_deprecated_and_restores():
    with pytest.warns(FutureWarning, match="sdp_kernel"):
        with ember.backends.cuda.sdp_kernel(enable_flash=False, enable_math=True):
            assert not ember.backends.cuda.flash_sdp_enabled()
            assert ember.backends.cuda.math_sdp_enabled()
    assert ember.backends.cuda.flash_sdp_enabled()


def test_config_and_model_zoo_and_dlpack():
    assert "ATen/Parallel" in torch.__config__.parallel_info()
    info = ember.__config__.parallel_info()
    assert f"at::get_num_threads() : {ember.get_num_threads()}" in info
    assert ember.__config__.show().startswith("ember built with:")
    from ember.utils import dlpack, model_zoo

    assert model_zoo.load_url is ember.hub.load_state_dict_from_url
    x = ember.arange(4.0)
    y = dlpack.from_dlpack(dlpack.to_dlpack(x))
    assert y.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert torch.utils.dlpack.from_dlpack(x).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_cuda_amp_custom_fwd_bwd_deprecated_aliases():
    def grad_through(lib):
        with pytest.warns(FutureWarning, match=r"torch.cuda.amp.custom_(fwd|bwd)\(args...\)` is deprecated"):
            class Double(lib.autograd.Function):
                @staticmethod
                @lib.cuda.amp.custom_fwd
                def forward(ctx, x):
                    return x * 2

                @staticmethod
                @lib.cuda.amp.custom_bwd
                def backward(ctx, g):
                    return g * 3

        x = lib.ones(2, requires_grad=True)
        Double.apply(x).sum().backward()
        return x.grad.tolist()

    assert grad_through(ember) == grad_through(torch) == [3.0, 3.0]


def test_tensor_storage_type_and_accelerator_moves():
    for name in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
                 "complex64", "complex128"):
        got = ember.ones(2, dtype=getattr(ember, name)).storage_type()
        want = torch.ones(2, dtype=getattr(torch, name)).storage_type()
        assert got.__name__ == want.__name__ and got is getattr(ember, want.__name__)
    for method in ("xpu", "mtia"):
        with pytest.raises(AssertionError) as t_err:
            getattr(torch.ones(1), method)()
        with pytest.raises(AssertionError) as e_err:
            getattr(ember.ones(1), method)()
        assert str(e_err.value).split(".")[0] == str(t_err.value).split(".")[0]
    for lib in (ember, torch):
        with pytest.raises(RuntimeError, match="PyTorch is not linked with support for ipu devices"):
            lib.ones(1).ipu()
    for module in ("os", "no_such_module_zz"):
        assert ember.hub._check_module_exists(module) == torch.hub._check_module_exists(module)
