"""Column sums fused into the kernel that produces their input (C++ backend).

A bias gradient sums the rows of the gradient a backward kernel writes (GELU's, a layer_norm
backward's); a layer_norm weight/bias gradient sums terms of the values its backward reads. The
scheduler puts such a sum in the producing kernel, whose threads add their rows into partial
column sums combined when the kernel ends, instead of a kernel of its own reading the gradient
again. Values are checked against eager ember and PyTorch (NaN/inf, dtypes, non-contiguous and
empty inputs), and the kernel counts fail if the sums come back as kernels of their own.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from inductor_test_helpers import check, make_input, spy_on_builds, tolerances

import ember
from ember.compiler.inductor import config


def _gelu_grad_and_bias(m, g, a):
    """GELU's backward (tanh form) and the bias gradient of the linear layer before it."""
    t = m.tanh(0.79788 * (a + 0.044715 * a * a * a))
    d = g * (0.5 * (1 + t) + 0.5 * a * (1 - t * t) * 0.79788 * (1 + 0.134145 * a * a))
    rows = 1
    for n in d.shape[:-1]:
        rows *= n
    return d, d.reshape(rows, d.shape[-1]).sum(0)


def _sum_only_kernels(source: str) -> list:
    """The kernels whose fused ops are sums alone (a column sum run as a kernel of its own)."""
    heads = re.findall(r"^// (kernel\d+): (.*)$", source, re.M)
    return [name for name, ops in heads if all(op.startswith("sum") for op in ops.split(", "))]


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64, ember.float16, ember.bfloat16])
def test_bias_gradient_sums_inside_the_gradient_kernel(dtype):
    half = dtype in (ember.float16, ember.bfloat16)
    # NaN, infinities and signed zeros among the values; for half types positive others, so that
    # no column sum cancels to a small difference of rounded terms (eager rounds after every op of
    # the chain, the kernel once at its end: the gradients differ by an ulp or so)
    low, high = (0.5, 2.0) if half else (-2.0, 2.0)
    g = make_input((4, 6, 40), dtype, low=low, high=high)
    a = make_input((4, 6, 40), dtype, seed=1, low=low, high=high)
    rtol, atol = (2e-2, 2e-2) if half else tolerances(dtype)
    compiled = check(_gelu_grad_and_bias, g, a, rtol=max(rtol, 1e-5), atol=max(atol, 1e-5), kernels=1)
    source = compiled.artifact.cpp_source
    assert "col_" in source and not _sum_only_kernels(source), source
    # the fused sum is the sum of the gradient the kernel stored (as a half type holds it)
    d, bias = compiled(g, a)
    want = d.double().numpy().reshape(-1, 40).sum(0)
    np.testing.assert_allclose(bias.double().numpy(), want, rtol=1e-2 if half else 1e-6, atol=1e-6, equal_nan=True)


def test_without_column_fusion_the_sum_is_a_kernel_of_its_own():
    g, a = make_input((4, 6, 40), ember.float32), make_input((4, 6, 40), ember.float32, seed=1)
    with config.patch("cpp.fuse_column_sums", False):
        compiled = check(_gelu_grad_and_bias, g, a, rtol=1e-5, atol=1e-5, kernels=2)
    assert len(_sum_only_kernels(compiled.artifact.cpp_source)) == 1


def test_many_rows_split_over_threads_add_up_in_thread_order():
    # past the parallel threshold: each thread's partial sums, combined when the kernel ends
    g = make_input((64, 32, 48), ember.float32, specials=False)
    a = make_input((64, 32, 48), ember.float32, seed=1, specials=False)
    threads = ember.get_num_threads()
    try:
        for n in (1, 2, 3):
            ember.set_num_threads(n)
            check(_gelu_grad_and_bias, g, a, rtol=1e-4, atol=1e-4, kernels=1)
    finally:
        ember.set_num_threads(threads)


def test_strided_inputs():
    # every other column of a wider tensor: strided along the row, the sum still fuses
    g = make_input((24, 80), ember.float32)[:, ::2]
    a = make_input((24, 80), ember.float32, seed=1)[:, 1::2]
    check(_gelu_grad_and_bias, g, a, rtol=1e-5, atol=1e-5, kernels=1)
    # a transposed operand: a row-major walk would read it a column at a time, so no fusion,
    # but the same values
    gt = make_input((40, 24), ember.float32).t()
    check(_gelu_grad_and_bias, gt, make_input((24, 40), ember.float32, seed=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(0, 16), (5, 0), (0, 0)])
def test_empty(shape):
    g, a = make_input(shape, ember.float32), make_input(shape, ember.float32, seed=1)
    check(_gelu_grad_and_bias, g, a)


