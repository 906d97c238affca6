"""Top-level names added for PyTorch parity that compute no tensor of their own (build facts,
settings, DLPack export, device modules, version objects, return types) or that draw random
numbers (svd_lowrank, pca_lowrank), against torch where it defines the behaviour."""

import pickle
import warnings

import numpy as np
import pytest
import torch

import ember


def test_build_facts_and_threads():
    assert ember.has_lapack is True and ember.has_spectral is True and ember.has_openmp is True
    assert ember.has_mkl is False and ember.compiled_with_cxx11_abi() is True
    n = ember.get_num_threads()
    ember.init_num_threads()
    assert ember.get_num_threads() == n


def test_get_device_module_matches_torch():
    assert ember.get_device_module("cpu") is ember.cpu and ember.get_device_module(ember.device("cpu")) is ember.cpu
    assert ember.get_device_module("cuda:0") is ember.cuda
    assert ember.get_device_module() is (ember.cuda if ember.accelerator.is_available() else ember.cpu)
    for lib in (ember, torch):
        with pytest.raises(RuntimeError):
            lib.get_device_module("foo")
        with pytest.raises(RuntimeError):
            lib.get_device_module(3.5)


def test_set_default_tensor_type_matches_torch():
    try:
        for lib in (ember, torch):
            with pytest.warns(UserWarning, match="deprecated"):
                lib.set_default_tensor_type(lib.DoubleTensor)
            assert lib.get_default_dtype() is lib.float64
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                lib.set_default_tensor_type("torch.FloatTensor")
                assert lib.get_default_dtype() is lib.float32
                with pytest.raises(TypeError):
                    lib.set_default_tensor_type(lib.LongTensor)
                with pytest.raises(TypeError):
                    lib.set_default_tensor_type(3)
    finally:
        ember.set_default_dtype(ember.float32)
        torch.set_default_dtype(torch.float32)


def test_deterministic_debug_mode_matches_torch():
    try:
        for mode, want in (("warn", 1), ("error", 2), (0, 0), (2, 2), ("default", 0)):
            for lib in (ember, torch):
                lib.set_deterministic_debug_mode(mode)
                assert lib.get_deterministic_debug_mode() == want
                assert lib.are_deterministic_algorithms_enabled() == (want != 0)
                assert lib.is_deterministic_algorithms_warn_only_enabled() == (want == 1)
        for lib in (ember, torch):
            with pytest.raises(RuntimeError, match="debug_mode"):
                lib.set_deterministic_debug_mode("x")
            with pytest.raises(RuntimeError, match="debug_mode"):
                lib.set_deterministic_debug_mode(5)
    finally:
        ember.set_deterministic_debug_mode(0)
        torch.set_deterministic_debug_mode(0)


def test_autocast_gpu_dtype_aliases():
    with pytest.warns(DeprecationWarning):
        assert ember.get_autocast_gpu_dtype() is ember.get_autocast_dtype("cuda") is ember.float16
    try:
        with pytest.warns(DeprecationWarning):
            ember.set_autocast_gpu_dtype(ember.bfloat16)
        assert ember.get_autocast_dtype("cuda") is ember.bfloat16
    finally:
        ember.set_autocast_dtype("cuda", ember.float16)


def test_to_dlpack_round_trips_through_torch():
    x = ember.arange(6.0).reshape(2, 3).t()
    y = torch.from_dlpack(ember.to_dlpack(x))
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    assert y.stride() == x.stride()
    g = ember.ones(3, requires_grad=True)  # exported as its data, as torch.to_dlpack does
    assert torch.from_dlpack(ember.to_dlpack(g)).sum().item() == 3
    assert ember.from_dlpack(torch.to_dlpack(torch.arange(4))).tolist() == [0, 1, 2, 3]
    with pytest.raises(TypeError):
        ember.to_dlpack([1, 2])
    assert ember.is_distributed(x) is torch.is_distributed(torch.ones(1)) is False


