"""DLPack exchange of CUDA tensors with PyTorch (both ways, shared memory) and autocast on CUDA
with PyTorch's CUDA op lists (GPU only; the DLPack tests also need a CUDA build of PyTorch)."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import host, needs_gpu, rand

import ember

pytestmark = [pytest.mark.gpu, needs_gpu]


def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA build of PyTorch")
    return torch


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.int64, ember.bool, ember.float16])
def test_ember_to_torch_shares_memory(dtype):
    torch = _torch_cuda()
    x = rand((6, 5), dtype).cuda()
    view = x.t()  # strides travel with the capsule
    assert view.__dlpack_device__() == (2, 0)
    t = torch.from_dlpack(view)
    assert t.is_cuda and tuple(t.shape) == (5, 6) and t.stride() == tuple(view.stride())
    np.testing.assert_array_equal(t.float().cpu().numpy() if t.is_floating_point() else t.cpu().numpy(),
                                  host(view).astype(np.float32) if t.is_floating_point() else host(view))
    if dtype is ember.float32:
        t[0, 0] = 42.0  # the same device memory
        assert float(host(x)[0, 0]) == 42.0


def test_torch_to_ember_shares_memory_and_lives_on():
    torch = _torch_cuda()
    t = torch.arange(24, dtype=torch.float32, device="cuda").reshape(4, 6)[:, 1::2]
    e = ember.from_dlpack(t)
    assert e.device.type == "cuda" and tuple(e.shape) == (4, 3) and tuple(e.stride()) == t.stride()
    np.testing.assert_array_equal(host(e), t.cpu().numpy())
    e.mul_(2.0)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(t.cpu().numpy(), np.arange(24, dtype=np.float32).reshape(4, 6)[:, 1::2] * 2)
    ref = t.cpu().numpy()
    del t  # ember's view keeps the producer's memory alive
    torch.cuda.empty_cache()
    np.testing.assert_array_equal(host(e), ref)
    bf = ember.from_dlpack(torch.ones(3, dtype=torch.bfloat16, device="cuda"))
    assert bf.dtype is ember.bfloat16 and host(bf).tolist() == [1.0, 1.0, 1.0]
    round_trip = ember.from_dlpack(torch.from_dlpack(e))
    assert round_trip.data_ptr() == e.data_ptr()


def test_autocast_cuda_policies():
    a, b = rand((16, 32)).cuda(), rand((32, 8), seed=1).cuda()
    with ember.autocast("cuda", dtype=ember.bfloat16):
        mm = a @ b
        sm = ember.softmax(mm, -1)  # fp32_set_opt_dtype: float32 out
        ex = ember.exp(mm)  # float32 list
        total = mm.sum()
        keep = ember.softmax(mm, -1, dtype=ember.bfloat16)  # an explicit dtype is respected
        cat = ember.cat([mm, a[:, :8]])  # promote: the widest
    assert mm.dtype is ember.bfloat16
    assert sm.dtype is ember.float32 and ex.dtype is ember.float32 and total.dtype is ember.float32
    assert keep.dtype is ember.bfloat16 and cat.dtype is ember.float32
    np.testing.assert_allclose(host(mm), host(a) @ host(b), rtol=2e-2, atol=5e-2)
    with ember.autocast("cuda"):  # float16 by default on CUDA
        assert (a @ b).dtype is ember.float16
    with ember.autocast("cpu"):  # CPU autocast leaves CUDA tensors alone
        assert (a @ b).dtype is ember.float32


def test_autocast_cuda_training_with_grad_scaler():
    nn = pytest.importorskip("ember.nn")
    F = pytest.importorskip("ember.nn.functional")
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 10)).cuda()
    opt = ember.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = ember.amp.GradScaler("cuda")
    x, y = ember.randn(64, 32).cuda(), ember.randint(0, 10, (64,)).cuda()
    losses = []
    for _ in range(10):
        with ember.autocast("cuda", dtype=ember.float16):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
        assert logits.dtype is ember.float16 and loss.dtype is ember.float32
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    assert all(p.grad.dtype is ember.float32 for p in model.parameters())
    assert losses[-1] < losses[0]
