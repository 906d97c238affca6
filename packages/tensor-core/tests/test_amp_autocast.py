"""ember.autocast against torch.autocast('cpu'): state, nesting, threads, per-op dtypes and values,
and a small forward+backward whose outputs and gradients agree."""

from __future__ import annotations

import threading
import types
import warnings

import numpy as np
import pytest

import ember
from ember._src.ops.nn import attention as nn_attention
from ember._src.ops.nn import loss as nn_loss
from ember._src.ops.nn import norm as nn_norm
from ember._src.ops.nn import resample as nn_resample

from conftest import assert_same, make_pair

torch = pytest.importorskip("torch")
TF = torch.nn.functional
# The core's functional kernels (ember.nn.functional, a package above, re-exports them).
EF = types.SimpleNamespace(
    conv1d=ember.conv1d, conv2d=ember.conv2d, conv_transpose1d=ember.conv_transpose1d,
    scaled_dot_product_attention=nn_attention.scaled_dot_product_attention, layer_norm=nn_norm.layer_norm,
    mse_loss=nn_loss.mse_loss, l1_loss=nn_loss.l1_loss, cross_entropy=nn_loss.cross_entropy,
    binary_cross_entropy_with_logits=nn_loss.binary_cross_entropy_with_logits, pad=nn_resample.pad,
)


def test_defaults_match_torch():
    assert ember.get_autocast_dtype("cpu") is ember.bfloat16
    assert ember.get_autocast_dtype("cuda") is ember.float16
    assert ember.is_autocast_enabled() is torch.is_autocast_enabled() is False
    assert ember.is_autocast_enabled("cpu") is torch.is_autocast_enabled("cpu") is False
    assert ember.is_autocast_cache_enabled() is torch.is_autocast_cache_enabled()
    assert ember.amp.is_autocast_available("cpu") and not ember.amp.is_autocast_available("meta")


def test_nesting_restores_state():
    with ember.autocast("cpu"):
        assert ember.is_autocast_enabled("cpu") and not ember.is_autocast_enabled()
        with ember.autocast("cpu", enabled=False):
            assert not ember.is_autocast_enabled("cpu")
            with ember.autocast("cpu", dtype=ember.float16):
                assert ember.get_autocast_dtype("cpu") is ember.float16
            assert ember.get_autocast_dtype("cpu") is ember.bfloat16
        assert ember.is_autocast_enabled("cpu")
    assert not ember.is_autocast_enabled("cpu")
    assert ember.get_autocast_dtype("cpu") is ember.bfloat16


def test_state_restored_after_exception():
    with pytest.raises(KeyError):
        with ember.autocast("cpu", dtype=ember.float16):
            raise KeyError("x")
    assert not ember.is_autocast_enabled("cpu") and ember.get_autocast_dtype("cpu") is ember.bfloat16


def test_set_functions():
    ember.set_autocast_enabled("cpu", True)
    ember.set_autocast_dtype("cpu", ember.float16)
    try:
        a = ember.ones(2, 2)
        assert ember.mm(a, a).dtype is ember.float16
    finally:
        ember.set_autocast_enabled("cpu", False)
        ember.set_autocast_dtype("cpu", ember.bfloat16)
    assert ember.mm(a, a).dtype is ember.float32


def test_decorator_and_recursion():
    @ember.autocast("cpu")
    def f(a, depth):
        inner = f(a, depth - 1) if depth else None
        return ember.is_autocast_enabled("cpu"), ember.mm(a, a).dtype, inner

    enabled, dtype, inner = f(ember.ones(2, 2), 2)
    assert enabled and dtype is ember.bfloat16 and inner[1] is ember.bfloat16
    assert not ember.is_autocast_enabled("cpu")