def test_grad_scaler_vmap_and_version():
    assert ember.GradScaler is ember.amp.GradScaler
    from ember.func import vmap

    assert ember.vmap is vmap
    np.testing.assert_allclose(ember.vmap(lambda v: v * 2)(ember.ones(3, 2)).numpy(), 2.0)
    assert ember.version.cuda is None and ember.version.__version__ == ember.__version__
    assert ember.__version__ >= "0.0.1" and ember.__version__ < (99, 0) and ember.__version__ == "2.13.0+ember0.1.0"
    assert ember.version.ember_version == "0.1.0"
    assert isinstance(ember.__version__, str) and isinstance(ember.__version__, ember.torch_version.TorchVersion)
    tv = ember.torch_version.TorchVersion("2.1.0rc1")
    assert tv < "2.1.0" and tv > "2.0.9" and not tv >= (2, 1)


def test_version_compares_as_the_torch_release_it_follows():
    # Programs gate code paths on torch.__version__: ember answers as PyTorch 2.13 with a local label.
    packaging_version = pytest.importorskip("packaging.version")
    for lib in (ember, torch):
        v = lib.__version__
        assert v >= "2.0" and v >= (2, 13) and v > "2.13.0" and v != "2.13.0" and v < "2.14" and v >= "2.13.0a0"
        assert packaging_version.parse(v).release == (2, 13, 0) and v.split("+")[0] == "2.13.0"
        assert lib.version.__version__ is v or lib.version.__version__ == v
    tv = ember.torch_version.TorchVersion
    assert tv("2.1.0+cpu") > "2.1.0" and tv("2.1.0+a") < "2.1.0+b"


@pytest.mark.parametrize("call", [
    lambda L: L.arange(6.0).view(2, 3).max(1),
    lambda L: L.tensor([3.0, 1.0, 2.0]).sort(),
    lambda L: L.linalg.slogdet(L.eye(2)),
    lambda L: L.tensor([[1.0, 2.0], [3.0, 4.0]]).topk(1),
])
def test_return_types_print_as_torch_structseqs(call):
    # One field per line; the module is ember.return_types, as dtypes print as ember.float32.
    assert repr(call(ember)) == repr(call(torch)).replace("torch.return_types.", "ember.return_types.")
    assert str(call(ember)) == repr(call(ember))


def test_return_types_pickle_by_reference():
    r = ember.sort(ember.tensor([3.0, 1.0, 2.0]))
    assert type(r) is ember.return_types.sort and type(r).__module__ == "ember.return_types"
    back = pickle.loads(pickle.dumps(r))
    assert back.values.tolist() == [1.0, 2.0, 3.0] and back.indices.tolist() == [1, 2, 0]
    assert type(ember.linalg.svd(ember.eye(2))) is ember.return_types.linalg_svd
    assert set(ember.return_types.__all__) <= set(dir(torch.return_types))


@pytest.mark.parametrize("shape", [(8, 5), (5, 8), (2, 7, 6)])
def test_svd_lowrank_is_exact_at_full_rank(shape):
    a = ember.randn(*shape, dtype=ember.float64)
    k = min(shape[-2:])
    u, s, v = ember.svd_lowrank(a, q=k, niter=2)
    assert u.shape == shape[:-1] + (k,) and v.shape == shape[:-2] + (shape[-1], k) and s.shape == shape[:-2] + (k,)
    np.testing.assert_allclose((u @ ember.diag_embed(s) @ v.mT).numpy(), a.numpy(), atol=1e-10)
    np.testing.assert_allclose(s.numpy(), ember.linalg.svdvals(a).numpy(), rtol=1e-10)
    # With M: the factorization of A - M.
    m = ember.randn(*shape, dtype=ember.float64)
    u, s, v = ember.svd_lowrank(a, q=k, M=m)
    np.testing.assert_allclose((u @ ember.diag_embed(s) @ v.mT).numpy(), (a - m).numpy(), atol=1e-10)