def _scaled_rows(m, x, w):
    """A row reduction (each row's sum of squares) and a column sum of its normalized rows."""
    y = x * m.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w
    return y, y.sum(0)


def test_column_sum_of_a_row_kernel_output():
    x = make_input((33, 24), ember.float32, specials=False)
    w = make_input((24,), ember.float32, seed=1, specials=False)
    compiled = check(_scaled_rows, x, w, rtol=1e-5, atol=1e-5, kernels=1)
    assert not _sum_only_kernels(compiled.artifact.cpp_source)


@pytest.mark.parametrize("program", [
    lambda m, x: (m.softmax(x, -1), m.softmax(x, -1).sum(0)),  # the normalization's own loop
    lambda m, x: (m.nn.functional.layer_norm(x, (x.shape[-1],)), m.nn.functional.layer_norm(x, (x.shape[-1],)).sum(0)),
    lambda m, x: (x - x.amax(-1, keepdim=True), x.sum(0)),  # the sum rides in the row max's loop
], ids=["softmax", "layer_norm", "row_max"])
@pytest.mark.parametrize("rows", [5, 300])
def test_column_sums_beside_row_reductions(program, rows):
    x = make_input((rows, 130), ember.float32)
    compiled = check(program, x, rtol=1e-5, atol=1e-4)
    assert not _sum_only_kernels(compiled.artifact.cpp_source), compiled.artifact.cpp_source


def test_integer_column_sum():
    x = make_input((7, 9), ember.int32)
    check(lambda m, x: (x * 3 + 1, (x * 3 + 1).sum(0)), x, kernels=1)


@pytest.fixture
def built(monkeypatch):
    out = spy_on_builds(monkeypatch)
    monkeypatch.setattr(config, "fallback_on_error", False)
    return out


def _grads(fw, fn, arrays):
    leaves = [fw.tensor(a, requires_grad=True) for a in arrays]
    fn(fw, *leaves).backward()
    return [t.grad.numpy() for t in leaves]


def _layer_norm_loss(fw, x, w, b, g):
    return (fw.nn.functional.layer_norm(x, (x.shape[-1],), w, b) * g).sum()


def _assert_compiled_grads_match(loss, arrays):
    """The gradients of the compiled ``loss`` equal eager ember's and torch's."""
    compiled = ember.compile(lambda fw, *a: loss(fw, *a))
    got = _grads(ember, lambda fw, *a: compiled(fw, *a), arrays)
    for want in (_grads(ember, loss, arrays), _grads(torch, loss, arrays)):
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_layer_norm_weight_and_bias_gradients_inside_its_backward_kernel(built):
    r = np.random.default_rng(0)
    arrays = [r.standard_normal((6, 10, 32)).astype(np.float32), r.standard_normal(32).astype(np.float32),
              r.standard_normal(32).astype(np.float32), r.standard_normal((6, 10, 32)).astype(np.float32)]
    _assert_compiled_grads_match(_layer_norm_loss, arrays)
    backward = [a for a in built if "native_layer_norm_backward" in a.cpp_source]
    assert len(backward) == 1, [a.cpp_source for a in built]
    art = backward[0]
    assert art.kernel_count == 1 and not _sum_only_kernels(art.cpp_source), art.cpp_source


def _embedding_sum_loss(fw, tok, pos, w, g):
    """A position embedding's gradient: the batch sum of the last layer_norm backward, which is
    also the token embeddings' gradient (as in a GPT)."""
    return (fw.nn.functional.layer_norm(tok + pos, (tok.shape[-1],), w) * g).sum()


def test_a_value_a_sum_and_another_node_read_is_computed_once(built):
    r = np.random.default_rng(1)
    arrays = [r.standard_normal((4, 8, 32)).astype(np.float32), r.standard_normal((8, 32)).astype(np.float32),
              r.standard_normal(32).astype(np.float32), r.standard_normal((4, 8, 32)).astype(np.float32)]
    _assert_compiled_grads_match(_embedding_sum_loss, arrays)
    backward = [a for a in built if "native_layer_norm_backward" in a.cpp_source]
    art = backward[0]
    assert art.kernel_count == 1 and not _sum_only_kernels(art.cpp_source), art.cpp_source
    # the layer_norm backward's last step (times the row's rstd / 32) is computed once an element,
    # and both the token gradient's store and the position gradient's sum take that value
    kernel = art.cpp_source[art.cpp_source.index("// kernel"):]
    assert len(re.findall(r"/ 32\.0f\)", kernel)) == 1, kernel


def _gelu_grad_and_bias_dims(m, g, a):
    t = m.tanh(0.79788 * (a + 0.044715 * a * a * a))
    d = g * (0.5 * (1 + t) + 0.5 * a * (1 - t * t) * 0.79788 * (1 + 0.134145 * a * a))
    return d, d.sum((0, 1))