def test_thread_local():
    seen = {}

    def worker():
        seen["enabled"] = ember.is_autocast_enabled("cpu")
        seen["dtype"] = ember.mm(ember.ones(2, 2), ember.ones(2, 2)).dtype

    with ember.autocast("cpu"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert ember.mm(ember.ones(2, 2), ember.ones(2, 2)).dtype is ember.bfloat16
    assert seen == {"enabled": False, "dtype": ember.float32}


def test_errors_and_warnings():
    with pytest.raises(ValueError):
        ember.autocast(ember.device("cpu"))
    with pytest.raises(ValueError):
        torch.autocast(torch.device("cpu"))
    with pytest.raises(RuntimeError, match="unsupported autocast device_type"):
        ember.autocast("meta")
    with pytest.raises(TypeError):
        ember.autocast("cpu")(5)
    with pytest.warns(UserWarning, match="target dtype is not supported"):
        ac = ember.autocast("cpu", dtype=ember.float32)
    with ac:
        assert not ember.is_autocast_enabled("cpu")
    with pytest.warns(UserWarning, match="CUDA is not available"):
        ac = ember.autocast("cuda")
    with ac:
        assert not ember.is_autocast_enabled("cuda")


def test_deprecated_aliases_warn():
    with pytest.warns(FutureWarning, match="torch.cpu.amp.autocast"):
        ac = ember.cpu.amp.autocast()
    with ac:
        assert ember.is_autocast_enabled("cpu") and ember.get_autocast_dtype("cpu") is ember.bfloat16
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ac = ember.cuda.amp.autocast()
    assert [w.category for w in caught] == [FutureWarning, UserWarning]
    assert not ac._enabled


def _mk(shape, seed, name="float32"):
    return make_pair(shape, name, low=-2, high=2, seed=seed)


# (name, fn(lib, F, tensors...), input specs): each case is run under both autocasts.
CASES = [
    ("mm", lambda L, F, a, b: L.mm(a, b), [((3, 4), "float32"), ((4, 5), "float32")]),
    ("mm_bf16_f32", lambda L, F, a, b: L.mm(a, b), [((3, 4), "bfloat16"), ((4, 5), "float32")]),
    ("mm_float64", lambda L, F, a, b: L.mm(a, b), [((3, 4), "float64"), ((4, 5), "float64")]),
    ("bmm", lambda L, F, a, b: L.bmm(a, b), [((2, 3, 4), "float32"), ((2, 4, 2), "float32")]),
    ("addmm", lambda L, F, c, a, b: L.addmm(c, a, b), [((3,), "float32"), ((2, 4), "float32"), ((4, 3), "float32")]),
    ("baddbmm", lambda L, F, c, a, b: L.baddbmm(c, a, b),
     [((2, 3, 2), "float32"), ((2, 3, 4), "float32"), ((2, 4, 2), "float32")]),
    ("addbmm", lambda L, F, c, a, b: L.addbmm(c, a, b),
     [((3, 2), "float32"), ((2, 3, 4), "float32"), ((2, 4, 2), "float32")]),
    ("matmul_mv", lambda L, F, a, b: L.matmul(a, b), [((2, 3, 4), "float32"), ((4,), "float32")]),
    ("matmul_dot", lambda L, F, a, b: L.matmul(a, b), [((4,), "float32"), ((4,), "float32")]),
    ("conv2d", lambda L, F, x, w, b: F.conv2d(x, w, b, padding=1),
     [((1, 2, 5, 5), "float32"), ((3, 2, 3, 3), "float32"), ((3,), "float32")]),
    ("conv1d", lambda L, F, x, w: F.conv1d(x, w), [((2, 2, 6), "float32"), ((3, 2, 3), "float32")]),
    ("conv_transpose1d", lambda L, F, x, w: F.conv_transpose1d(x, w), [((1, 2, 5), "float32"), ((2, 3, 2), "float32")]),
    ("sdpa", lambda L, F, q, k, v: F.scaled_dot_product_attention(q, k, v),
     [((1, 2, 3, 4), "float32"), ((1, 2, 3, 4), "float32"), ((1, 2, 3, 4), "float32")]),
    ("cat_promote", lambda L, F, a, b: L.cat([a, b]), [((2, 3), "float32"), ((2, 3), "bfloat16")]),
    ("cat_low", lambda L, F, a, b: L.cat([a, b]), [((2, 3), "bfloat16"), ((2, 3), "bfloat16")]),
    ("cat_double", lambda L, F, a, b: L.cat([a, b]), [((2, 3), "float64"), ((2, 3), "bfloat16")]),
    ("prod", lambda L, F, a: L.prod(a), [((2, 3), "bfloat16")]),
    ("mse_loss", lambda L, F, a, b: F.mse_loss(a, b), [((2, 3), "bfloat16"), ((2, 3), "float32")]),
    ("l1_loss", lambda L, F, a, b: F.l1_loss(a, b), [((2, 3), "bfloat16"), ((2, 3), "bfloat16")]),
    ("bce_logits", lambda L, F, a, b: F.binary_cross_entropy_with_logits(a, b.sigmoid()),
     [((2, 3), "bfloat16"), ((2, 3), "bfloat16")]),
    ("cross_entropy", lambda L, F, a: F.cross_entropy(a, L.tensor([0, 2])), [((2, 3), "bfloat16")]),
    ("cdist", lambda L, F, a, b: L.cdist(a, b), [((3, 2), "bfloat16"), ((4, 2), "bfloat16")]),
    ("trace", lambda L, F, a: L.trace(a), [((3, 3), "bfloat16")]),
    ("rfft", lambda L, F, a: L.fft.rfft(a).real, [((2, 6), "bfloat16")]),
    ("fft2", lambda L, F, a: L.fft.fft2(a).imag, [((4, 4), "float16")]),
    ("quantile", lambda L, F, a: L.quantile(a, 0.3), [((7,), "bfloat16")]),
    ("inverse", lambda L, F, a: L.inverse(a + 4 * L.eye(3, dtype=a.dtype)), [((3, 3), "bfloat16")]),
    ("linalg_solve", lambda L, F, a, b: L.linalg.solve(a + 4 * L.eye(3, dtype=a.dtype), b),
     [((3, 3), "bfloat16"), ((3, 2), "float32")]),
    ("eigvalsh", lambda L, F, a: L.linalg.eigvalsh(a + a.mT), [((3, 3), "bfloat16")]),
    ("matrix_rank", lambda L, F, a: L.linalg.matrix_rank(a), [((3, 3), "bfloat16")]),
    ("index_copy", lambda L, F, a, b: a.index_copy(0, L.tensor([1]), b), [((3, 2), "float32"), ((1, 2), "bfloat16")]),
    ("pad_reflect", lambda L, F, a: F.pad(a, (1, 1), mode="reflect"), [((1, 2, 4), "bfloat16")]),
    ("pad_replicate_3d", lambda L, F, a: F.pad(a, (1, 1, 1, 1, 1, 1), mode="replicate"), [((1, 2, 2, 2), "bfloat16")]),
    ("pad_reflect_3d", lambda L, F, a: F.pad(a, (1, 1, 1, 1, 1, 1), mode="reflect"), [((1, 2, 2, 2), "bfloat16")]),
    ("pad_circular", lambda L, F, a: F.pad(a, (1, 1), mode="circular"), [((1, 2, 4), "bfloat16")]),
    # Not in any list: run in their inputs' dtype.
    ("softmax", lambda L, F, a: L.softmax(a, 0), [((2, 3), "bfloat16")]),
    ("layer_norm", lambda L, F, a: F.layer_norm(a, (3,)), [((2, 3), "float32")]),
    ("add_mixed", lambda L, F, a, b: a + b, [((2, 3), "bfloat16"), ((2, 3), "float32")]),
    ("norm", lambda L, F, a: L.norm(a), [((2, 3), "bfloat16")]),
]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_dtypes_and_values(case, dtype):
    name, fn, specs = case
    pairs = [_mk(shape, seed, name) for seed, (shape, name) in enumerate(specs)]
    if name in ("cat_low", "cat_double") and dtype == "float16":
        # Promotion between bfloat16 inputs and a float16 autocast dtype is an error in both.
        with pytest.raises(RuntimeError), torch.autocast("cpu", dtype=torch.float16):
            fn(torch, TF, *[t for _, t in pairs])
        with pytest.raises(RuntimeError, match="float16"), ember.autocast("cpu", dtype=ember.float16):
            fn(ember, EF, *[e for e, _ in pairs])
        return
    with torch.autocast("cpu", dtype=getattr(torch, dtype)):
        expected = fn(torch, TF, *[t for _, t in pairs])
    with ember.autocast("cpu", dtype=getattr(ember, dtype)):
        got = fn(ember, EF, *[e for e, _ in pairs])
    # Both sides round the same casts; results may differ by a low-precision ulp or two.
    assert_same(got, expected, rtol=3e-2, atol=3e-2)


def test_enabled_false_is_exact_noop():
    a, _ = _mk((4, 5), 0)
    b, _ = _mk((5, 3), 1)
    plain = ember.mm(a, b)
    with ember.autocast("cpu", enabled=False):
        inside = ember.mm(a, b)
    assert inside.dtype is ember.float32
    assert np.array_equal(inside.numpy(), plain.numpy())


def test_out_tensor_keeps_dtype_and_meta_untouched():
    a, _ = _mk((2, 2), 0)
    out = ember.empty(2, 2)
    with ember.autocast("cpu"):
        ember.matmul(a, a, out=out)
        m = ember.mm(ember.empty(2, 3, device="meta"), ember.empty(3, 2, device="meta"))
    assert out.dtype is ember.float32 and m.dtype is ember.float32


def test_weight_cast_cached_within_region():
    from ember._src import autocast as ac

    w = ember.ones(3, 3, requires_grad=True)
    x = ember.ones(2, 3)
    with ember.autocast("cpu"):
        ember.mm(x, w)
        assert len(ac.STATE.cache) == 1
        ember.mm(x, w)
        assert len(ac.STATE.cache) == 1
        with ember.autocast("cpu", cache_enabled=False):
            ember.mm(x, ember.ones(3, 3, requires_grad=True))
        assert len(ac.STATE.cache) == 1
    assert len(ac.STATE.cache) == 0


def test_weight_cast_cache_keeps_the_regions_first_cast_as_torch():
    # PyTorch's cache holds a leaf weight's cast for the whole outermost region, keyed by the tensor (not its
    # version): a weight written in place (under no_grad) inside the region is not re-cast until the region
    # ends. Same values and dtypes as torch's CPU bfloat16 autocast, one shared cast node.
    out = {}
    for lib in (ember, torch):
        w = lib.nn.Parameter(lib.arange(6.0).reshape(3, 2) / 4)
        x = lib.ones(2, 3)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            a = lib.mm(x, w)
            with lib.no_grad():
                w.mul_(3)
            b = lib.mm(x, w)
        c = lib.mm(x, w)
        with lib.autocast("cpu", dtype=lib.bfloat16):
            d = lib.mm(x, w)
        same_node = a.grad_fn.next_functions[1][0] is b.grad_fn.next_functions[1][0]
        out[lib.__name__] = [(t.dtype, t.float().tolist()) for t in (a, b, c, d)] + [same_node]
    assert str(out["ember"]).replace("ember.", "torch.") == str(out["torch"])
    assert out["torch"][-1] is True and out["torch"][0][1] == out["torch"][1][1] != out["torch"][3][1]


def test_autocast_mode_is_an_attribute_of_amp():
    # torch.amp.autocast_mode.is_autocast_available(...) works after a bare `import torch`.
    import subprocess
    import sys

    script = "import ember; print(ember.amp.autocast_mode.is_autocast_available('cpu'), ember.amp.grad_scaler.__name__)"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "ember.amp.grad_scaler"]
