"""The native host path of CUDA calls (csrc/common/device_fast_path.cpp): views computed in C,
backward nodes recorded natively (float16/bfloat16 included, meta-only formulas, keyword
arguments, a number or an nn.Parameter first, autocast regions), checked against the Python
dispatcher's reference path (entering a dispatch mode sends every call there) on the same
kernels, so values, gradients and node names must be identical. And gelu_backward's CUDA
kernel against the CPU one (GPU only)."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_helpers import assert_same, host, needs_gpu, rand

import ember
from ember._src import dispatch

F = pytest.importorskip("ember.nn.functional")
nn = pytest.importorskip("ember.nn")

pytestmark = [pytest.mark.gpu, needs_gpu]


class _PassThrough(dispatch.DispatchMode):
    """Any entered mode sends calls through the Python dispatcher (the reference path)."""


def _block(x, w, b, ln_w, ln_b):
    # The op mix of a GPT-2 block: layer norm, linear, split, views, attention, gelu, residual.
    h = F.layer_norm(x, (x.shape[-1],), ln_w, ln_b)
    q, k, v = F.linear(h, w, b).split(x.shape[-1], dim=2)
    n, t, c = x.shape
    q, k, v = (u.view(n, t, 2, c // 2).transpose(1, 2) for u in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).contiguous().view(n, t, c)
    y = F.gelu(y, approximate="tanh") * 0.5 + x
    return (y.float() * y.float()).mean() + 2 * y.sum() / y.numel()


def _run(reference, autocast):
    ember.manual_seed(0)
    x = rand((2, 16, 32), ember.float32, seed=1).cuda().requires_grad_()
    params = [nn.Parameter(rand(s, ember.float32, seed=i + 2).cuda() * 0.2)
              for i, s in enumerate([(96, 32), (96,), (32,), (32,)])]
    with _PassThrough() if reference else _Null(), ember.autocast("cuda", dtype=ember.bfloat16, enabled=autocast):
        loss = _block(x, *params)
    names = []
    stack, seen = [loss.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.append(type(node).__name__)
        stack.extend(fn for fn, _ in node.next_functions)
    loss.backward()
    return loss, [x.grad] + [p.grad for p in params], sorted(names)


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("autocast", [False, True])
def test_native_recording_matches_the_python_path(autocast):
    loss, grads, names = _run(False, autocast)
    ref_loss, ref_grads, ref_names = _run(True, autocast)
    assert names == ref_names
    np.testing.assert_array_equal(host(loss), host(ref_loss))
    for g, r in zip(grads, ref_grads):
        assert g.dtype is r.dtype and g.shape == r.shape
        np.testing.assert_array_equal(host(g), host(r))


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.float16])
def test_views_and_numbers_first_record_natively(dtype):
    x = rand((3, 4, 5), dtype, seed=3).cuda().requires_grad_()
    calls = [(lambda t: t.view(12, 5), "ViewBackward0"), (lambda t: t.transpose(0, 2), "TransposeBackward0"),
             (lambda t: t.permute(2, 0, 1), "PermuteBackward0"), (lambda t: t.unsqueeze(1), "UnsqueezeBackward0"),
             (lambda t: t[:1].expand(2, 4, 5), "ExpandBackward0"), (lambda t: 0.5 * t, "MulBackward0"),
             (lambda t: t.narrow(1, 1, 2), "SliceBackward0"), (lambda t: t.double(), "ToCopyBackward0")]
    for fn, node in calls:
        out = fn(x)
        assert out.requires_grad and type(out.grad_fn).__name__ == node, (node, out.grad_fn)
        if out._base is not None:
            assert out._base is x
        x.grad = None
        (out.float() * 3).sum().backward()
        cpu = x.detach().cpu().requires_grad_()
        (fn(cpu).float() * 3).sum().backward()
        assert_same(x.grad, cpu.grad, dtype)


def test_saved_inputs_see_in_place_writes():
    x = rand((4, 4), ember.float32, seed=4).cuda().requires_grad_()
    y = x * 1.0
    z = y.view(16) * y.view(16)  # mul saves its (CUDA) inputs with their version
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16, ember.float64])
def test_gelu_backward_kernel(approximate, dtype):
    x = rand((5, 37), dtype, low=-5, high=5, seed=5)
    for g in (rand((5, 37), dtype, seed=6), rand((37,), dtype, seed=7)):
        want = ember.ops.gelu_backward(g, x, approximate=approximate)
        got = ember.ops.gelu_backward(g.cuda(), x.cuda(), approximate=approximate)
        assert_same(got, want, dtype, rtol=1e-5 if dtype is ember.float32 else None)
    with pytest.raises(RuntimeError, match="approximate"):
        ember.ops.gelu_backward(g.cuda(), x.cuda(), approximate="exact")


@pytest.mark.parametrize("dtype", [ember.float32, ember.bfloat16])
@pytest.mark.parametrize("name", ["sum", "mean", "amax", "nansum"])
def test_split_column_reductions(name, dtype):
    # Few column blocks over many rows (bias and layer-norm weight gradients) take the split
    # column reduction: partials per chunk of rows, then the partials.
    x = rand((8, 1024, 96), dtype, seed=8)
    fn = getattr(ember, name)
    for dims in ((0, 1), (1,), 0):
        assert_same(fn(x.cuda(), dims), fn(x, dims), dtype, rtol=1e-4 if dtype is ember.float32 else None,
                    atol=1e-3 if dtype is ember.float32 else None)