def test_batch_sizes_through_compile(built):
    fn = ember.compile(lambda g, a: _gelu_grad_and_bias_dims(ember, g, a), dynamic=True)
    for batch in (3, 7, 1):
        g = make_input((batch, 5, 24), ember.float32, seed=batch)
        a = make_input((batch, 5, 24), ember.float32, seed=batch + 1)
        ref = _gelu_grad_and_bias_dims(torch, torch.from_numpy(g.numpy()), torch.from_numpy(a.numpy()))
        for got, want, r in zip(fn(g, a), _gelu_grad_and_bias_dims(ember, g, a), ref):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5, equal_nan=True)
            np.testing.assert_allclose(got.numpy(), r.numpy(), rtol=1e-5, atol=1e-5, equal_nan=True)
    assert built and all(art.kernel_count == 1 for art in built), [art.cpp_source for art in built]


def _qkv_cat_and_bias(m, q, k, v):
    """The attention's q/k/v gradients (B, H, T, D; k's transposed, B, H, D, T) merged into the
    qkv gradient (B, T, 3*H*D) by a cat of their head merges, and the qkv bias gradient: a column
    sum over that cat (the mini-GPT backward's)."""
    B, H, T, D = q.shape
    parts = [q.transpose(1, 2).reshape(B, T, H * D), k.transpose(2, 3).transpose(1, 2).reshape(B, T, H * D),
             v.transpose(1, 2).reshape(B, T, H * D)]
    g = m.cat(parts, -1)
    return g, g.reshape(B * T, 3 * H * D).sum(0)


def _cat_and_column_sum(m, a, b):
    g = m.cat([a, b * 2], -1)
    return g, g.reshape(-1, g.shape[-1]).sum(0)


@pytest.mark.parametrize("shape", [(2, 4, 40, 16), (3, 2, 33, 8)])
def test_bias_gradient_of_a_cat_sums_inside_the_cat_kernel(shape):
    # the cat of a transposed copy is tiled; each piece's stored value is added at its column in
    # the tiles (per-thread partial sums), so the bias gradient is no kernel of its own
    B, H, T, D = shape
    q, v = make_input(shape, ember.float32), make_input(shape, ember.float32, seed=2)
    k = make_input((B, H, D, T), ember.float32, seed=1)
    # (the cat's output is allocated by an extern `empty`, the pieces' stores fill it)
    compiled = check(_qkv_cat_and_bias, q, k, v, rtol=1e-5, atol=1e-5, lowered=False)
    assert compiled.artifact.kernel_count == 1, compiled.artifact.wrapper_source
    source = compiled.artifact.cpp_source
    assert "col_" in source and not _sum_only_kernels(source), source
    g, bias = compiled(q, k, v)
    np.testing.assert_allclose(bias.double().numpy(), g.double().numpy().reshape(-1, 3 * H * D).sum(0),
                               rtol=1e-6, atol=1e-5, equal_nan=True)


def test_cat_column_sum_without_tiles_walks_the_stored_rows():
    # a cat of row-major pieces (of one width: one kernel) is not tiled: the sum walks the rows the
    # kernel stored, after them
    a, b = make_input((5, 7, 24), ember.float32), make_input((5, 7, 24), ember.float32, seed=1)
    compiled = check(_cat_and_column_sum, a, b, rtol=1e-5, atol=1e-5, lowered=False)
    assert compiled.artifact.kernel_count == 1, compiled.artifact.wrapper_source
    assert not _sum_only_kernels(compiled.artifact.cpp_source)


def test_cat_column_sum_in_the_mini_gpt_backward(built):
    # the qkv projection's bias gradient of an attention block, against torch (values and kernels)
    g = np.random.default_rng(4)
    arrays = [(g.standard_normal(shape) * 0.3).astype(np.float32) for shape in ((2, 33, 16), (48, 16), (48,))]

    def loss(fw, x, w, b):
        B, T, C = x.shape
        q, k, v = fw.nn.functional.linear(x, w, b).split(C, dim=2)
        q, k, v = (t.view(B, T, 2, C // 2).transpose(1, 2) for t in (q, k, v))
        y = fw.softmax(q @ k.transpose(-2, -1), -1) @ v
        return (y.transpose(1, 2).reshape(B, T, C) ** 2).sum()

    _assert_compiled_grads_match(loss, arrays)
    backward = [a for a in built if "cat" in a.wrapper_source and "sum" in a.wrapper_source]
    assert backward and all(not _sum_only_kernels(a.cpp_source) for a in backward), \
        [a.wrapper_source for a in backward]