def test_pca_lowrank_matches_torch_up_to_signs():
    x = np.random.default_rng(0).normal(size=(30, 4)) @ np.diag([5.0, 3.0, 1.0, 0.1])
    e, t = ember.tensor(x), torch.tensor(x)
    _, se, ve = ember.pca_lowrank(e, q=4)
    _, st, vt = torch.pca_lowrank(t, q=4)
    np.testing.assert_allclose(se.numpy(), st.numpy(), rtol=1e-8)
    np.testing.assert_allclose(np.abs(ve.numpy()), np.abs(vt.numpy()), atol=1e-8)
    for lib, a in ((ember, e), (torch, t)):
        with pytest.raises(ValueError, match="q"):
            lib.pca_lowrank(a, q=9)
        with pytest.raises(ValueError, match="niter"):
            lib.pca_lowrank(a, niter=-1)


def test_aten_entry_point_errors_match_torch():
    for lib in (ember, torch):
        x = lib.ones(2, 4, 3)
        with pytest.raises(RuntimeError, match="Mismatch of parameter numbers"):
            lib.prelu(x, lib.ones(3))
        with pytest.raises(RuntimeError, match="Type promoting"):
            lib.prelu(x, lib.ones(4, dtype=lib.float64))
        with pytest.raises(RuntimeError, match="divisible by groups"):
            lib.channel_shuffle(x, 3)
        with pytest.raises(RuntimeError, match="positive"):
            lib.channel_shuffle(x, 0)
        with pytest.raises(RuntimeError, match="derivative for aten::native_channel_shuffle"):
            lib.native_channel_shuffle(x.requires_grad_(), 2).sum().backward()


