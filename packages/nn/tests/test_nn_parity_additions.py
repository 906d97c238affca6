"""nn names added for PyTorch parity: nn.grad (convolution gradients), nn.attention (SDPBackend,
sdpa_kernel), NLLLoss2d, nn.common_types and grid_sample's mode tables, against torch."""

import numpy as np
import pytest
import torch
import torch.nn.attention as ta

import ember
import ember.nn.attention as ea


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, groups=2), dict(dilation=2, padding=2)])
def test_conv_grads_match_torch(n, kw):
    r = np.random.default_rng(n)
    spatial = (7,) * n
    x = r.normal(size=(2, 4) + spatial).astype(np.float32)
    w = r.normal(size=(6, 4 // kw.get("groups", 1)) + (3,) * n).astype(np.float32)
    out = getattr(torch.nn.functional, f"conv{n}d")(torch.tensor(x), torch.tensor(w), **kw)
    go = r.normal(size=tuple(out.shape)).astype(np.float32)
    ei = getattr(ember.nn.grad, f"conv{n}d_input")(x.shape, ember.tensor(w), ember.tensor(go), **kw)
    ti = getattr(torch.nn.grad, f"conv{n}d_input")(x.shape, torch.tensor(w), torch.tensor(go), **kw)
    np.testing.assert_allclose(ei.numpy(), ti.numpy(), rtol=1e-4, atol=1e-4)
    ew = getattr(ember.nn.grad, f"conv{n}d_weight")(ember.tensor(x), w.shape, ember.tensor(go), **kw)
    tw = getattr(torch.nn.grad, f"conv{n}d_weight")(torch.tensor(x), w.shape, torch.tensor(go), **kw)
    np.testing.assert_allclose(ew.numpy(), tw.numpy(), rtol=1e-4, atol=1e-4)
    assert not ei.requires_grad and not ew.requires_grad
    assert ember.nn.functional.grad is ember.nn.grad


def test_sdpa_kernel_matches_torch_on_cpu():
    assert {m: v.value for m, v in ea.SDPBackend.__members__.items()} == \
        {m: v.value for m, v in ta.SDPBackend.__members__.items()}
    q = np.random.default_rng(0).normal(size=(1, 2, 3, 4)).astype(np.float32)
    for lib, mod in ((ember, ea), (torch, ta)):
        x = lib.tensor(q)
        f = lib.nn.functional.scaled_dot_product_attention
        with mod.sdpa_kernel([mod.SDPBackend.MATH]):
            assert tuple(f(x, x, x).shape) == (1, 2, 3, 4)
        with mod.sdpa_kernel(mod.SDPBackend.EFFICIENT_ATTENTION):
            with pytest.raises(RuntimeError, match="No viable backend"):
                f(x, x, x)
        assert tuple(f(x, x, x).shape) == (1, 2, 3, 4)  # restored on exit
    for mod in (ea, ta):  # PyTorch checks for a list or an SDPBackend, not a list's items
        with pytest.raises(AssertionError, match="got str"):
            with mod.sdpa_kernel("math"):
                pass
        with mod.sdpa_kernel(["math"]):
            pass


def test_nllloss2d_is_deprecated_nllloss():
    x = np.random.default_rng(1).normal(size=(2, 3, 4, 4)).astype(np.float32)
    t = np.random.default_rng(2).integers(0, 3, size=(2, 4, 4))
    with pytest.warns(FutureWarning, match="NLLLoss2d"):
        le = ember.nn.NLLLoss2d(reduction="sum")(ember.tensor(x).log_softmax(1), ember.tensor(t))
    with pytest.warns(FutureWarning, match="NLLLoss2d"):
        lt = torch.nn.NLLLoss2d(reduction="sum")(torch.tensor(x).log_softmax(1), torch.tensor(t))
    np.testing.assert_allclose(le.item(), lt.item(), rtol=1e-5)
    assert isinstance(ember.nn.NLLLoss2d(), ember.nn.NLLLoss)


def test_tables_and_common_types():
    F, TF = ember.nn.functional, torch.nn.functional
    assert F.GRID_SAMPLE_INTERPOLATION_MODES == TF.GRID_SAMPLE_INTERPOLATION_MODES
    assert F.GRID_SAMPLE_PADDING_MODES == TF.GRID_SAMPLE_PADDING_MODES
    import ember.nn.common_types as ct

    assert ct.T.__name__ == "T" and ct._size_2_t == int | tuple[int, int]