def test_compat_tensor_methods_match_torch():
    for lib in (ember, torch):
        t = lib.arange(6.0)
        with pytest.warns(UserWarning, match="non-inplace resize is deprecated"):
            assert tuple(t.resize(2, 3).shape) == (2, 3)
        with pytest.warns(UserWarning, match="non-inplace resize_as is deprecated"):
            assert tuple(t.resize_as(lib.ones(3, 2)).shape) == (3, 2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(RuntimeError, match="preserving the number of elements"):
                t.resize(4)
        assert t.is_set_to(t) and not t.is_set_to(t.view(2, 3)) and not t.is_set_to(t.clone())
        assert lib.tensor([2.0]).is_nonzero() and not lib.tensor([0.0]).is_nonzero()
        with pytest.raises(RuntimeError, match="ambiguous"):
            lib.ones(2).is_nonzero()
        assert t.is_distributed() is False
        assert t.to_sparse_coo().to_dense().tolist() == t.tolist()
        p = lib.zeros(2)
        q = p.module_load(lib.ones(2))
        assert q.tolist() == [1.0, 1.0] and p.tolist() == [1.0, 1.0] and not q.requires_grad
        src = lib.full((2,), 3.0)
        assert p.module_load(src, assign=True).tolist() == [3.0, 3.0]


def test_householder_product_errors_match_torch():
    for lib in (ember, torch):
        f = lib.linalg.householder_product
        for a, t in (((3,), (1,)), ((2, 3), (3,)), ((4, 3), (2, 3)), ((4, 3), (4,))):
            with pytest.raises(RuntimeError, match="householder_product"):
                f(lib.ones(*a), lib.ones(*t))
        with pytest.raises(RuntimeError, match="does not match input dtype"):
            f(lib.ones(4, 3), lib.ones(2, dtype=lib.float64))
    # geqrf's reflectors give back the Q of the QR factorization.
    a = np.random.default_rng(4).normal(size=(5, 3))
    t_qr, t_tau = torch.geqrf(torch.tensor(a))
    q = ember.linalg.householder_product(ember.tensor(t_qr.numpy()), ember.tensor(t_tau.numpy()))
    np.testing.assert_allclose(q.numpy(), torch.linalg.qr(torch.tensor(a)).Q.numpy(), atol=1e-12)


@pytest.mark.parametrize("call", [
    lambda L: L.xpu.is_available(),
    lambda L: L.xpu.device_count(),
    lambda L: L.xpu.manual_seed(1),
    lambda L: L.xpu.empty_cache(),
    lambda L: L.xpu.current_device(),
    lambda L: L.xpu.synchronize(),
    lambda L: "xpu" if L.xpu.is_available() else "cpu",
])
def test_xpu_module_answers_as_a_torch_build_without_xpu(call):
    def outcome(lib):
        try:
            return "ok", call(lib)
        except AssertionError:
            return "AssertionError", None

    assert outcome(ember) == outcome(torch)


@pytest.mark.parametrize("call", [
    lambda L: L.mps.is_available(),
    lambda L: L.mps.device_count(),
    lambda L: L.mps.manual_seed(1),
    lambda L: L.mps.synchronize(),
    lambda L: L.mps.empty_cache(),
    lambda L: L.mps.current_allocated_memory(),
    lambda L: L.mps.get_rng_state(),
    lambda L: L.mps.set_per_process_memory_fraction(0.5),
    lambda L: "mps" if L.mps.is_available() else "cpu",
])
def test_mps_module_answers_as_a_torch_build_without_metal(call):
    def outcome(lib):
        try:
            return "ok", call(lib)
        except RuntimeError as exc:
            return "RuntimeError", str(exc)

    assert outcome(ember) == outcome(torch)


def test_types_and_symbolic_classes_exist_as_in_torch():
    # annotations and isinstance checks in PyTorch code: torch.types aliases, torch.SymInt & co.
    import typing

    for name in ("Number", "Device", "_size", "FileLike", "_int", "_float", "_bool", "_dtype", "_device",
                 "_TensorOrTensors", "IntLikeType", "Storage"):
        assert hasattr(ember.types, name), name
    assert typing.get_args(ember.types.Number) == typing.get_args(torch.types.Number)
    assert isinstance(3, ember.types._Number) and not isinstance("3", ember.types._Number)
    assert ember.types._dtype is ember.dtype and ember.types.Storage is type(ember.ones(1).untyped_storage())
    for name in ("SymInt", "SymFloat", "SymBool"):
        cls = getattr(ember, name)
        assert isinstance(cls, type)
        assert isinstance(3, cls) == isinstance(3, getattr(torch, name))
    assert not isinstance(1.5, ember.SymFloat) and not isinstance(True, ember.SymBool)


def test_public_callables_have_a_name_as_torch():
    # memory_format tutorial: it wraps every public callable of torch.Tensor, torch and
    # torch.nn.functional with a checker that reads fn.__name__; ember's ops bound there
    # (Tensor.abs_, ...) had no __name__ (AttributeError on 130 of them).
    import ember.nn.functional

    missing = []
    for t_mod, e_mod in ((torch.Tensor, ember.Tensor), (torch, ember), (torch.nn.functional, ember.nn.functional)):
        for name in dir(t_mod):
            t_fn, e_fn = getattr(t_mod, name, None), getattr(e_mod, name, None)
            if name.startswith("_") or not callable(t_fn) or not hasattr(t_fn, "__name__") or not callable(e_fn):
                continue
            if not isinstance(getattr(e_fn, "__name__", None), str):
                missing.append(name)
    assert not missing
    assert ember.Tensor.abs_.__name__ == torch.Tensor.abs_.__name__ == "abs_"
    assert ember.ops.add.__name__ == "add" and type(ember.ops.add).__name__ == "Op"


def test_tensor_class_is_named_at_the_top_level_as_torch():
    # tensors_deeper tutorial: print(type(x)) shows <class 'torch.Tensor'>; ember's class printed
    # as <class 'ember._src.tensor.Tensor'>.
    assert repr(type(ember.ones(1))) == repr(type(torch.ones(1))).replace("torch", "ember") == "<class 'ember.Tensor'>"
    assert pickle.loads(pickle.dumps(ember.Tensor)) is ember.Tensor


def test_backends_cuda_sdp_switches_as_torch():
    for lib in (ember, torch):
        b = lib.backends.cuda
        assert (b.flash_sdp_enabled(), b.mem_efficient_sdp_enabled(), b.math_sdp_enabled()) == (True, True, True)
        b.enable_flash_sdp(False)
        assert b.flash_sdp_enabled() is False
        b.enable_flash_sdp(True)
        assert b.is_flash_attention_available() in (False, True)
